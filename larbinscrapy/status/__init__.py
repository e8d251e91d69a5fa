"""larbin's httpPort and inputPort: a live status page, a control API and Prometheus metrics."""

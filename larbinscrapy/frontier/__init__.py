"""larbin's frontier: disk segment FIFOs, per-site and per-IP queues, the scheduler."""

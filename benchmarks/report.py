"""The benchmark's markdown report, from the data ``benchmarks/run.py`` collects."""

from __future__ import annotations

from typing import Any

from benchmarks.peers import CRAWLERS, LABELS


def fmt(value: Any, digits: int = 1) -> str:
    if value is None:
        return "-"
    if isinstance(value, float):
        return f"{value:.{digits}f}"
    return str(value)


def _pct(value: float | None) -> str:
    return "-" if value is None else f"{100 * value:.1f}%"


def render_markdown(report: dict[str, Any]) -> str:
    m = report["machine"]
    lines = [
        "# larbinscrapy benchmark",
        "",
        f"`{report['command']}` on {m.get('cpu', '?')}, {m['cpus']} CPUs, "
        f"{m.get('mem_gib', '?')} GiB; Python {m['python']}, Scrapy {m.get('scrapy', '?')}, "
        f"Twisted {m.get('twisted', '?')}, nginx {m.get('nginx', '?')}; "
        f"load average at start {m['loadavg_start'][0]:.2f}; total {report['seconds']:.0f} s.",
        "",
    ]
    if "https" in report["scenarios"]:
        lines += _render_https(report["scenarios"]["https"])
    for name in ("cpu", "large"):
        if name in report["scenarios"]:
            lines += _render_cpu(report["scenarios"][name])
    if "polite" in report["scenarios"]:
        lines += _render_polite(report["scenarios"]["polite"])
    if report.get("profile"):
        lines += render_profile(report["profile"])
    if report.get("micro"):
        lines += _render_micro(report["micro"])
    return "\n".join(lines) + "\n"


RATIO_ROWS = (  # (ratio key, label): each > 1 when larbinscrapy does better
    ("cpu_ms_per_page", "CPU ms/page, peer / larbin"),
    ("marginal_cpu_ms_per_page", "CPU ms/page above start-up, peer / larbin"),
    ("fetch_pages_per_s", "pages/s over the fetch span, larbin / peer"),
    ("wall_s", "wall time to exit, peer / larbin"),
    ("maxrss_mb", "peak RSS, peer / larbin"),
)


def _render_cpu(res: dict[str, Any]) -> list[str]:
    c, w, s = res["config"], res["web"], res["summary"]
    crawlers = [k for k in CRAWLERS if k in s]
    title = {"large": "Large CPU-bound crawl", "https": "https, CPU-bound crawl"}.get(
        c["name"], "CPU-bound crawl"
    )
    lines = [
        f"## {title}: {w['hosts']} hosts x {w['pages_per_host']} pages = "
        f"{w['pages']} pages ({w['bytes_per_page'] / 1024:.1f} KiB/page), "
        f"{w.get('dead_addresses', 0)} dead addresses",
        "",
        f"DOWNLOAD_DELAY 0; {c['concurrent']} requests in flight (larbinscrapy, crawlee, "
        f"plain Scrapy), CONCURRENT_REQUESTS_PER_DOMAIN {c['per_domain']} for the Scrapy "
        f"peers; wget fetches one page at a time. Medians of the ok runs out of "
        f"{c['reps']}.",
        "",
        "| | " + " | ".join(LABELS[k] for k in crawlers) + " |",
        "|---|" + "---:|" * len(crawlers),
    ]

    def med(key: str, digits: int = 1) -> Any:
        return lambda k: fmt(s[k]["median"][key], digits)

    rows = [
        ("runs ok", lambda k: f"{s[k]['ok_runs']}/{s[k]['runs']}"),
        ("pages fetched (200)", med("pages_fetched", 0)),
        ("coverage", lambda k: _pct(s[k]["median"]["coverage"])),
        ("duplicate fetches", med("duplicates", 0)),
        ("**CPU ms/page**", med("cpu_ms_per_page", 2)),
        ("**CPU ms/page above start-up**", med("marginal_cpu_ms_per_page", 2)),
        (
            "start-up CPU, s (closed after 1 page)",
            lambda k: fmt(res.get("startup", {}).get(k, {}).get("cpu_s"), 2),
        ),
        ("fetch span (first to last request), s", med("active_s")),
        ("**pages/s over the fetch span**", med("fetch_pages_per_s")),
        ("**wall time to exit, s**", med("wall_s")),
        ("of which after the last request, s", med("tail_s")),
        ("CPU user+sys, s", med("cpu_s")),
        ("**peak RSS, MB**", med("maxrss_mb")),
        (
            "nginx CPU, s (share of the crawler's)",
            lambda k: (
                f"{fmt(s[k]['median']['nginx_cpu_s'], 3)} "
                f"({_pct(s[k]['median']['nginx_cpu_share'])})"
            ),
        ),
    ]
    for label, cell in rows:
        lines.append(f"| {label} | " + " | ".join(cell(k) for k in crawlers) + " |")
    peers = [k for k in crawlers if k in s["ratios"]]
    if peers:
        lines += [
            "",
            "Ratios against larbinscrapy, medians of the per-repetition ratios "
            "(> 1: larbinscrapy does better):",
            "",
            "| | " + " | ".join(LABELS[k] for k in peers) + " |",
            "|---|" + "---:|" * len(peers),
        ]
        for key, label in RATIO_ROWS:
            lines.append(
                f"| {label} | " + " | ".join(fmt(s["ratios"][k][key], 2) for k in peers) + " |"
            )
    for crawler, why in res.get("absent", {}).items():
        lines += ["", f"{LABELS[crawler]}: absent ({why})."]
    lines += ["", *_render_runs(res["runs"], polite=False), *_render_failures(res["runs"])]
    return lines


def _render_https(res: dict[str, Any]) -> list[str]:
    """The https scenario: the CPU table over TLS, then https / http per crawler, paired."""
    lines = _render_cpu(res)
    s, h, ratio = res["summary"], res["http_summary"], res["https_over_http"]
    crawlers = [k for k in CRAWLERS if k in ratio]
    if not crawlers:
        return lines
    lines += [
        "",
        "The same web over http in the same repetitions (each crawler's https and "
        "http crawls back to back), and what nginx counted:",
        "",
        "| | " + " | ".join(LABELS[k] for k in crawlers) + " |",
        "|---|" + "---:|" * len(crawlers),
    ]
    rows = [
        ("CPU ms/page, https", lambda k: fmt(s[k]["median"]["cpu_ms_per_page"], 2)),
        ("CPU ms/page, http", lambda k: fmt(h[k]["median"]["cpu_ms_per_page"], 2)),
        (
            "**https / http CPU per page** (median of pairs)",
            lambda k: fmt(ratio[k]["cpu_ms_per_page"], 2),
        ),
        ("coverage over http", lambda k: _pct(h[k]["median"]["coverage"])),
        ("TLS connections (nginx)", lambda k: fmt(s[k]["median"]["connections"], 0)),
        ("of which resumed sessions", lambda k: fmt(s[k]["median"]["tls_resumed"], 0)),
        ("robots.txt requests, https", lambda k: fmt(s[k]["median"]["robots_requests"], 0)),
    ]
    for label, cell in rows:
        lines.append(f"| {label} | " + " | ".join(cell(k) for k in crawlers) + " |")
    return [*lines, ""]


def _render_runs(runs: list[dict[str, Any]], polite: bool) -> list[str]:
    head = (
        "| rep | crawler | status | wall s | fetch span s | pages | coverage | dup "
        "| pages/s (span) | CPU s | CPU ms/page | RSS MB | nginx CPU s |"
    )
    if polite:
        head += " efficiency | violations | min interval ms |"
    lines = ["### Runs", "", head, "|" + "---|" * (head.count("|") - 1)]
    for r in runs:
        row = (
            f"| {r['rep'] + 1} | {LABELS[r['crawler']]} | {r['status']} | {r['wall_s']:.1f} "
            f"| {r['active_s']:.1f} | {r['pages_fetched']} | {_pct(r['coverage'])} "
            f"| {r['duplicates']} | {fmt(r['fetch_pages_per_s'])} | {r['cpu_s']:.2f} "
            f"| {fmt(r['cpu_ms_per_page'], 2)} "
            f"| {r['maxrss_mb']:.0f} | {r['nginx_cpu_s']:.3f} |"
        )
        if polite:
            p = r["politeness"]
            mi = None if p["min_interval_s"] is None else 1000 * p["min_interval_s"]
            row += f" {fmt(p['efficiency'], 3)} | {p['violations']} | {fmt(mi, 0)} |"
        lines.append(row)
    return [*lines, ""]


def _render_failures(runs: list[dict[str, Any]]) -> list[str]:
    lines: list[str] = []
    for r in runs:
        if r["status"] == "ok":
            continue
        lines += [
            f"**{LABELS[r['crawler']]}, rep {r['rep'] + 1}: {r['status']}** "
            f"(exit code {r['exit_code']}); last lines of stderr:",
            "",
            "```",
            *r["stderr_tail"],
            "```",
            "",
        ]
    return lines


def _render_polite(res: dict[str, Any]) -> list[str]:
    c, w, s = res["config"], res["web"], res["summary"]
    crawlers = [k for k in CRAWLERS if k in s]
    lines = [
        f"## Politeness-bound crawl: {w['hosts']} hosts (one IP each) x "
        f"{w['pages_per_host']} pages, DOWNLOAD_DELAY {c['delay']} s",
        "",
        "Intervals per server IP from nginx's log, robots.txt included. Efficiency = "
        "intervals per second over the active period / (IPs / delay). Plain Scrapy runs "
        "with RANDOMIZE_DOWNLOAD_DELAY=False. crawlee-python and wget are not in this "
        "scenario: neither has a per-host delay (wget's --wait is one for all hosts).",
        "",
        "| | " + " | ".join(LABELS[k] for k in crawlers) + " |",
        "|---|" + "---:|" * len(crawlers),
    ]
    for label, key, digits in (
        ("runs ok", None, 0),
        ("efficiency", "efficiency", 3),
        ("violations (intervals < delay)", "violations", 0),
        ("min interval, ms", "min_interval_s", 0),
        ("active period, s", "span_s", 1),
        ("coverage", "coverage", 0),
        ("wall time, s", "wall_s", 1),
        ("CPU ms/page", "cpu_ms_per_page", 2),
    ):
        cells = []
        for k in crawlers:
            if key is None:
                cells.append(f"{s[k]['ok_runs']}/{s[k]['runs']}")
                continue
            v = s[k]["median"][key]
            if key == "min_interval_s" and v is not None:
                v *= 1000
            cells.append(_pct(v) if key == "coverage" else fmt(v, digits))
        lines.append(f"| {label} | " + " | ".join(cells) + " |")
    lines += ["", *_render_runs(res["runs"], polite=True), *_render_failures(res["runs"])]
    return lines


def render_profile(prof: dict[str, Any]) -> list[str]:
    f = prof["fetches"]
    proc = prof["process"]
    lines = [
        f"## Profile: {LABELS[prof['target']]} under {prof['profiler']}",
        "",
        f"{f['pages_fetched']} pages in {proc['wall_s']:.1f} s (profiler overhead "
        f"included); top {len(prof['rows'])} functions by self time.",
        "",
        "| # | self % | incl % | function |",
        "|---:|---:|---:|---|",
    ]
    for i, row in enumerate(prof["rows"], 1):
        lines.append(
            f"| {i} | {row['self_pct']:.1f} | {row['incl_pct']:.1f} | `{row['function']}` |"
        )
    if not prof["rows"] or proc["exit_code"] != 0 or not f["pages_fetched"]:
        how = proc["stopped"] or f"exit code {proc['exit_code']}"
        lines += [
            "",
            f"**The crawl failed** ({how}, {f['pages_fetched']} pages): the profile "
            "is not of a crawl. Last lines of stderr:",
            "",
            "```",
            *proc["stderr_tail"],
            "```",
        ]
    return [*lines, ""]


def _render_micro(micro: list[dict[str, Any]]) -> list[str]:
    lines = ["## Micro-benchmarks", ""]
    for m in micro:
        if m["status"] == "absent":
            lines += [f"### {m['name']}: not present", ""]
            continue
        lines += [
            f"### {m['name']} ({m['status']}, {m['seconds']:.0f} s)",
            "",
            m["stdout"].rstrip(),
            "",
        ]
        if m["status"] != "ok":
            lines += [
                f"exit code {m['exit_code']}; last lines of stderr:",
                "",
                "```",
                *m["stderr_tail"],
                "```",
                "",
            ]
    return lines

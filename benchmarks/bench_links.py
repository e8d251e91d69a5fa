"""Link extraction and URL hashing: larbinscrapy's regex scanner versus Scrapy's stock path.

    python benchmarks/bench_links.py [--pages N] [--runs N] [--json PATH] [--adversarial]
    python benchmarks/bench_links.py --baseline OLD_LINKS_PY [--pages N] [--runs N]

Generates deterministic synthetic pages (30-60 links each: absolute, root-relative, relative,
dot segments, queries with ``&amp;``, fragments, ``mailto:``/``javascript:``, comments, mixed
quoting and case), then times ``links.extract`` against ``LinkExtractor().extract_links`` (lxml
parse included: a fresh ``HtmlResponse`` per page per run, built outside the timer), and
``urls.canonicalize`` / ``urls.fingerprint_url`` against ``canonicalize_url`` and Scrapy's default
``RequestFingerprinter`` (which needs a ``Request`` first, so that is timed too). Median of
``--runs`` runs each. It also checks that both extractors found the same links.

``--adversarial`` times ``links.extract`` on hostile pages (unclosed quotes, comments, scripts and
tags, runs of ``<``, character references, random bytes, 100,000 links) at 256 KB, 1 MB and 4 MB:
a linear scan costs the same per MB at every size (the ``4MB/256KB`` column stays near 1; a
back-tracking regex would grow with the size).

``--baseline`` times ``links.extract`` against the ``extract`` of another copy of
``larbinscrapy/parse/links.py`` (``git show REV:larbinscrapy/parse/links.py > old.py``), on the
same pages, the two alternating run by run (paired): the median of each and the median of the
per-run ratios, on these pages and on the benchmark web's.

The lexbor comparison (issue #18): selectolax's ``LexborHTMLParser`` (an HTML5 tree in C)
finding the same tags (``a``/``area``/``link``/``base`` href, ``frame``/``iframe`` src, title,
meta keywords/description/refresh), with the URLs resolved by the same code as ``links.extract``
(its ``_link``), so that only the scan differs: pages/s of each and whether every page gave the
same links, title, keywords and description. On these pages and on the benchmark web's
(``testweb/synthweb.py``). Skipped if selectolax is not installed.
"""

from __future__ import annotations

import argparse
import json
import random
import statistics
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from typing import TYPE_CHECKING

from scrapy import Request
from scrapy.http import HtmlResponse
from scrapy.linkextractors import LinkExtractor
from scrapy.utils.request import RequestFingerprinter
from w3lib.url import canonicalize_url

from larbinscrapy.parse import links, urls
from testweb.synthweb import synthweb_pages

if TYPE_CHECKING:
    from collections.abc import Callable

HOSTS = [f"h{i:02d}.test" for i in range(20)] + ["www.example.com", "127.0.1.7:8080"]
WORDS = [
    "crawler",
    "larbin",
    "queue",
    "politeness",
    "robots",
    "frontier",
    "site",
    "page",
    "link",
    "hash",
    "bitmap",
]


def _word(rng: random.Random) -> str:
    return rng.choice(WORDS)


def _href(rng: random.Random, host: str) -> str:
    """One link value, in the mix a real page has."""
    kind = rng.random()
    name = f"{_word(rng)}-{rng.randrange(1000)}"
    if kind < 0.25:
        return f"/{_word(rng)}/{name}.html"
    if kind < 0.45:
        return f"{name}.html"
    if kind < 0.60:
        return f"http://{rng.choice(HOSTS)}/{_word(rng)}/{name}.html"
    if kind < 0.66:
        return f"https://{rng.choice(HOSTS)}/{name}"
    if kind < 0.72:
        return f"../{_word(rng)}/{name}.html"
    if kind < 0.77:
        return f"?page={rng.randrange(50)}&amp;sort={_word(rng)}"
    if kind < 0.82:
        return f"/{name}.php?id={rng.randrange(10**6)}&amp;lang=en"
    if kind < 0.87:
        return f"{name}.html#section-{rng.randrange(9)}"
    if kind < 0.90:
        return f"./{name}/"
    if kind < 0.92:
        return f"//{rng.choice(HOSTS)}/{name}"
    if kind < 0.94:
        return f"mailto:{_word(rng)}@{host}"
    if kind < 0.96:
        return "javascript:void(0)"
    if kind < 0.98:
        return f"#{_word(rng)}"
    return f"/{_word(rng)}/{name} caf\u00e9.html"


def _anchor(rng: random.Random, href: str) -> str:
    quote = rng.choice(['"', '"', '"', "'", ""])
    if not quote and (" " in href or "'" in href or '"' in href):
        quote = '"'
    tag = "A" if rng.random() < 0.05 else "a"
    attrs = [f"href={quote}{href}{quote}"]
    if rng.random() < 0.3:
        attrs.insert(0, f'class="nav {_word(rng)}"')
    if rng.random() < 0.2:
        attrs.append(f'title="{_word(rng)} &gt; {_word(rng)}"')
    sep = "\n   " if rng.random() < 0.1 else " "
    return f"<{tag}{sep}{sep.join(attrs)}>{_word(rng).title()} {_word(rng)}</{tag}>"


def make_pages(count: int, seed: int = 20240607) -> list[tuple[str, bytes]]:
    """``count`` (url, body) pairs of deterministic synthetic HTML."""
    rng = random.Random(seed)
    pages = []
    for n in range(count):
        host = rng.choice(HOSTS)
        url = f"http://{host}/{_word(rng)}/{_word(rng)}-{n}.html"
        parts = [
            "<!DOCTYPE html>\n<html lang=en><head><meta charset=utf-8>",
            f"<title>{_word(rng).title()} &amp; {_word(rng)} page {n}</title>",
            f'<meta name="description" content="About {_word(rng)} and {_word(rng)}.">',
            '<link rel="stylesheet" href="/static/site.css">',
            "<script>var x = '<a href=\"/not-a-link\">';</script>",
            "</head><body><div id=main>",
        ]
        for i in range(rng.randint(30, 60)):
            if i % 7 == 0:
                parts.append(f"<p>{' '.join(_word(rng) for _ in range(rng.randint(5, 30)))}.</p>")
            if rng.random() < 0.03:
                parts.append(f'<!-- old: <a href="/old-{i}.html">old</a> -->')
            parts.append(_anchor(rng, _href(rng, host)))
            if rng.random() < 0.05:
                parts.append(f'<img src="/img/{_word(rng)}-{i}.png" alt="{_word(rng)}">')
        parts.append("</div></body></html>\n")
        pages.append((url, "\n".join(parts).encode()))
    return pages


def _median_seconds(func: Callable[[], object], runs: int) -> float:
    times = []
    for _ in range(runs):
        start = time.perf_counter()
        func()
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def _without_fragment(url: str) -> str:
    return url.partition("#")[0]


def compare(pages: list[tuple[str, bytes]]) -> list[str]:
    """Differences between our links and LinkExtractor's (same tags, fragments dropped)."""
    extractor = LinkExtractor(
        deny_extensions=[], unique=True, canonicalize=False, tags=("a", "area", "link")
    )
    problems = []
    for url, body in pages:
        response = HtmlResponse(url, body=body, encoding="utf-8")
        theirs = [_without_fragment(link.url) for link in extractor.extract_links(response)]
        theirs = [u for u in dict.fromkeys(theirs) if u.startswith(("http://", "https://"))]
        ours = links.extract(body, url).links
        if ours != theirs:
            only_ours = [u for u in ours if u not in theirs]
            only_theirs = [u for u in theirs if u not in ours]
            problems.append(f"{url}: only ours {only_ours[:3]}, only Scrapy {only_theirs[:3]}")
    return problems


def bench_extraction(pages: list[tuple[str, bytes]], runs: int) -> dict[str, float]:
    n_links = sum(len(links.extract(body, url).links) for url, body in pages)
    ours = _median_seconds(lambda: [links.extract(b, u) for u, b in pages], runs)
    extractor = LinkExtractor()
    times = []
    for _ in range(runs):
        responses = [HtmlResponse(u, body=b, encoding="utf-8") for u, b in pages]
        start = time.perf_counter()
        for response in responses:
            extractor.extract_links(response)
        times.append(time.perf_counter() - start)
    scrapy = statistics.median(times)
    return {
        "pages": len(pages),
        "links": n_links,
        "ours_pages_per_s": len(pages) / ours,
        "ours_us_per_link": ours / n_links * 1e6,
        "scrapy_pages_per_s": len(pages) / scrapy,
        "scrapy_us_per_link": scrapy / n_links * 1e6,
    }


_LEXBOR_TAGS = "a[href], area[href], link[href], base[href], frame[src], iframe[src], title, meta"


def lexbor_extract(body: bytes, base_url: str, encoding: str = "utf-8") -> links.Page:
    """What ``links.extract`` finds, found by lexbor's HTML5 parser instead of the regex scan.

    URL resolution is ``links``' own (``_link``, ``_Base``: private, used here so that only the
    scan differs; the module is not changed).
    """
    from selectolax.lexbor import LexborHTMLParser

    tree = LexborHTMLParser(body.decode(encoding, "replace"))
    base = links._Base(base_url)
    base_seen = False
    found: list[str] = []
    title = keywords = description = None
    for node in tree.css(_LEXBOR_TAGS):
        tag, attrs = node.tag, node.attributes
        if tag == "title":
            if title is None:
                title = " ".join(node.text().split()) or None
            continue
        if tag == "meta":
            name = (attrs.get("name") or "").strip().lower()
            equiv = (attrs.get("http-equiv") or "").strip().lower()
            content = attrs.get("content")
            if content is None:
                continue
            if name == "keywords" and keywords is None:
                keywords = " ".join(content.split())
            elif name == "description" and description is None:
                description = " ".join(content.split())
            elif equiv == "refresh":
                target = links._REFRESH_URL(content)
                if target is not None and target.group(1).strip():
                    url = links._link(target.group(1), base, encoding, False)
                    if url is not None:
                        found.append(url)
            continue
        value = attrs.get("src" if tag in ("frame", "iframe") else "href")
        if value is None:
            continue
        url = links._link(value, base, encoding, False)
        if url is None:
            continue
        if tag == "base":
            if not base_seen:
                base_seen = True
                base = links._Base(url)
            continue
        found.append(url)
    return links.Page(list(dict.fromkeys(found)), title, keywords, description)


def bench_lexbor(sets: dict[str, list[tuple[str, bytes]]], runs: int) -> dict[str, Any]:
    """links.extract against lexbor + the same URL resolution, per page set."""
    try:
        import selectolax
    except ImportError:
        return {"skipped": "selectolax is not installed"}
    out: dict[str, Any] = {"selectolax": selectolax.__version__}
    for name, pages in sets.items():
        ours = _median_seconds(lambda p=pages: [links.extract(b, u) for u, b in p], runs)
        theirs = _median_seconds(lambda p=pages: [lexbor_extract(b, u) for u, b in p], runs)
        differ = [u for u, b in pages if links.extract(b, u) != lexbor_extract(b, u)]
        out[name] = {
            "pages": len(pages),
            "ours_pages_per_s": len(pages) / ours,
            "lexbor_pages_per_s": len(pages) / theirs,
            "lexbor_over_ours_time": theirs / ours,
            "pages_differing": len(differ),
            "first_differing": differ[:3],
        }
    return out


def bench_urls(pages: list[tuple[str, bytes]], runs: int) -> dict[str, float]:
    found = [u for url, body in pages for u in links.extract(body, url).links]
    sample = found[:5000]
    n = len(sample)
    fingerprinter = RequestFingerprinter()

    def per_url(func: Callable[[], object]) -> float:
        return _median_seconds(func, runs) / n * 1e6

    canonicalize = urls.canonicalize
    fingerprint_url = urls.fingerprint_url
    return {
        "urls": n,
        "canonicalize_us": per_url(lambda: [canonicalize(u) for u in sample]),
        "scrapy_canonicalize_url_us": per_url(lambda: [canonicalize_url(u) for u in sample]),
        "fingerprint_url_us": per_url(lambda: [fingerprint_url(u) for u in sample]),
        "scrapy_request_fingerprint_us": per_url(
            lambda: [fingerprinter.fingerprint(Request(u)) for u in sample]
        ),
    }


ADVERSARIAL: dict[str, Callable[[int], bytes]] = {
    "unclosed quotes": lambda n: (b'<a href="/u' * (n // 11 + 1))[:n],
    "unclosed tags": lambda n: (b"<div class='x <b <i " * (n // 20 + 1))[:n],
    "unclosed comment": lambda n: (b"<!-- " + b"<a href=/x>" * (n // 11 + 1))[:n],
    "unclosed script": lambda n: (b"<script>" + b"<a href=/x>" * (n // 11 + 1))[:n],
    "runs of <": lambda n: b"<" * n,
    "attribute soup": lambda n: (b"<a " + b"x=\"'<a y='\"" * (n // 12 + 1))[:n],
    "char references": lambda n: (b'<a href="/?' + b"&#x41&amp;&reg=" * (n // 15 + 1))[:n],
    "random bytes": lambda n: random.Random(5).randbytes(n),
    "100,000 links": lambda n: b"".join(b'<a href="/l/%d.html">x</a>' % i for i in range(n // 26)),
}


def bench_baseline(path: Path, sets: dict[str, list[tuple[str, bytes]]], runs: int) -> None:
    """``links.extract`` (and its tag scan alone) against a baseline copy of links.py.

    Pages in chunks of 20, the two timed alternately on each chunk, ``runs`` times: the sum of
    each chunk's fastest time (what a loaded machine's interruptions cannot inflate) and the
    median of the per-run ratios.
    """
    import importlib.util

    spec = importlib.util.spec_from_file_location("links_baseline", path)
    if spec is None or spec.loader is None:
        raise SystemExit(f"cannot load {path}")
    old = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(old)

    def scanner(pattern: Any) -> Callable[[bytes, str], object]:
        return lambda body, url: list(pattern.finditer(body.decode("latin-1")))

    print(
        f"µs a page: sum of the fastest of {runs} runs per chunk of 20 pages; "
        "per-run ratio: median\n"
    )
    print("| pages | what | baseline | this tree | ratio (fastest) | per-run ratio |")
    print("|---|---|---|---|---|---|")
    for name, pages in sets.items():
        chunks = [pages[i : i + 20] for i in range(0, len(pages), 20)]
        for what, pair in (
            ("extract", (old.extract, links.extract)),
            ("tag scan", (scanner(old._SCAN), scanner(links._SCAN))),
        ):
            best = [[float("inf")] * len(chunks) for _ in pair]
            totals: list[list[float]] = [[], []]
            for i in range(runs):
                run = [0.0, 0.0]
                for c, chunk in enumerate(chunks):
                    for k in (0, 1) if i % 2 else (1, 0):
                        start = time.perf_counter()
                        for url, body in chunk:
                            pair[k](body, url)
                        took = time.perf_counter() - start
                        best[k][c] = min(best[k][c], took)
                        run[k] += took
                for k in (0, 1):
                    totals[k].append(run[k])
            o, n = (sum(b) / len(pages) * 1e6 for b in best)
            ratio = statistics.median(b / a for a, b in zip(*totals, strict=True))
            print(
                f"| {name} ({len(pages)}) | {what} | {o:.1f} | {n:.1f} | {n / o:.3f} | "
                f"{ratio:.3f} |"
            )


def _median_cpu_seconds(func: Callable[[], object], runs: int) -> float:
    """CPU time, not wall time: on a shared machine a wall clock measures the neighbours."""
    times = []
    for _ in range(runs):
        start = time.process_time()
        func()
        times.append(time.process_time() - start)
    return statistics.median(times)


def bench_adversarial(runs: int) -> dict[str, dict[str, float]]:
    """CPU ms per MB of ``links.extract`` on each hostile page at three sizes."""
    result = {}
    for name, make in ADVERSARIAL.items():
        per_mb = {}
        for size in (256 * 1024, 1024 * 1024, 4 * 1024 * 1024):
            body = make(size)
            seconds = _median_cpu_seconds(lambda b=body: links.extract(b, "http://h.test/"), runs)
            per_mb[size] = seconds * 1000 / (len(body) / 1024 / 1024)
        result[name] = {
            "256KB": per_mb[256 * 1024],
            "1MB": per_mb[1024 * 1024],
            "4MB": per_mb[4 * 1024 * 1024],
        }
    return result


def print_adversarial(result: dict[str, dict[str, float]], runs: int) -> None:
    print(f"links.extract on hostile pages, CPU ms per MB (median of {runs} runs)\n")
    print("| page | 256 KB | 1 MB | 4 MB | 4MB/256KB |")
    print("|---|---:|---:|---:|---:|")
    for name, t in result.items():
        print(
            f"| {name} | {t['256KB']:.1f} | {t['1MB']:.1f} | {t['4MB']:.1f} | "
            f"{t['4MB'] / t['256KB']:.2f} |"
        )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pages", type=int, default=200, help="synthetic pages (default 200)")
    parser.add_argument("--runs", type=int, default=5, help="runs per measurement (median)")
    parser.add_argument("--json", type=Path, help="also write the numbers to this file")
    parser.add_argument("--adversarial", action="store_true", help="hostile pages only")
    parser.add_argument("--baseline", type=Path, help="another links.py: paired timing only")
    args = parser.parse_args(argv)
    if args.baseline:
        bench_baseline(
            args.baseline,
            {"these pages": make_pages(args.pages), "benchmark web": synthweb_pages(args.pages)},
            args.runs,
        )
        return 0
    if args.adversarial:
        adversarial = bench_adversarial(args.runs)
        print_adversarial(adversarial, args.runs)
        if args.json:
            args.json.write_text(json.dumps(adversarial, indent=2) + "\n")
        return 0

    pages = make_pages(args.pages)
    problems = compare(pages)
    ext = bench_extraction(pages, args.runs)
    url = bench_urls(pages, args.runs)
    lexbor = bench_lexbor(
        {"these pages": pages, "benchmark web": synthweb_pages(args.pages)}, args.runs
    )

    print(f"{ext['pages']} pages, {ext['links']} links; median of {args.runs} runs\n")
    print("| what | larbinscrapy | Scrapy | speed-up |")
    print("|---|---|---|---|")
    print(
        f"| extraction, pages/s | {ext['ours_pages_per_s']:,.0f} | "
        f"{ext['scrapy_pages_per_s']:,.0f} | "
        f"{ext['ours_pages_per_s'] / ext['scrapy_pages_per_s']:.1f}x |"
    )
    print(
        f"| extraction, µs/link | {ext['ours_us_per_link']:.2f} | "
        f"{ext['scrapy_us_per_link']:.2f} | |"
    )
    print(
        f"| canonicalize, µs/URL | {url['canonicalize_us']:.2f} | "
        f"{url['scrapy_canonicalize_url_us']:.2f} (canonicalize_url) | "
        f"{url['scrapy_canonicalize_url_us'] / url['canonicalize_us']:.1f}x |"
    )
    print(
        f"| fingerprint, µs/URL | {url['fingerprint_url_us']:.2f} (fingerprint_url) | "
        f"{url['scrapy_request_fingerprint_us']:.2f} (Request + fingerprint) | "
        f"{url['scrapy_request_fingerprint_us'] / url['fingerprint_url_us']:.1f}x |"
    )
    print(f"\nsame links as LinkExtractor (a/area/link): {not problems}")
    for problem in problems[:10]:
        print(f"  {problem}")
    _print_lexbor(lexbor)
    if args.json:
        result = {**ext, **url, "link_differences": len(problems), "lexbor": lexbor}
        args.json.write_text(json.dumps(result, indent=2) + "\n")
    return 1 if problems else 0


def _print_lexbor(lexbor: dict[str, Any]) -> None:
    if "skipped" in lexbor:
        print(f"\nlexbor comparison skipped: {lexbor['skipped']}")
        return
    print(
        f"\n| page set | links.extract, pages/s | selectolax (lexbor) {lexbor['selectolax']}"
        " + same resolution, pages/s | lexbor time / ours | pages with different results |"
    )
    print("|---|---:|---:|---:|---:|")
    for name, r in lexbor.items():
        if name == "selectolax":
            continue
        print(
            f"| {name} ({r['pages']}) | {r['ours_pages_per_s']:,.0f} | "
            f"{r['lexbor_pages_per_s']:,.0f} | {r['lexbor_over_ours_time']:.2f} | "
            f"{r['pages_differing']} |"
        )


if __name__ == "__main__":
    raise SystemExit(main())

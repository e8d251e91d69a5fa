"""``bench_distributed.py --capacity`` (issue 33, point 3): its key census groups keys by kind and
its tiny crawl's figures add up (every page fetched, every host's DNS answer counted once).
Not timings: those live in benchmarks/RESULTS.md."""

from __future__ import annotations

from typing import TYPE_CHECKING

import pytest

from benchmarks.bench_distributed import RedisProcess, capacity_crawl, key_kind, render_capacity

if TYPE_CHECKING:
    from pathlib import Path


def test_key_kind_folds_hosts_ips_workers_and_tags() -> None:
    assert key_kind("{s3.32}larbin:frontier:site:http://h7.scale.test:4000") == (
        "{tag}larbin:frontier:site:<site>"
    )
    assert key_kind("larbin:frontier:ipsites:127.44.0.9") == "larbin:frontier:ipsites:<ip>"
    assert key_kind("larbin:frontier:lease:w-1a2b") == "larbin:frontier:lease:<worker>"
    assert key_kind("larbin:seen:3") == "larbin:seen:<n>"


@pytest.mark.crawl
def test_a_tiny_capacity_crawl_counts_every_host_once(tmp_path: Path) -> None:
    rds = RedisProcess(tmp_path)
    try:
        row = capacity_crawl(rds, tmp_path, hosts=12, pages=2, hosts_per_ip=4)
    finally:
        rds.stop()
    assert row["exit"] == 0
    assert row["pages"] == 24
    dns = row["census"]["larbin:frontier:dns (hash)"]
    assert dns["keys"] == 1 and dns["entries"] == 12
    assert row["census"]["larbin:frontier:sitemaps:<site> (string)"]["keys"] == 12
    (node,) = row["nodes"]
    assert node["cpu_s"] > 0 and node["net_in"] > 0 and node["net_out"] > 0
    assert node["scripts"] >= row["pages"]  # an admit and a release a page at least
    assert "B/host" in render_capacity("one Redis", row)


def test_a_base_worker_runs_the_base_trees_code(tmp_path: Path) -> None:
    """``--base``: the other checkout's worker imports that checkout's larbinscrapy, not this
    one's (run from this repository, ``python -m`` put it first: both "trees" were this one)."""
    import os
    import subprocess
    import sys

    from benchmarks.bench_distributed import from_tree

    tree = tmp_path / "base"
    (tree / "larbinscrapy").mkdir(parents=True)
    (tree / "larbinscrapy" / "__init__.py").write_text("")
    env = dict(os.environ)
    cwd = from_tree(env, tree)
    out = subprocess.run(
        [sys.executable, "-c", "import larbinscrapy; print(larbinscrapy.__file__)"],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        check=True,
    )
    assert out.stdout.strip() == str(tree / "larbinscrapy" / "__init__.py")

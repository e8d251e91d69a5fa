# larbinscrapy: every set-up step lives here, so `make crawl` and `make test` work on a fresh
# Debian machine with Python 3.11 (root, or sudo for the apt step).
PYTHON ?= python3
VENV   ?= .venv
BIN    := $(VENV)/bin
SEEDS  ?= seeds.txt
SUDO   := $(shell [ "$$(id -u)" = 0 ] || echo sudo)
# chromium: the status page's real-browser test (Playwright drives /usr/bin/chromium)
# dnsutils: dig, a real DNS client for the simulated internet's tests (tests/test_internet.py)
# openssl: the password of the Redis Cluster docs/distributed.md starts (tests/test_cluster_docs.py)
# iproute2: `ip netns`, the network namespaces the simulated internet's crawls run in
APT_PACKAGES := redis-server nginx chromium tinyproxy dnsutils openssl iproute2

.PHONY: install install-runtime install-test install-bench install-system crawl demo test test-fast conformance lint bench bench-quick bench-system bench-crawlee-venv deploy clean

# Each command installs what it needs into $(VENV), once: a stamp file per part, remade when
# pyproject.toml or setup.py changes (the runtime first, then each extra over it). `make crawl`
# and `make demo` need the runtime only; `make test` and `make lint` add the test extra (pytest,
# ruff, mypy, playwright, scrapyd...); `make bench` the bench extra.
RUNTIME     := $(VENV)/.installed-runtime
TEST_EXTRA  := $(VENV)/.installed-test
BENCH_EXTRA := $(VENV)/.installed-bench

$(RUNTIME): pyproject.toml setup.py
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade "pip>=23"
	$(BIN)/pip install --quiet -e .
	@touch $@

$(TEST_EXTRA): $(RUNTIME)
	$(BIN)/pip install --quiet -e ".[test]"
	@touch $@

$(BENCH_EXTRA): $(RUNTIME)
	$(BIN)/pip install --quiet -e ".[bench]"
	@touch $@

install-runtime: $(RUNTIME)
install-test: $(TEST_EXTRA)
install-bench: $(BENCH_EXTRA)
# Everything, for working on the project (the tests and the benchmarks).
install: $(RUNTIME) $(TEST_EXTRA) $(BENCH_EXTRA)

# System packages the tests and benchmarks start for real (redis-server, nginx, tinyproxy).
install-system:
	@missing=""; for p in $(APT_PACKAGES); do dpkg -s $$p >/dev/null 2>&1 || missing="$$missing $$p"; done; \
	if [ -n "$$missing" ]; then \
	  echo "apt-get install$$missing"; \
	  $(SUDO) apt-get update -qq && DEBIAN_FRONTEND=noninteractive $(SUDO) apt-get install -y -qq $$missing; \
	fi

# The main job: a broad crawl from $(SEEDS), local disk state, no Redis. Run it again to resume.
# CRAWL_ARGS: more scrapy arguments (CRAWL_ARGS="-a depth=2 -s LARBIN_WARC=true").
CRAWL_ARGS ?=
crawl: $(RUNTIME)
	mkdir -p output
	$(BIN)/scrapy crawl larbin -a seeds=$(SEEDS) -s JOBDIR=output/job -o output/items.jsonl $(CRAWL_ARGS)

# The bundled multi-host test web on loopback, crawled until Ctrl-C, with its status page (the
# address and token are printed): no internet needed. DEMO_ARGS=--once: one quick crawl, then exit.
DEMO_ARGS ?=
demo: $(RUNTIME)
	$(BIN)/python -m testweb.demo $(DEMO_ARGS)

# TEST_WORKERS test processes at once (pytest-xdist; 0: this one process). A crawl test mostly
# waits on its servers, delays and timeouts, so two processes halve the wall time on two cores
# (benchmarks/RESULTS.md). The tests marked `timing` (gaps or an order read from a server's log,
# which another test's crawl beside them can shift) run after the others, in one process.
TEST_WORKERS ?= 2
test: $(TEST_EXTRA) install-system
	$(BIN)/python -m pytest -q -n $(TEST_WORKERS) --dist worksteal -m "not timing"
	$(BIN)/python -m pytest -q -m timing

# The unit tests alone: no subprocess crawl, no outside server (tests marked `crawl` are left out).
test-fast: $(TEST_EXTRA)
	$(BIN)/python -m pytest -q -n $(TEST_WORKERS) --dist worksteal -m "not crawl"

# Scrapy's own tests of the engine parts larbinscrapy/lean/ replaces, from the sdist of the
# installed Scrapy, run against our classes (conformance/suites.py; exclusions with their reason
# in conformance/excluded.txt), in a virtualenv of their own (Scrapy's test plugins stay out of ours).
CONFORMANCE_VENV := conformance/.venv

$(CONFORMANCE_VENV)/bin/python: pyproject.toml setup.py
	$(PYTHON) -m venv $(CONFORMANCE_VENV)
	$(CONFORMANCE_VENV)/bin/pip install --quiet --upgrade "pip>=23"
	$(CONFORMANCE_VENV)/bin/pip install --quiet -e ".[conformance]"
	@touch $@

conformance: $(CONFORMANCE_VENV)/bin/python
	$(CONFORMANCE_VENV)/bin/python -m conformance.run

# ruff (rules and their ignores in pyproject.toml; the formatter, checked), mypy on larbinscrapy/
# (its [tool.mypy]) and the stage map's layers (lint-imports: [tool.importlinter] in pyproject.toml).
PY_DIRS := larbinscrapy settings testweb tests benchmarks conformance docs

lint: $(TEST_EXTRA)
	$(BIN)/ruff check $(PY_DIRS)
	$(BIN)/ruff format --check $(PY_DIRS)
	$(BIN)/mypy
	$(BIN)/lint-imports --no-cache

# The benchmark's peers: crawlee-python in a virtualenv of its own (its pins must not move the
# project's), and Debian's wget.
CRAWLEE_VENV := benchmarks/.venv-crawlee
CRAWLEE_VERSION ?= 1.11.0
BENCH_APT_PACKAGES := nginx wget linux-perf

$(CRAWLEE_VENV)/bin/python:
	$(PYTHON) -m venv $(CRAWLEE_VENV)
	$(CRAWLEE_VENV)/bin/pip install --quiet --upgrade "pip>=23"
	$(CRAWLEE_VENV)/bin/pip install --quiet "crawlee[parsel]==$(CRAWLEE_VERSION)"
	@touch $@

bench-crawlee-venv: $(CRAWLEE_VENV)/bin/python

bench-system:
	@$(MAKE) --no-print-directory install-system APT_PACKAGES="$(BENCH_APT_PACKAGES)"

bench: $(BENCH_EXTRA) bench-system bench-crawlee-venv
	$(BIN)/python -m benchmarks.run --https

bench-quick: $(BENCH_EXTRA) bench-system bench-crawlee-venv
	$(BIN)/python -m benchmarks.run --quick --https

# Deploy to scrapyd: URL and credentials from SCRAPYD_URL/USERNAME/PASSWORD, or
# DEPLOY_TARGET=netrc for ~/.netrc (docs/scrapyd.md). scrapyd-deploy comes with the test extra.
DEPLOY_TARGET ?=
deploy: $(TEST_EXTRA)
	$(BIN)/scrapyd-deploy $(DEPLOY_TARGET)

clean:
	rm -rf $(VENV) $(CRAWLEE_VENV) $(CONFORMANCE_VENV) conformance/.cache output build *.egg-info .pytest_cache .ruff_cache .mypy_cache

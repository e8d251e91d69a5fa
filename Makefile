# larbinscrapy: every set-up step lives here, so `make crawl` and `make test` work on a fresh
# Debian machine with Python 3.11 (root, or sudo for the apt step).
PYTHON ?= python3
VENV   ?= .venv
BIN    := $(VENV)/bin
SEEDS  ?= seeds.txt
SUDO   := $(shell [ "$$(id -u)" = 0 ] || echo sudo)
# chromium: the status page's real-browser test (Playwright drives /usr/bin/chromium)
APT_PACKAGES := redis-server nginx chromium tinyproxy

.PHONY: install install-system crawl demo test conformance lint bench bench-quick bench-system bench-crawlee-venv deploy clean

$(BIN)/scrapy: pyproject.toml setup.py
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade "pip>=23" 
	$(BIN)/pip install --quiet -e ".[test,bench]"
	@touch $@

install: $(BIN)/scrapy

# System packages the tests and benchmarks start for real (redis-server, nginx, tinyproxy).
install-system:
	@missing=""; for p in $(APT_PACKAGES); do dpkg -s $$p >/dev/null 2>&1 || missing="$$missing $$p"; done; \
	if [ -n "$$missing" ]; then \
	  echo "apt-get install$$missing"; \
	  $(SUDO) apt-get update -qq && DEBIAN_FRONTEND=noninteractive $(SUDO) apt-get install -y -qq $$missing; \
	fi

# The main job: a broad crawl from $(SEEDS), local disk state, no Redis. Run it again to resume.
crawl: install
	mkdir -p output
	$(BIN)/scrapy crawl larbin -a seeds=$(SEEDS) -s JOBDIR=output/job -o output/items.jsonl

# A real crawl of the bundled multi-host test web on loopback: no internet needed.
demo: install
	$(BIN)/python -m testweb.demo

test: install install-system
	$(BIN)/python -m pytest -q

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

# ruff (rules and their ignores in pyproject.toml) and mypy on larbinscrapy/ (its [tool.mypy]).
lint: install
	$(BIN)/ruff check larbinscrapy settings testweb tests benchmarks
	$(BIN)/mypy

# The benchmark's peers: crawlee-python in a virtualenv of its own (its pins must not move the
# project's), and Debian's wget.
CRAWLEE_VENV := benchmarks/.venv-crawlee
CRAWLEE_VERSION ?= 1.11.0
BENCH_APT_PACKAGES := nginx wget

$(CRAWLEE_VENV)/bin/python:
	$(PYTHON) -m venv $(CRAWLEE_VENV)
	$(CRAWLEE_VENV)/bin/pip install --quiet --upgrade "pip>=23"
	$(CRAWLEE_VENV)/bin/pip install --quiet "crawlee[parsel]==$(CRAWLEE_VERSION)"
	@touch $@

bench-crawlee-venv: $(CRAWLEE_VENV)/bin/python

bench-system:
	@$(MAKE) --no-print-directory install-system APT_PACKAGES="$(BENCH_APT_PACKAGES)"

bench: install bench-system bench-crawlee-venv
	$(BIN)/python -m benchmarks.run

bench-quick: install bench-system bench-crawlee-venv
	$(BIN)/python -m benchmarks.run --quick

# Deploy to scrapyd: URL and credentials from SCRAPYD_URL/USERNAME/PASSWORD, or
# DEPLOY_TARGET=netrc for ~/.netrc (docs/scrapyd.md).
DEPLOY_TARGET ?=
deploy: install
	$(BIN)/scrapyd-deploy $(DEPLOY_TARGET)

clean:
	rm -rf $(VENV) $(CRAWLEE_VENV) $(CONFORMANCE_VENV) conformance/.cache output build *.egg-info .pytest_cache .ruff_cache .mypy_cache

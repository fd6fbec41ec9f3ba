# Pharos developer tasks. `make test` is what CI runs (.ci/run).
PYTHON ?= python3.11
VENV   := .venv
BIN    := $(VENV)/bin

.PHONY: install demo serve browser check lint unit live test bench support clean

install: $(VENV)/.installed

$(VENV)/.installed: pyproject.toml
	@command -v $(PYTHON) >/dev/null || { echo "need $(PYTHON) (Python 3.11+)"; exit 1; }
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install -q --upgrade pip
	$(BIN)/python -m pip install -q -e '.[dev]'
	touch $@

demo: install          ## three fake engines and a router on http://127.0.0.1:8090
	$(BIN)/pharos demo

serve: install         ## pharos serve with pharos.yaml if present, else zero-config
	if [ -f pharos.yaml ]; then $(BIN)/pharos serve --config pharos.yaml; else $(BIN)/pharos serve; fi

lint: install
	$(BIN)/ruff check src tests benchmarks
	$(BIN)/ruff format --check src tests benchmarks
	$(BIN)/mypy
	$(BIN)/lint-imports

unit: install          ## layers 1-3: unit, replay and component tests (no engines)
	$(BIN)/pytest -q

check: lint unit

live: install          ## layer 4: builds/caches real engines outside the repo, then runs live tests
	bash scripts/engines/install-all.sh
	$(BIN)/pytest -q -m live tests/live

browser:               ## headless Chromium (Debian package) for the /status page test
	bash scripts/install-browser.sh

test: browser check live   ## everything CI runs

bench: install         ## prints `bench NAME p50_us=N p99_us=N` lines
	@for f in benchmarks/bench_*.py; do $(BIN)/python $$f || exit 1; done

support: install       ## regenerate SUPPORT.md from the tests' expectation tables
	$(BIN)/python -m tools.support

clean:
	rm -rf $(VENV) .pytest_cache .mypy_cache .ruff_cache

.PHONY: live-latest
live-latest: install   ## drift check (not in CI): live suite on the newest engine releases, then what changed
	bash scripts/engines/live-latest.sh

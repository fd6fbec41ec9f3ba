# Pharos developer tasks. `make test` is what CI runs (.ci/run).
PYTHON ?= python3.11
VENV   := .venv
BIN    := $(VENV)/bin

.PHONY: install demo serve browser promtool check lint unit live test bench bench-compare bench-profile support clean wheel

install: $(VENV)/.installed

$(VENV)/.installed: pyproject.toml setup.py $(wildcard src/pharos/policy/*.py) $(wildcard src/pharos/sched/*.py) src/pharos/prefix/slots.py src/pharos/prefix/index.py src/pharos/state/view.py src/pharos/state/views.py src/pharos/prefix/_chainc.c src/pharos/prefix/_indexc.c src/pharos/proxy/_streamc.c
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
	$(BIN)/ruff check src tests benchmarks tools
	$(BIN)/ruff format --check src tests benchmarks tools
	$(BIN)/mypy
	$(BIN)/lint-imports

unit: install          ## layers 1-3: unit, replay and component tests (no engines)
	bash scripts/datasets/fetch-sharegpt.sh   # the simulator's ShareGPT sessions (27 MB, cached)
	$(BIN)/pytest -q

check: lint unit

live: install          ## layer 4: builds/caches real engines outside the repo, then runs live tests
	bash scripts/engines/install-all.sh
	bash scripts/docker/install.sh >/dev/null   # dockerd + docker-compose (tests/live/test_docker*)
	bash scripts/docker/images.sh >/dev/null    # local busybox and python:3.11-slim images
	$(BIN)/pytest -q -m live tests/live
	$(BIN)/pytest -q -m live tests/peer/test_procs.py  # three real serve processes with peers

browser:               ## headless Chromium (Debian package) for the /status page test
	bash scripts/install-browser.sh

promtool:              ## promtool (Debian's prometheus package) for the monitoring/ checks
	bash scripts/install-promtool.sh

test: browser promtool check wheel live   ## everything CI runs

wheel:                 ## the installed wheel runs --help, demo and doctor with no repository
	bash scripts/check-wheel.sh

bench: install         ## prints `bench NAME p50_us=N p99_us=N` lines
	@uptime
	@for f in benchmarks/bench_*.py; do $(BIN)/python $$f || exit 1; done

bench-compare: install ## Pharos, a bare aiohttp pass-through and LiteLLM 1.110.2 side by side, c=1 and c=32
	bash scripts/bench/compare.sh

bench-profile: install ## instructions per request under callgrind (ARGS="--spy FILE": py-spy shares at c=32)
	bash scripts/bench/profile.sh $(ARGS)

.PHONY: scenario
scenario: install      ## issue 15 on real llama-servers: Pharos vs round-robin vs sticky (ARGS="--help"; needs scripts/engines/install-all.sh)
	@uptime
	bash scripts/datasets/fetch-sharegpt.sh
	$(BIN)/python -m benchmarks.scenario --sessions sharegpt $(ARGS)

support: install       ## regenerate SUPPORT.md from the tests' expectation tables
	$(BIN)/python -m tools.support

clean:
	rm -rf $(VENV) .pytest_cache .mypy_cache .ruff_cache

.PHONY: live-latest
live-latest: install   ## drift check (not in CI): live suite on the newest engine releases, then what changed
	bash scripts/engines/live-latest.sh

.PHONY: live-clients
live-clients: install  ## not in CI: installs Open WebUI (7.8 GB) and the SDKs, records what they send into tests/captures/clients
	bash scripts/clients/record.sh all

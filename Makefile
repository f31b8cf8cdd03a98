# Longstep: `make demo` installs everything and runs the demo agent locally; `make test` runs the suite.
SHELL := /bin/bash
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
export JSII_SILENCE_WARNING_DEPRECATED_NODE_VERSION := 1
export JSII_SILENCE_WARNING_END_OF_LIFE_NODE_VERSION := 18,20
# Python's compiled bytecode is kept, under Longstep's cache rather than beside the sources (the
# functions' code assets stay free of it). An environment may set PYTHONDONTWRITEBYTECODE; every
# process then compiles moto, botocore and the rest again, seconds of CPU each, and the suite and
# the CLI start hundreds of them.
export PYTHONDONTWRITEBYTECODE :=
export PYTHONPYCACHEPREFIX ?= $(or $(XDG_CACHE_HOME),$(HOME)/.cache)/longstep/pycache

.PHONY: setup demo test test-fast fuzz synth deploy lint bench clean browser

setup: node-version $(VENV)/.installed node_modules/.installed .longstep/.layer browser

# The README asks for Node.js 22 or 24 (what the CDK supports); 20 still runs the CDK and gets a
# one-line notice, anything older stops setup with one line.
.PHONY: node-version
node-version:
	@v=$$(node --version 2>/dev/null) || { echo "Node.js not found: install Node.js 22 or 24 and npm (README, Quick start)" >&2; exit 2; }; \
	major=$${v#v}; major=$${major%%.*}; \
	if [ "$$major" -lt 20 ] 2>/dev/null; then echo "Node.js $$v is too old: install Node.js 22 or 24 (README, Quick start)" >&2; exit 2; \
	elif [ "$$major" -lt 22 ]; then echo "Node.js $$v: the CDK no longer supports it (it still runs); install Node.js 22 or 24 (README, Quick start)" >&2; fi

# A line per phase of setup, then its time: the first setup spends minutes in pip and npm.
# $(call phase,what,command): prints "setup: what..." and "setup: what: done in N s".
phase = @echo "setup: $(1)..."; started=$$(date +%s); $(2) && echo "setup: $(1): done in $$(( $$(date +%s) - started )) s"

# The installer is uv (a wheel from PyPI, put into the venv by pip), installing the lock
# (infra/requirements.lock, `make lock`) from its cache shared by every project on the machine: a
# project made by `longstep init` installs the same versions again without a download. pip is the
# fallback when uv cannot run.
UV_VERSION := 0.13.9
# pip in the venv too: the Lambda layer's wheels and the wheel test use it.
PIP_VERSION := 26.3
LOCK := infra/requirements.lock
UV := $(VENV)/bin/uv

$(VENV)/.installed: pyproject.toml setup.py $(LOCK)
	$(call phase,creating $(VENV),$(PYTHON) -m venv --without-pip $(VENV))
	$(call phase,installing uv $(UV_VERSION) (the installer),$(PYTHON) -m pip --python $(PY) install --quiet --disable-pip-version-check uv==$(UV_VERSION))
	$(call phase,installing Longstep and its locked dependencies (uv: seconds from a warm cache; the first time downloads about 300 MB),$(UV) pip install --quiet --python $(PY) -r $(LOCK) -e ".[dev]" pip==$(PIP_VERSION) || { $(PYTHON) -m pip --python $(PY) install --quiet --disable-pip-version-check pip==$(PIP_VERSION) && $(PY) -m pip install --quiet --disable-pip-version-check -r $(LOCK) -e ".[dev]"; })
	@touch $@

# The lock, regenerated from pyproject.toml's pins (the same versions for every platform Lambda and CI run on).
.PHONY: lock
lock: $(VENV)/.installed
	$(UV) pip compile pyproject.toml --extra dev --python-version 3.11 --python-platform x86_64-manylinux2014 --quiet -o $(LOCK)

node_modules/.installed: package.json package-lock.json
	$(call phase,installing the CDK CLI and its Node.js packages (npm ci),npm ci --no-audit --no-fund --loglevel=error)
	@touch $@

# The Lambda layer's third-party wheels (fetched once for the Lambda platform, then cached).
.longstep/.layer: layers/runtime/requirements.txt $(VENV)/.installed
	$(call phase,building the Lambda layer (its wheels for the Lambda platform; cached after the first time),$(PY) -m longstep_kit.bundling >/dev/null)
	@touch $@

# The browser the approval pages' tests drive (tests/browser): Debian's chromium and its
# chromedriver; Selenium uses /usr/bin/chromedriver and downloads nothing. Installed with apt only
# when missing (CI runs as root on Debian); checked on every setup, so a removed browser comes back.
.PHONY: browser
browser:
	@command -v chromium >/dev/null && command -v chromedriver >/dev/null || { \
	  echo "installing chromium and chromium-driver (apt) for the browser tests"; \
	  apt-get update && DEBIAN_FRONTEND=noninteractive apt-get install -y chromium chromium-driver; }

demo: setup
	@echo "demo: running the triage agent on the local stack (the first run synthesizes the CDK app: about 30 s)"
	$(VENV)/bin/longstep local run events/scenarios/triage.json --report report.json

# Two workers (CI has two cores); a test module's local stack stays on one worker. Files go out in the
# order tests/conftest.py gives (long end-to-end files first), not sorted by their number of tests.
test: setup
	$(VENV)/bin/ruff check infra functions layers tests agents bench examples app.py setup.py
	$(VENV)/bin/ruff format --check infra functions layers tests agents bench examples app.py setup.py
	$(VENV)/bin/lint-imports --no-cache
	$(VENV)/bin/pytest -q -n 2 --dist loadfile --no-loadscope-reorder

# The fast subset a developer runs after every edit: unit and functional tests (the handlers on
# moto), no local stack, no browser, no campaign; under a minute on 2 idle cores.
.PHONY: test-fast
test-fast: $(VENV)/.installed
	$(VENV)/bin/pytest -q -n 2 tests/unit tests/functional

# The handlers' hostile-input tests with 5,000 events each (the suite runs 300).
fuzz: setup
	LONGSTEP_FUZZ_EXAMPLES=5000 $(VENV)/bin/pytest -q tests/functional/test_fuzz.py

synth: setup
	PATH="$(CURDIR)/$(VENV)/bin:$$PATH" npx cdk synth --quiet

deploy: setup
	PATH="$(CURDIR)/$(VENV)/bin:$$PATH" npx cdk deploy

lint: synth
	$(VENV)/bin/cfn-lint cdk.out/*.template.json

bench: bench-storage bench-cost bench-waits bench-speed bench-live bench-turns bench-fleet bench-fleet-gates bench-mcp bench-loop

clean:
	rm -rf cdk.out .longstep .pytest_cache

# Storage benchmark (issue 5): installs the LangGraph baselines, runs every system on moto and
# writes bench/results/storage.json and bench/RESULTS.md.
.PHONY: bench-storage
bench-storage: $(VENV)/.installed
	$(PY) -m pip install --quiet --disable-pip-version-check -e ".[bench]"
	$(PY) -m bench.storage

# Cost benchmark (issue 7): runs triage.json and a longer synthetic session on the local stack and
# writes the infrastructure cost per 1,000 agent turns to bench/results/cost.json and bench/RESULTS.md.
.PHONY: bench-cost
bench-cost: setup
	$(PY) -m bench.cost

# Waits benchmark (issue 4): runs 3-day approval and event waits on the local stack (local clock) against
# a 5 s polling loop on the same engine; writes bench/results/waits.json and bench/RESULTS.md.
.PHONY: bench-waits
bench-waits: setup
	$(PY) -m bench.waits

# Speed benchmark (issue 13): a 50/200/400-turn local run, the whole `longstep local run` process,
# AWS Lambda durable functions' test runner and moto's engine on 400-step loops, side by side;
# writes bench/results/speed.json and bench/RESULTS.md.
.PHONY: bench-speed
bench-speed: $(VENV)/.installed
	$(PY) -m pip install --quiet --disable-pip-version-check -e ".[bench]"
	$(PY) -m bench.speed --notes bench/speed/NOTES.md

# Live runs (issue 23): what the event stream costs per 1,000 turns (its DynamoDB requests counted
# in moto), a follower's polls, and a 3-day pause (0 invocations, 0 transitions); writes
# bench/results/live.json and bench/RESULTS.md.
# A turn's cost before and after (issue 28): the read loop run by the BASELINE revision and by this
# tree side by side (requests by purpose, transitions, CPU, storage); writes bench/results/turns.json.
BASELINE ?= 916dfdc
.PHONY: bench-turns
bench-turns: setup
	$(PY) -m bench.turns --baseline $(BASELINE)

.PHONY: bench-live
bench-live: setup
	$(PY) -m bench.live

# Fleet benchmark (issue 27): 300 runs across five tenants on the local stack, a deploy that fails
# some, the runs index's cost per 1,000 runs, the queries, a bulk redrive gated by replay and budget asks;
# writes bench/results/fleet.json and bench/RESULTS.md (exit 1 if a selection is not exact).
.PHONY: bench-fleet
bench-fleet: setup
	$(PY) -m bench.fleet
# Concurrency keys and the shared model rate limit (issue 27) at fleet size: 300 runs, five tenants,
# a limit per tenant and a model quota; writes bench/results/fleet_gates.json and bench/RESULTS.md
# (exit 1 if a key went over its limit or idle while a run waited, or the quota was passed).
.PHONY: bench-fleet-gates
bench-fleet-gates: setup
	$(PY) -m bench.fleet.gates
# MCP (issue 26): a long-running MCP call whose task waits 3 days in the condition loop: 0 Lambda
# invocations between polls, and what the polls cost; writes bench/results/mcp.json and bench/RESULTS.md.
.PHONY: bench-mcp
bench-mcp: setup
	$(PY) -m bench.mcp
# The loop a team lives in (issue 34): fresh clones of this tree and of BASELINE_LOOP side by side,
# setup, an edit and a rerun, an init project, test-fast; writes bench/results/loop.json and bench/RESULTS.md.
BASELINE_LOOP ?= 300ca6f
.PHONY: bench-loop
bench-loop: $(VENV)/.installed
	$(PY) -m bench.loop --baseline $(BASELINE_LOOP) $(BENCH_LOOP_FLAGS)

# LangGraph's checkpointer conformance suite against LongstepSaver (longstep.langgraph) on moto:
# the release the dev extra installs, and the newer copy in ../shared/conformance/ when it is there
# (it says so when it is not); prints each report, exit 1 unless every capability passes.
# `make conformance` runs it with every other conformance suite of the project.
.PHONY: conformance conformance-langgraph
conformance: conformance-langgraph
conformance-langgraph: $(VENV)/.installed
	$(PY) -m bench.langgraph.conformance

# LangGraph checkpointers side by side (issue 41): the storage bench's session through one LangGraph
# graph, checkpointed by langgraph-checkpoint-aws's DynamoDBSaver and by LongstepSaver (add_messages
# and DeltaChannel); writes bench/results/langgraph_storage.json and bench/RESULTS.md.
.PHONY: bench-langgraph
bench-langgraph: $(VENV)/.installed
	$(PY) -m pip install --quiet --disable-pip-version-check -e ".[bench]"
	$(PY) -m bench.langgraph.storage

# The exhaustive campaigns: every fault point at every turn of the suite's crash tests (the cases
# marked `campaign`; the suite runs a representative of each kind), then the fault-kind campaign
# (zombies at every point, lost acknowledgements, skew) on triage.json: bench/results/faults_campaign.json.
.PHONY: campaign
campaign: setup
	$(VENV)/bin/pytest -q -n 2 --dist loadfile -m campaign tests/local
	$(PY) -m bench.faults.campaign

# Quick start on a fresh machine (Python 3.11): `make plan`, then `make test`.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
CHECKOV_VENV := .venv-checkov
CHECKOV_VERSION := 3.3.30
TRAVEL ?= 8h 9d 75d
STACKS := $(patsubst stacks/Pulumi.%.yaml,%,$(wildcard stacks/Pulumi.*.yaml))

.PHONY: venv system-packages lint test test-travel plan plan-all docs bench clean

$(BIN)/kimi-k3: pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	$(BIN)/pip install --quiet -e '.[test]'
	@touch $@

$(CHECKOV_VENV)/bin/checkov:
	$(PYTHON) -m venv $(CHECKOV_VENV)
	$(CHECKOV_VENV)/bin/pip install --quiet --upgrade pip
	$(CHECKOV_VENV)/bin/pip install --quiet checkov==$(CHECKOV_VERSION)
	@touch $@

## venv: create .venv with the project, its pinned dependencies and the test tools
venv: $(BIN)/kimi-k3

## plan: offline plan of the dev stack (no AWS, no Pulumi CLI) into build/plan/dev
plan: venv
	$(BIN)/kimi-k3 plan dev

## plan-all: offline plan of every stack in stacks/
plan-all: venv
	@set -e; for s in $(STACKS); do $(BIN)/kimi-k3 plan $$s --quiet; done

## system-packages: the Debian packages whose real binaries the tests run (tools/debian-packages.txt)
system-packages:
	tools/install-debian-packages.sh

## lint: ruff (style, imports, likely bugs) and mypy (types) over the code; configuration in pyproject.toml
lint: venv
	$(BIN)/ruff check components tests policy tools __main__.py
	$(BIN)/mypy

## test: the lint gate, then the whole suite once but the tests marked `slow` (a heavyweight real program: AIPerf, pip
## building the wheel; test-travel runs them); each test marked `clock` runs twice in it, the second time with the
## clock moved by 9 days (tests/conftest.py; tests/test_wall_clock.py keeps the marks complete; tests/test_time_travel.py
## moves the clock itself, by 8h, 9d and 75d); the gate CI runs on every pull request
test: lint $(CHECKOV_VENV)/bin/checkov system-packages
	$(BIN)/python -m pytest -q -n 2 --dist worksteal -m "not slow"

## test-travel: the whole suite, the tests marked `slow` included, with the clock moved by each of $(TRAVEL) (and the
## property tests at their full example counts): nothing may depend on today's date; CI runs it nightly
## (.github/workflows/nightly.yml)
test-travel: venv $(CHECKOV_VENV)/bin/checkov system-packages
	@set -e; for offset in $(TRAVEL); do echo "== the whole suite with the clock moved by $$offset"; KIMI_K3_FULL_PROPERTIES=1 $(BIN)/python -m pytest -q -n 2 --travel $$offset; done

## docs: regenerate Pulumi.yaml's config block and the README config table from components/stack/config_keys.py
docs: venv
	$(BIN)/python -m kimi_k3.stack.config_keys

## bench: median wall time of the offline plan against the SDK import floors
bench: venv
	$(BIN)/python tools/bench_plan.py

clean:
	rm -rf build $(VENV) $(CHECKOV_VENV)

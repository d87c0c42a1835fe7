# Konfig developer entry points. Everything installs itself into .venv on first use.
SHELL := /bin/bash
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: venv lint test demo cluster-build cluster-up cluster-down sops-build helm-build tofu-build tofu-up tofu-down constraints clean
.PHONY: tools-test test-hosted unit bench bench-changed bench-cache bench-batch bench-startup bench-pr-round bench-preview bench-report bench-report-repo forge-build forge-up forge-down  # konfig:project-only

# constraints.txt pins every package (konfig's and the tools'): installs are reproducible
$(STAMP): pyproject.toml constraints.txt
	@test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -c constraints.txt -e '.[dev]'
	@touch $(STAMP)

venv: $(STAMP)

## constraints: re-pin constraints.txt from a fresh .venv after changing pyproject.toml
constraints:
	rm -rf $(VENV)
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -e '.[dev]'
	{ sed -n '/^#/p' constraints.txt; $(BIN)/python -m pip freeze --exclude-editable; } > constraints.txt.new
	mv constraints.txt.new constraints.txt
	@touch $(STAMP)

## lint: ruff (lint + format check) and mypy (strict)
lint: venv
	$(BIN)/ruff check tools hack
	$(BIN)/ruff format --check tools hack
	$(BIN)/mypy

# konfig:project-only
## tools-test: lint, every test of the tools (the local Kubernetes control plane, the sops CLI, OpenTofu and PostgreSQL, the local forge and helm are built and started as needed)
TOOLS_TEST := tools-test
tools-test: lint cluster-build sops-build tofu-build forge-build helm-build
	$(BIN)/python -m pytest

## test-hosted: tools-test and konfig test/check without the tests that need ../shared (OpenTofu's provider, the forge's runner): a hosted runner's make test
test-hosted: lint cluster-build sops-build helm-build
	$(BIN)/python -m pytest -m "not tofu and not forge"
	$(BIN)/konfig test --all
	$(BIN)/konfig check --all

## unit: tests that need no cluster, no OpenTofu/PostgreSQL, no forge and no helm
unit: venv
	$(BIN)/python -m pytest -m "not cluster and not tofu and not forge and not helm"
# /konfig:project-only

## (in the Konfig project, test runs tools-test first: lint and the tools' own tests)  # konfig:project-only
## test: konfig test and konfig check on every stack (what a pull request runs before its preview)
test: venv $(TOOLS_TEST)
	$(BIN)/konfig test --all
	$(BIN)/konfig check --all

## demo: the whole loop on the example stacks
demo: venv
	PATH="$(CURDIR)/$(BIN):$$PATH" hack/demo

# konfig:project-only
## bench: compile throughput benchmark
bench: venv
	$(BIN)/python hack/bench_compile.py

## bench-changed: konfig changed on a generated 1,500-project / 5,000-stack repository
bench-changed: venv
	$(BIN)/python hack/bench_changed.py

## bench-cache: compile cache cold vs warm, -j1 vs -j2, on a generated repository
bench-cache: venv
	$(BIN)/python hack/bench_compile_cache.py

## bench-batch: cold compile of 1,000 generated stacks, batches vs a KCL process per stack
bench-batch: venv
	$(BIN)/python hack/bench_compile_batch.py

## bench-preview: konfig preview of a 100-object stack vs kubectl diff --server-side (starts hack/cluster)
bench-preview: venv
	$(BIN)/python hack/bench_preview.py

## bench-pr-round: a one-stack pull request on the local forge, push -> comment, by job and kind
bench-pr-round: venv
	$(BIN)/python hack/bench_pr_round.py

## bench-startup: CPU seconds of konfig --version, list and --help, and what they import
bench-startup: venv
	$(BIN)/python hack/bench_startup.py

## bench-report: konfig report on 2,000 stacks of one repeated change: grouped comment vs per stack
bench-report: venv
	$(BIN)/python hack/bench_report.py

## bench-report-repo: the grouped comment of a base-model change on a generated 1,050-stack repository
bench-report-repo: venv
	$(BIN)/python hack/bench_report_repo.py

# /konfig:project-only

## cluster-build: build the local control plane from Go modules (cached in .cache/cluster)
cluster-build:
	hack/cluster build

## sops-build: build the sops CLI (and age-keygen) the round-trip tests use, from Go modules (cached in .cache/sops)
sops-build:
	hack/sops build

## helm-build: build the helm CLI the chart tests use, from its Go module (cached in .cache/helm)
helm-build:
	hack/helm build

cluster-up:
	hack/cluster up

cluster-down:
	hack/cluster down

## tofu-build: build OpenTofu and the PostgreSQL provider, lay out the provider mirror (cached in .cache/tofu)
tofu-build:
	hack/tofu build

tofu-up:
	hack/tofu up

tofu-down:
	hack/tofu down

# konfig:project-only
## forge-build: build Gitea (Go module proxy) and act_runner (../shared/forge) (cached in .cache/forge)
forge-build:
	hack/forge build

forge-up:
	hack/forge up

forge-down:
	hack/forge down
# /konfig:project-only

clean:
	rm -rf $(VENV) .cache .mypy_cache .ruff_cache

# Single entry point. `make test` works on a fresh machine: it builds its own virtualenv,
# installs the system packages the tests need, runs the static checks and the whole suite.
PYTHON ?= python3
VENV   ?= .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed

.PHONY: help test lint typecheck unit sysdeps bench run clean

help:
	@echo "make run      run the daemon on :9479 (installs into $(VENV) first)"
	@echo "make test     static checks + every test (installs what it needs)"
	@echo "make bench    performance figures (docs/performance.md)"
	@echo "make clean    remove the virtualenv and caches"

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	$(BIN)/pip install --quiet -e '.[test,dev]'
	touch $(STAMP)

sysdeps:
	scripts/ensure-system-deps.sh

lint: $(STAMP)
	$(BIN)/ruff check exporter tests
	$(BIN)/ruff format --check exporter tests

typecheck: $(STAMP)
	$(BIN)/mypy exporter

# pytest exits 5 when it collected nothing: that is a failure here, not a pass.
unit: $(STAMP) sysdeps
	@rc=0; $(BIN)/python -m pytest $(PYTEST_ARGS) || rc=$$?; \
	if [ $$rc -eq 5 ]; then echo "pytest collected no tests: failing"; exit 1; fi; exit $$rc

test: lint typecheck unit

bench: $(STAMP)
	$(BIN)/python -m exporter.bench

run: $(STAMP)
	$(BIN)/gdx serve $(ARGS)

clean:
	rm -rf $(VENV) .pytest_cache .mypy_cache .ruff_cache .hypothesis

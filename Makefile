# Quick start: `make demo` (set-up + tritonkit check on a buggy kernel), `make test` (set-up + the test suite).
# `make test` also installs headless Chromium (apt-get, as root) for the HTML report's browser test.
PYTHON ?= python3
VENV   ?= .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed

.PHONY: demo test bench install browser clean

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	# torch: prefer a CPU build (this machine keeps torch 2.13.0 CPU on disk; elsewhere PyTorch's CPU index);
	# a torch already in the environment is kept.
	$(BIN)/python -c "import torch" 2>/dev/null || $(BIN)/python -m pip install -q torch==2.13.0 \
	  || $(BIN)/python -m pip install -q torch --index-url https://download.pytorch.org/whl/cpu \
	  || $(BIN)/python -m pip install -q torch
	$(BIN)/python -m pip install -q -e '.[all,test]'
	touch $(STAMP)

install: $(STAMP)

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
# instead of skipping it.
test: $(STAMP) browser
	@if command -v chromium >/dev/null 2>&1; then export TRITONKIT_REQUIRE_BROWSER=1; fi; \
	  echo "$(BIN)/python -m pytest -q $(PYTEST_WORKERS)  (TRITONKIT_REQUIRE_BROWSER=$${TRITONKIT_REQUIRE_BROWSER:-0})"; \
	  $(BIN)/python -m pytest -q $(PYTEST_WORKERS)

bench: $(STAMP)
	$(BIN)/python benchmarks/check_speed.py

clean:
	rm -rf $(VENV) build src/*.egg-info .pytest_cache

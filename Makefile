# Quick start: `make demo` (set-up + tritonkit check on a buggy kernel), `make test` (set-up + the test suite).
PYTHON ?= python3
VENV   ?= .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed

.PHONY: demo test bench install clean

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	# torch: prefer a CPU build (this machine keeps torch 2.13.0 CPU on disk; elsewhere PyTorch's CPU index);
	# a torch already in the environment is kept.
	$(BIN)/python -c "import torch" 2>/dev/null || $(BIN)/python -m pip install -q torch==2.13.0 \
	  || $(BIN)/python -m pip install -q torch --index-url https://download.pytorch.org/whl/cpu \
	  || $(BIN)/python -m pip install -q torch
	$(BIN)/python -m pip install -q -e '.[test]'
	touch $(STAMP)

install: $(STAMP)

demo: $(STAMP)
	@echo "== tritonkit check on examples/vector_add.py --bug missing_mask (a load and a store without a mask) =="
	@$(BIN)/tritonkit check -- python examples/vector_add.py --bug missing_mask; \
	  status=$$?; if [ $$status -ne 1 ]; then echo "demo: expected findings (exit 1), got exit $$status"; exit 1; fi
	@echo "== exit status 1: findings (0 would mean none) =="

test: $(STAMP)
	$(BIN)/python -m pytest -q

bench: $(STAMP)
	$(BIN)/python benchmarks/check_speed.py

clean:
	rm -rf $(VENV) build src/*.egg-info .pytest_cache

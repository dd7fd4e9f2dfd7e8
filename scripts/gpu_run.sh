#!/usr/bin/env bash
# Runs on a GPU machine (the project's device tool): the whole test suite (GPU tests included), every
# example compiled natively on the GPU (correct and buggy, to show what a GPU run does with the bugs),
# the examples under `tritonkit check` with CUDA tensors, and compute-sanitizer on one bug.
# Writes logs to ${OUT:-/tmp/out}. Assumes torch, triton, pytest, rich are installed; tritonkit from src/.
set -u
OUT=${OUT:-/tmp/out}
mkdir -p "$OUT"
export PYTHONPATH="$PWD/src${PYTHONPATH:+:$PYTHONPATH}" PYTHONUNBUFFERED=1
{
  nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader
  python3 -c "import sys, torch, triton, numpy; print('python', sys.version.split()[0], 'torch', torch.__version__, 'triton', triton.__version__, 'numpy', numpy.__version__)"
} > "$OUT/machine.txt" 2>&1
timeout 300 python3 -m pytest -q -rs tests > "$OUT/pytest.log" 2>&1; echo "pytest exit $?" >> "$OUT/pytest.log"
{
  for ex in examples/*.py; do
    bugs=$(python3 -c "import sys; sys.path.insert(0, 'examples'); import importlib; m = importlib.import_module('$(basename "$ex" .py)'); print(' '.join(getattr(m, 'BUGS', ('none',))))" 2>/dev/null)
    for bug in ${bugs:-none}; do
      echo "== native GPU: $ex --bug $bug"
      timeout 120 python3 "$ex" --bug "$bug" 2>&1 | tail -3; echo "exit ${PIPESTATUS[0]}"
    done
  done
} > "$OUT/native.log" 2>&1
{
  for ex in examples/*.py; do
    echo "== tritonkit check (CUDA tensors): $ex"
    timeout 120 python3 -m tritonkit check -- python "$ex" 2>&1 | tail -4; echo "exit ${PIPESTATUS[0]}"
  done
  echo "== tritonkit check (CUDA tensors): examples/vector_add.py --bug missing_mask"
  timeout 120 python3 -m tritonkit check -- python examples/vector_add.py --bug missing_mask 2>&1 | tail -25
} > "$OUT/check_cuda.log" 2>&1
timeout 180 compute-sanitizer --tool memcheck python3 examples/vector_add.py --bug missing_mask > "$OUT/sanitizer.log" 2>&1
echo "compute-sanitizer exit $?" >> "$OUT/sanitizer.log"

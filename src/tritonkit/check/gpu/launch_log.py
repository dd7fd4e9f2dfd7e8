"""A log of every native Triton launch's tensor arguments, kept in the checked script's process so that
a report made outside it (memcheck's, which knows addresses only) can name the argument and the
element an address falls in.

:func:`install` wraps ``JITFunction.run`` (every launch of a ``@triton.jit`` kernel, autotuned or
not, goes through it): before the launch, one JSON line is appended to the log and flushed (it
survives a kernel that kills the process): the kernel's name and source file, its grid where it
can be computed, and each tensor argument's name, address, storage, shape, strides and dtype.
"""
from __future__ import annotations

import json
import os
from typing import Any, Dict, List, Optional

#: the environment variable naming the log file in the script's process
ENV = "TRITONKIT_GPU_LAUNCH_LOG"

_installed: Optional[tuple] = None


def describe_tensor(name: str, t) -> Optional[Dict[str, Any]]:
    """A tensor argument as logged (its name, address, storage's address and bytes, shape, strides
    in elements, dtype, element bytes, device), or None for anything else (a scalar, a descriptor)."""
    if not (hasattr(t, "data_ptr") and hasattr(t, "untyped_storage") and hasattr(t, "shape")):
        return None
    try:
        storage = t.untyped_storage()
        return {"name": name, "ptr": int(t.data_ptr()), "base": int(storage.data_ptr()),
                "nbytes": int(storage.nbytes()), "shape": [int(s) for s in t.shape],
                "strides": [int(s) for s in t.stride()], "dtype": str(t.dtype).replace("torch.", ""),
                "itemsize": int(t.element_size()), "device": str(t.device)}
    except Exception:  # a tensor subclass without storage (a fake or meta tensor): not logged
        return None


def launch_grid(grid, named: Dict[str, Any]) -> Optional[List[int]]:
    """A launch's grid (a tuple of 1-3 program counts, or a callable of the named arguments, as
    ``kernel[grid]`` takes it) as three program counts, or None where it cannot be computed here."""
    try:
        g = grid(named) if callable(grid) else grid
        g = tuple(int(x) for x in g)
        return list(g + (1,) * (3 - len(g)))[:3]
    except Exception:
        return None


def record(fh, fn, args, kwargs, grid) -> None:
    """Append one launch of the ``JITFunction`` ``fn`` to the open log ``fh``."""
    names = list(getattr(fn, "arg_names", []) or [])
    named = dict(zip(names, args))
    named.update(kwargs)
    tensors = [t for t in (describe_tensor(k, v) for k, v in named.items()) if t is not None]
    code = getattr(getattr(fn, "fn", None), "__code__", None)
    line = {"kernel": getattr(fn, "__name__", "kernel"), "file": code.co_filename if code else "",
            "first_line": code.co_firstlineno if code else 0, "grid": launch_grid(grid, named), "tensors": tensors}
    fh.write(json.dumps(line) + "\n")
    fh.flush()


def install(path: str) -> None:
    """Log every launch of this process to ``path`` (appended to) from now on.

    Raises:
        OSError: the log cannot be opened.
    """
    global _installed
    from triton.runtime import jit as _jit
    if _installed is not None:
        return
    fh = open(path, "a", encoding="utf-8")
    run = _jit.JITFunction.run

    def logged_run(self, *args, grid, warmup, **kwargs):
        if not warmup:
            try:
                record(fh, self, args, kwargs, grid)
            except Exception:  # the log never stops a launch
                pass
        return run(self, *args, grid=grid, warmup=warmup, **kwargs)

    _jit.JITFunction.run = logged_run
    _installed = (_jit.JITFunction, run, fh)


def uninstall() -> None:
    """Stop logging (the log file stays)."""
    global _installed
    if _installed is None:
        return
    cls, run, fh = _installed
    cls.run = run
    fh.close()
    _installed = None


def read(path: str) -> List[Dict[str, Any]]:
    """The launches logged at ``path``, in order; lines that cannot be read (the last one, cut by a
    hard exit) are skipped; a missing log is no launch."""
    if not os.path.exists(path):
        return []
    out = []
    with open(path, encoding="utf-8", errors="replace") as fh:
        for line in fh:
            try:
                rec = json.loads(line)
            except ValueError:
                continue
            if isinstance(rec, dict) and isinstance(rec.get("tensors"), list):
                out.append(rec)
    return out

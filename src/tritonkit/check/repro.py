"""Reproducers: for every launch with a finding, a folder that launches the kernel again with the
launch's exact arguments (``tritonkit check --repro DIR``).

Before a checked launch runs, its arguments are captured: each tensor with its dtype, shape,
strides, storage offset and its **whole storage** (so an overrun into a neighbouring view of the
same storage reads the same bytes again; a storage over ``--repro-max-bytes``, 256 MiB by default,
only the elements its view spans, the rest filled with 0 when the reproducer runs, which its README
says) with the elements tritonkit tracks as never written (which
the reproducer marks again under ``tritonkit check``, so an ``uninitialized_read`` reproduces), scalars, constexprs, the grid and the launch options
(``num_warps``, ``num_stages``, the autotune config's meta-parameters, which reach the kernel as
constexprs). When the launch ends with a finding, the capture is written as
``DIR/NNN-KERNEL/launch.pt`` with ``repro.py`` and a ``README.md`` that says what it should show:

* ``python repro.py`` launches the kernel natively where a GPU exists (``--cpu``: on the CPU), in
  Triton's interpreter otherwise;
* ``tritonkit check -- python repro.py`` reproduces the findings (kind, line, argument, elements,
  programs), since the launch and its inputs are the same.

The kernel comes from its source file. A kernel defined in a module is imported by the module's
name from the tree its file is in (a package's module with its package; the module's other
top-level code runs, as for any import). A kernel defined in the script itself (``__main__``), or every kernel with
``--repro-self-contained``, comes from ``kernel_source.py`` in the folder: the file's imports,
definitions and simple assignments, at their original line numbers (every other statement blanked),
so the findings keep their lines. Launches whose arguments cannot be captured (an argument that is
neither a tensor nor a plain value, a constexpr that cannot be saved) get no folder; the reason is
written to ``DIR/skipped.txt``.
"""
from __future__ import annotations

import ast
import os
import re
import threading
from typing import Any, Dict, List, Optional

#: the directory reproducers are written to in this process (None: none are)
_DIR: List[Optional[str]] = [None]
_SELF_CONTAINED = [False]
#: storages larger than this many bytes are saved in part (see :class:`Capture`)
DEFAULT_MAX_BYTES = 256 << 20
_MAX_BYTES = [DEFAULT_MAX_BYTES]
_LOCK = threading.Lock()

README = """\
# tritonkit reproducer: {kernel}

{what}

Run it:

    python repro.py                          # natively on a GPU, else in Triton's interpreter
    tritonkit check -- python repro.py       # the same findings, on the CPU

Launch: grid {grid}, {options}.
Arguments (as they were before the kernel ran):
{args}
Kernel: {source}
"""

REPRO = '''\
"""tritonkit reproducer: {title}. See README.md."""
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
import torch  # noqa: E402

GPU = torch.cuda.is_available() and "--cpu" not in sys.argv
if not GPU and "TRITONKIT_RUN_DIR" not in os.environ:
    os.environ.setdefault("TRITON_INTERPRET", "1")  # no GPU: Triton's own interpreter
import importlib.util  # noqa: E402

import triton  # noqa: E402

STATE = torch.load(os.path.join(HERE, "launch.pt"), weights_only=False)


def load_kernel():
    if STATE["self_contained"]:
        path = os.path.join(HERE, "kernel_source.py")
        sys.path.insert(0, os.path.dirname(STATE["source"]))  # for the file's own sibling imports
        spec = importlib.util.spec_from_file_location(STATE["module_name"], path)
        module = importlib.util.module_from_spec(spec)
        sys.modules[spec.name] = module
        spec.loader.exec_module(module)
    else:  # the module by its name, from the tree its file is in (a package's module with its package)
        sys.path.insert(0, STATE["import_root"])
        module = importlib.import_module(STATE["module_name"])
    kernel = getattr(module, STATE["kernel"])
    from triton.runtime.autotuner import Autotuner, Heuristics
    while isinstance(kernel, (Autotuner, Heuristics)):
        kernel = kernel.fn  # the config's and the heuristics' meta-parameters are in STATE["args"]
    return kernel


def rebuild(value, device):
    if isinstance(value, dict) and value.get("__tensor__"):
        storage = value["storage"].to(device)
        numel, first = value.get("storage_numel", storage.numel()), value.get("saved_from", 0)
        if numel != storage.numel():  # saved in part (--repro-max-bytes): the rest of the storage is 0
            part, storage = storage, torch.zeros(numel, dtype=value["dtype"], device=device)
            storage[first:first + part.numel()] = part
        if value.get("uninitialized") and "TRITONKIT_RUN_DIR" in os.environ:  # under tritonkit check
            from tritonkit.check import mark_uninitialized
            for first, end in value["uninitialized"]:  # never written before the launch, as then
                mark_uninitialized(storage[first:end])
        return torch.empty(0, dtype=value["dtype"], device=device).set_(
            storage.untyped_storage(), value["offset"], value["shape"], value["stride"])
    return value


def launch(device):
    args = {{name: rebuild(v, device) for name, v in STATE["args"].items()}}
    load_kernel()[tuple(STATE["grid"])](**args, **STATE["options"])
    if device != "cpu":
        torch.cuda.synchronize()
    return args


if __name__ == "__main__":
    launch("cuda" if GPU else "cpu")
'''


def configure(directory: Optional[str], self_contained: bool = False, max_bytes: Optional[int] = None) -> None:
    """Write reproducers to ``directory`` from this process on (None: stop); a storage of more than
    ``max_bytes`` bytes (None: :data:`DEFAULT_MAX_BYTES`, 256 MiB) is saved in part."""
    _DIR[0] = os.path.abspath(directory) if directory else None
    _SELF_CONTAINED[0] = bool(self_contained)
    _MAX_BYTES[0] = DEFAULT_MAX_BYTES if max_bytes is None else int(max_bytes)


def directory_for(given: str, make: bool = True) -> str:
    """``given`` (``--repro DIR``) as an absolute path, made where ``make`` and missing.

    Raises:
        ValueError: it names something that is not a directory, or it cannot be made; the message
            says what to give.
    """
    path = os.path.abspath(given)
    if os.path.exists(path) and not os.path.isdir(path):
        raise ValueError(f"{given}: not a directory; give a directory (made if missing)")
    if make:
        try:
            os.makedirs(path, exist_ok=True)
        except OSError as e:
            raise ValueError(f"{given}: cannot make it: {e.strerror or e}") from None
    return path


def enabled() -> bool:
    """Whether reproducers are written in this process."""
    return _DIR[0] is not None


class Capture:
    """A launch's arguments as they were before it ran (see the module).

    Attributes:
        state: what ``launch.pt`` holds; ``skip``: why no reproducer can be made (None: it can).
    """

    def __init__(self, pyfn, bound: Dict[str, Any], kwargs: Dict[str, Any], grid, config: Optional[str]):
        import torch
        self.pyfn, self.config, self.skip = pyfn, config, None
        args: Dict[str, Any] = {}
        for name, value in bound.items():
            if isinstance(value, torch.Tensor):
                storage = value.untyped_storage()
                itemsize = value.element_size()
                numel = storage.nbytes() // itemsize
                full = torch.empty(0, dtype=value.dtype, device=value.device).set_(storage, 0, (numel,), (1,))
                first, end = 0, numel
                if storage.nbytes() > _MAX_BYTES[0]:  # the view's own span only; the rest is filled with 0
                    first, end = _span(value)
                saved = full[first:end].detach().to("cpu", copy=True)
                args[name] = {"__tensor__": True, "dtype": value.dtype, "shape": tuple(value.shape),
                              "stride": tuple(value.stride()), "offset": value.storage_offset(),
                              "device": value.device.type, "storage": saved, "storage_numel": numel,
                              "saved_from": first,
                              "uninitialized": _uninitialized_ranges(value, saved, first)}
            elif value is None or isinstance(value, (bool, int, float, str)):
                args[name] = value
            elif _saveable(value):
                args[name] = value
            else:
                self.skip = f"argument {name} is a {type(value).__name__}, which a reproducer cannot save"
        options = {k: v for k, v in kwargs.items() if k in ("num_warps", "num_stages", "num_ctas", "maxnreg",
                                                             "enable_fp_fusion")}
        source = os.path.abspath(pyfn.__code__.co_filename)
        self.state = {"kernel": pyfn.__name__, "source": source, "module": pyfn.__module__,
                      "import_root": _import_root(source, pyfn.__module__), "args": args, "grid": list(grid),
                      "options": options, "config": config}


def _import_root(source: str, module: str) -> str:
    """The directory ``module`` (a dotted name) is imported from, given its file ``source``:
    ``/x/src`` for ``liger_kernel.ops.layer_norm`` in ``/x/src/liger_kernel/ops/layer_norm.py``."""
    up = module.count(".") + (os.path.basename(source) == "__init__.py")
    root = os.path.dirname(source)
    for _ in range(up):
        root = os.path.dirname(root)
    return root


def _span(t) -> "tuple[int, int]":
    """``[first, end)``: the storage elements ``t``'s view addresses, lowest to highest."""
    lo = hi = t.storage_offset()
    for size, stride in zip(t.shape, t.stride()):
        if size == 0:
            return lo, lo
        reach = (size - 1) * stride
        lo, hi = lo + min(0, reach), hi + max(0, reach)
    return lo, hi + 1


def _uninitialized_ranges(t, saved, first: int = 0) -> List[List[int]]:
    """The ``[first, end)`` element ranges of ``t``'s storage (``saved``: its elements from element
    ``first`` on, on the host)
    that tritonkit tracks as never written (a ``torch.empty`` nothing wrote yet, or
    ``mark_uninitialized``), so that the reproducer marks them again; [] where none are, or where
    the storage was tracked with another element size."""
    import numpy as np
    import torch

    from .checks import uninitialized as _u
    registry = getattr(_u, "_registry", None)
    if registry is None:
        return []
    tracked = registry.lookup(_u._storage_key(t))
    if tracked is None or tracked.g != t.element_size():
        return []
    cells = saved.view(torch.uint8).numpy().view(np.dtype(f"<u{tracked.g}")) == tracked.pattern
    if tracked.uninit is not None:
        cells &= tracked.uninit[first:first + len(cells)]
    edges = np.flatnonzero(np.diff(np.concatenate(([0], cells.astype(np.int8), [0]))))
    return [[int(a) + first, int(b) + first] for a, b in zip(edges[::2], edges[1::2])]


def _saveable(value) -> bool:
    import io
    import pickle
    try:
        pickle.dump(value, io.BytesIO())
        return True
    except Exception:  # noqa: BLE001 - anything pickle refuses
        return False


def capture(pyfn, bound, kwargs, grid, config) -> Optional[Capture]:
    """The capture of a launch about to run, where reproducers are on (None otherwise)."""
    if not enabled():
        return None
    return Capture(pyfn, bound, kwargs, grid, config)


def write_safely(cap: Capture, findings: List[Any]) -> Optional[str]:
    """:func:`write`, for the end of a checked launch: a reproducer is a by-product of the check, so
    a folder that cannot be written (a full disk, no permission, a source file Python cannot parse)
    is said on stderr and the run goes on."""
    import sys
    try:
        return write(cap, findings)
    except Exception as e:  # noqa: BLE001 - whatever went wrong, the checked run must not end here
        print(f"tritonkit: could not write the reproducer of {cap.state['kernel']} in {_DIR[0]}: "
              f"{type(e).__name__}: {e}", file=sys.stderr)
        return None


def write(cap: Capture, findings: List[Any]) -> Optional[str]:
    """Write ``cap``'s folder for a launch that made ``findings``; returns the folder (None: skipped,
    the reason appended to ``skipped.txt``).

    Raises:
        OSError: the folder or a file in it cannot be written.
        SyntaxError: the kernel's source file cannot be parsed (self-contained folders).
    """
    import torch
    directory = _DIR[0]
    if directory is None:
        return None
    kernel = cap.state["kernel"]
    with _LOCK:
        os.makedirs(directory, exist_ok=True)
        if cap.skip is None and cap.state["module"] != "__main__" and not _SELF_CONTAINED[0] \
                and not os.path.exists(cap.state["source"]):
            cap.skip = f"its source file {cap.state['source']} does not exist"
        if cap.skip is not None:
            with open(os.path.join(directory, "skipped.txt"), "a", encoding="utf-8") as fh:
                fh.write(f"{kernel}: {cap.skip}\n")
            return None
        n = 1 + sum(1 for e in os.listdir(directory) if re.match(r"\d{3}-", e))
        while True:  # made with mkdir, so that processes writing to one DIR (pytest-xdist) never share a folder
            folder = os.path.join(directory, f"{n:03d}-{re.sub(r'[^A-Za-z0-9_]', '_', kernel)}")
            try:
                os.mkdir(folder)
                break
            except FileExistsError:
                n += 1
    self_contained = _SELF_CONTAINED[0] or cap.state["module"] == "__main__"
    state = dict(cap.state, self_contained=self_contained,
                 module_name="_tritonkit_repro_kernel" if cap.state["module"] == "__main__" else cap.state["module"])
    if self_contained:
        with open(cap.state["source"], encoding="utf-8") as fh:
            text = skeleton(fh.read())
        with open(os.path.join(folder, "kernel_source.py"), "w", encoding="utf-8") as fh:
            fh.write(text)
    torch.save(state, os.path.join(folder, "launch.pt"))
    what = "\n".join(sorted({f"* {f.kind} at line {f.line}" + (f", argument {f.arg}" if f.arg else "")
                              for f in findings}))
    title = "; ".join(f"{f.kind} in {kernel} at line {f.line}" for f in findings[:3])
    with open(os.path.join(folder, "repro.py"), "w", encoding="utf-8") as fh:
        fh.write(REPRO.format(title=title.replace('"', "'")))
    args = "\n".join(f"* {n}: " + (_describe(v) if isinstance(v, dict) and v.get("__tensor__") else repr(v))
                     for n, v in state["args"].items())
    opts = ", ".join(f"{k}={v}" for k, v in state["options"].items()) or "default options"
    if cap.config:
        opts += f"; autotune config {cap.config}"
    source = (f"kernel_source.py (the definitions of {cap.state['source']}, at their lines)" if self_contained
              else f"{cap.state['source']} (imported by path)")
    with open(os.path.join(folder, "README.md"), "w", encoding="utf-8") as fh:
        fh.write(README.format(kernel=kernel, what=f"It should show:\n\n{what}", grid=state["grid"], options=opts,
                               args=args, source=source))
    return folder


def _describe(v: dict) -> str:
    """A README line for a saved tensor: what it is, and whether its storage was saved whole."""
    numel, part = v["storage_numel"], v["storage"].numel()
    text = (f"{v['dtype']} tensor, shape {list(v['shape'])}, strides {list(v['stride'])}, storage offset "
            f"{v['offset']}, storage of {numel} elements (on {v['device']})")
    if part != numel:
        text += (f"; over --repro-max-bytes, so only the view's elements [{v['saved_from']}, "
                 f"{v['saved_from'] + part}) are saved exactly, the rest of the storage is 0: addresses (and so "
                 "out-of-bounds findings) reproduce, values read outside the view do not")
    return text


def skeleton(source: str) -> str:
    """``source`` (a Python file) with only its imports, function and class definitions and
    assignments kept, each at its own lines; every other top-level statement (calls, loops,
    ``if __name__ == "__main__":`` blocks, ...) becomes blank lines, so line numbers stay. An
    assignment that launches a kernel (``kernel[grid](...)``) or calls a function of the file (which
    may) is blanked too."""
    tree = ast.parse(source)
    lines = source.splitlines()
    keep = [False] * len(lines)
    local = {n.name for n in tree.body if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef))}
    for node in tree.body:
        if isinstance(node, (ast.Import, ast.ImportFrom, ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef,
                             ast.Assign, ast.AnnAssign)) and not _runs_code(node, local):
            start = min([node.lineno] + [d.lineno for d in getattr(node, "decorator_list", [])])
            for i in range(start - 1, node.end_lineno):
                keep[i] = True
    return "\n".join(line if k else "" for line, k in zip(lines, keep)) + "\n"


def _runs_code(node, local) -> bool:
    """Whether an assignment's value launches a kernel (a call of a subscript, ``kernel[grid](...)``)
    or calls a function or class of the file itself."""
    if not isinstance(node, (ast.Assign, ast.AnnAssign)) or node.value is None:
        return False
    for sub in ast.walk(node.value):
        if isinstance(sub, ast.Call) and (isinstance(sub.func, ast.Subscript) or
                                          (isinstance(sub.func, ast.Name) and sub.func.id in local)):
            return True
    return False

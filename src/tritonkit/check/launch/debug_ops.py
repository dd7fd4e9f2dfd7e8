"""``tl.device_print`` and ``tl.device_assert`` at run time, as the GPU does them: the printf lines
(``pid (x, y, z) idx (i) ...``, in program order under the batched engine) and the failing lanes of
an assert with the values of its condition's variables there (an ``assert_failed`` finding)."""
from __future__ import annotations

import ast
import linecache
import sys
from typing import Dict, Optional, Sequence

import numpy as np
import triton.language as tl

from ..checks.asserts import AssertFailed
from ..findings import Violation
from ..interp.kernels import kernel_frame, kernel_frames
from ..interp.numerics import values

SHOWN_LANES = 8  # lanes (and their values) an example keeps


def device_print(launch, prefix: str, hex: bool, handles: Sequence) -> None:
    """``tl.device_print(prefix, *values)`` in the running program (or batch: each program's lines
    are held back and printed in program order when the batch commits): one line per element, like
    the GPU's printf, ``pid (x, y, z) idx (i) prefix value``.

    Args:
        launch: the running :class:`~tritonkit.check.launch.Launch`.
        prefix: the text before the value.
        hex: print the bits in hexadecimal (``hex=True``).
        handles: the values' interpreter handles.
    """
    if launch.batch is None:
        sys.stdout.write(_print_lines(launch.program_id(), prefix, hex,
                                      [values(h.data, h.dtype.scalar) for h in handles]))
        return
    P = launch.batch.pids.shape[0]
    datas = [values(h.data, h.dtype.scalar) for h in handles]
    active = getattr(launch.builder, "active", None)  # a divergent loop's running programs (see interp.simt)
    for b in range(P):
        if active is not None and not active[b]:
            continue
        pid = tuple(int(c[b]) for c in launch.batch.coords)
        mine = [d[b] if getattr(h, "bat", False) else d for d, h in zip(datas, handles)]
        launch.tx.prints.append((int(launch.batch.order[b]), len(launch.tx.prints),
                                 _print_lines(pid, prefix, hex, mine)))


def _print_lines(program_id, prefix: str, hex: bool, datas) -> str:
    pid = ", ".join(str(i) for i in program_id)
    lines = []
    for k, data in enumerate(datas):
        data = np.asarray(data)
        operand = f" (operand {k})" if len(datas) > 1 else ""
        fmt = _print_format(data.dtype, hex)
        if data.size == 1 and data.ndim <= 1:
            lines.append(f"pid ({pid}) idx (){prefix}{operand}{fmt(data.reshape(-1)[0])}")
            continue
        widths = [len(str(max(n - 1, 0))) for n in data.shape]
        for idx in np.ndindex(data.shape):
            at = ", ".join(str(i).rjust(w) for i, w in zip(idx, widths))
            lines.append(f"pid ({pid}) idx ({at}){prefix}{operand}{fmt(data[idx])}")
    return "\n".join(lines) + "\n"


def assert_failed(launch, frame, cond: np.ndarray, message: str, batched: bool = False) -> None:
    """A ``tl.device_assert`` (or ``assert`` in a kernel) whose condition ``cond`` (bool, the block's
    shape; the program axis first when ``batched``) is false in some lanes: an ``assert_failed``
    finding per program with the failing lanes and the values of the condition's variables there.
    ``frame``: the Python frame that made the assert (the kernel's frames are above it)."""
    text = f"device_assert failed: {message}" if message else "device_assert failed"
    bad = ~cond.astype(bool)
    if launch.batch is not None and not batched:  # the same condition in every program of the batch
        bad = np.broadcast_to(bad, (launch.batch.pids.shape[0],) + bad.shape)
    for b, pid, mine in launch.block_programs(bad):
        failing = np.argwhere(mine.reshape(mine.shape if mine.ndim else (1,)))
        values_at = _assert_values(frame, ~mine, failing[:SHOWN_LANES], b if launch.batch is not None else None)
        launch.report(Violation(kind=AssertFailed.kind, kernel=launch.kernel, frames=kernel_frames(frame),
                                program_id=pid, access="device_assert", masked=False, lanes=len(failing),
                                message=text, example=dict(launch.example(failing, pid), values=values_at)))


def _print_format(dtype: np.dtype, hex: bool):
    """How the GPU's printf shows one value: ``%d``/``%u`` for integers, ``%f`` for floats, hex bits."""
    if hex:
        width = dtype.itemsize * 2
        if dtype.kind == "f":
            return lambda v: f"0x{int(np.asarray(v).view(f'u{dtype.itemsize}')):0{width}x}"
        return lambda v: f"0x{int(v) & ((1 << (8 * dtype.itemsize)) - 1):0{width}x}"
    if dtype.kind == "f":
        return lambda v: f"{float(v):f}"
    if dtype.kind == "b":
        return lambda v: str(int(bool(v)))
    return lambda v: str(int(v))


def _assert_values(frame, cond: np.ndarray, failing: np.ndarray, batch: Optional[int] = None) -> Dict[str, list]:
    """The values, at the failing lanes, of the kernel variables named in the assert's condition
    (``batch``: the program's index in the batch, whose slice of batched variables is read)."""
    frame = kernel_frame(frame)
    if frame is None or not len(failing):
        return {}
    text = linecache.getline(frame.f_code.co_filename, frame.f_lineno).strip()
    try:
        tree = ast.parse(text.rstrip(",").rstrip("\\"))
    except SyntaxError:
        return {}
    names = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and node.args:
            for sub in ast.walk(node.args[0]):
                if isinstance(sub, ast.Name) and sub.id not in names:
                    names.append(sub.id)
            break
    out: Dict[str, list] = {}
    for name in names:
        val = frame.f_locals.get(name)
        if not isinstance(val, tl.tensor) or not hasattr(val.handle, "data"):
            continue
        data = values(val.handle.data, val.dtype)
        if batch is not None and getattr(val.handle, "bat", False):
            data = data[batch]
        try:
            data = np.broadcast_to(data.reshape(data.shape or (1,)), cond.shape or (1,))
        except ValueError:
            continue
        out[name] = [data[tuple(ix)].item() for ix in failing]
    return out

"""The generated module of a distilled heuristic: ``choose_config(args) -> dict`` (nested ifs over
the key arguments, with a comment per case on how it did on its training keys) and ``HEURISTICS``
for ``@triton.heuristics``; the module imports nothing."""
from __future__ import annotations

import re
from typing import TYPE_CHECKING, Any, List, Mapping, Optional

from .._space import COMPILER_OPTIONS
from ._model import Model, Node

if TYPE_CHECKING:
    from ._distilled import Distilled


def config_literal(point: Mapping[str, Any]) -> str:
    """A config as a dict literal: meta-parameters, then the compiler options (``num_warps`` 4 and
    ``num_stages`` 3 where the point leaves them out)."""
    p = dict(point)
    p.setdefault("num_warps", 4)
    p.setdefault("num_stages", 3)
    meta = [(k, v) for k, v in p.items() if k not in COMPILER_OPTIONS]
    opts = [(k, p[k]) for k in COMPILER_OPTIONS if k in p]
    return "{" + ", ".join(f"{k!r}: {v!r}" for k, v in meta + opts) + "}"


def _pct(v: Optional[float]) -> str:
    return "n/a" if v is None else f"{100 * v:.1f}%"


def render_source(d: Distilled) -> str:
    """The Python module of a :class:`Distilled` result: ``choose_config(args) -> dict`` (nested ifs
    over the key arguments) and ``HEURISTICS`` for ``@triton.heuristics``.

    Args:
        d: the result of :func:`distill`.

    Returns:
        The module's source text (it imports nothing).

    Raises:
        ValueError: ``d`` has no tree (read from JSON without one).
    """
    model: Model = d._fitted()
    tol = f"{100 * d.tolerance:g}%"
    lines: List[str] = []
    used_helpers = set()

    def emit(node: Node, indent: int) -> None:
        pad = "    " * indent
        if node.leaf:
            lines.append(f"{pad}# {node.n_train} training key(s); within {tol} of the tuned winner at "
                         f"{node.n_within}, geomean speed {_pct(node.speed)}")
            lines.append(f"{pad}return {config_literal(model.points[node.config])}")
            return
        f = model.features[node.feature]
        cond = f.condition(node.threshold)
        if "_ratio(" in cond:
            used_helpers.add("_ratio")
        if "_dtypes(" in cond:
            used_helpers.add("_dtypes")
        first, second = node.left, node.right
        if f.kind == "cat":  # "if x == 'v'" reads better than "if x != 'v'"
            cond = cond.replace(" != ", " == ", 1)
            first, second = second, first
        lines.append(f"{pad}if {cond}:")
        emit(first, indent + 1)
        lines.append(f"{pad}else:")
        emit(second, indent + 1)

    emit(model.root, 1)
    body = "\n".join(lines)
    meta_names = [k for k in d.configs[0] if k not in COMPILER_OPTIONS] if d.configs else []
    meta_names = [k for k in meta_names if all(k in c for c in d.configs)]
    options = [k for k in COMPILER_OPTIONS if k in ("num_warps", "num_stages") or any(k in c for c in d.configs)]
    ho = d.held_out
    read: List[str] = []
    stack = [model.root]
    while stack:
        node = stack.pop()
        if not node.leaf:
            read += [s.name for s in model.features[node.feature].sources if s.name not in read]
            stack += [node.right, node.left]
    reads = ", ".join(read) or "nothing (one config for every key)"
    kernel = re.sub(r"[^\w.\-]", "_", d.kernel)
    fname = kernel.split(".")[-1] if kernel.split(".")[-1].isidentifier() else "kernel"
    head = [
        f'"""Launch heuristics for the Triton kernel ``{kernel}``, distilled by tritonkit from {d.n_keys} tuned keys.',
        "",
        f"A decision tree (depth {d.depth}, {d.leaves} case(s)) over {reads} picks one of "
        f"{len(d.configs)} config(s).",
        f"On held-out keys ({ho.method} cross-validation) it reaches {_pct(ho.speed_geomean)} of the per-key",
        f"tuned speed (geometric mean; worst key {_pct(ho.speed_worst)}; {ho.n_known} of {ho.n} keys measured"
        f"{'' if ho.n_known == ho.n else ', the others unknown or failed'}).",
        f"One config for all keys reaches {_pct(d.baseline.speed_geomean)}.",
        "",
        "Use::",
        "",
        "    @triton.heuristics(HEURISTICS)",
        "    @triton.jit",
        f"    def {fname}(...): ...",
        "",
        "    cfg = choose_config(args)   # args: the kernel's arguments by name",
        f"    {fname}[grid](..., " + ", ".join(f"{o}=cfg[{o!r}]" for o in options) + ")",
        '"""',
        "",
    ]
    helpers = []
    if "_dtypes" in used_helpers:
        helpers += ["",
                    "def _dtypes(args):",
                    "    # the dtypes of the tensor arguments in argument order, as triton.autotune appends them "
                    "to its key",
                    "    return [str(v.dtype) for v in args.values() if hasattr(v, \"dtype\")]",
                    ""]
    if "_ratio" in used_helpers:
        helpers += ["",
                    "def _ratio(a, b):",
                    "    return a / b if b else float(\"inf\")",
                    ""]
    func = ["",
            "def choose_config(args) -> dict:",
            '    """The config for one launch: meta-parameters and compiler options by name.',
            "",
            "    ``args`` maps the kernel's argument names to their values, as ``@triton.heuristics`` passes them.",
            '    """',
            body,
            "",
            "",
            "# @triton.heuristics is for meta-parameters, the kernel's tl.constexpr arguments. "
            f"{' and '.join(options)}",
            "# are compiler options, not kernel arguments: Triton does not document setting them through",
            "# @triton.heuristics, so HEURISTICS leaves them out. Pass them at launch instead:",
            f"#     cfg = choose_config(args); {fname}[grid](..., "
            + ", ".join(f"{o}=cfg[{o!r}]" for o in options) + ")",
            f"META_PARAMETERS = {tuple(meta_names)!r}",
            "HEURISTICS = {_n: (lambda args, _n=_n: choose_config(args)[_n]) for _n in META_PARAMETERS}",
            ""]
    return "\n".join(head + helpers + func)

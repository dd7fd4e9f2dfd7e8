"""Config tables in the layout vLLM and SGLang read for their fused-MoE kernels.

One JSON file per (E, N, device, dtype): ``{"M": {"BLOCK_SIZE_M": 64, ..., "num_warps": 4,
"num_stages": 3}}`` (``M``, the number of tokens, as a string; every value an int), named
``E={E},N={N},device_name={device}[,dtype={dtype}].json`` with the spaces of the device's name
replaced by ``_``, as vLLM's ``get_config_file_name`` names it; vLLM's ``get_moe_configs`` reads it
with ``json.load`` and ``{int(k): v}``, and picks the config of the nearest ``M``.
"""
from __future__ import annotations

import json
import os
from dataclasses import dataclass
from typing import Any, Dict, List, Optional, Sequence

from ..._io import atomic_write_text
from .._result import TuneResult


@dataclass(frozen=True)
class MoeTable:
    """Which fused-MoE table a sweep writes.

    Attributes:
        E: number of experts.
        N: the intermediate size as vLLM names it (the second dimension of the expert weights).
        dtype: the quantisation selector (``"fp8_w8a8"``, ``"int8_w8a16"``), or None for the
            model's own dtype (then the file name has no ``dtype``).
        key: the name of the sweep's key entry that is the number of tokens (``M``).
    """

    E: int
    N: int
    dtype: Optional[str] = None
    key: str = "M"


def table_file_name(E: int, N: int, device: str, dtype: Optional[str] = None) -> str:
    """The file name vLLM looks for: ``E={E},N={N},device_name={device}[,dtype={dtype}].json``
    (spaces in the device's name replaced by ``_``)."""
    selector = f",dtype={dtype}" if dtype else ""
    return f"E={int(E)},N={int(N)},device_name={device.replace(' ', '_')}{selector}.json"


def table(results: Sequence[TuneResult], key_index: int) -> Dict[str, Dict[str, int]]:
    """``{str(M): winner config}`` over the results (keys without a winner are left out), in
    increasing ``M``; a config keeps its integer values (``num_ctas`` 1 and unset options dropped).

    Raises:
        ValueError: a key's entry at ``key_index`` is not an integer.
    """
    rows: Dict[int, Dict[str, int]] = {}
    for r in results:
        w = r.winner
        if w is None:
            continue
        try:
            m = int(str(r.key[key_index]))
        except (IndexError, ValueError):
            raise ValueError(f"key {r.key}: entry {key_index} is not a number of tokens (an integer)") from None
        rows[m] = {k: int(v) for k, v in w.point.items()
                   if isinstance(v, int) and not isinstance(v, bool) and not (k == "num_ctas" and v == 1)}
    return {str(m): rows[m] for m in sorted(rows)}


def write_table(directory: str, spec: MoeTable, device: str, results: Sequence[TuneResult],
                key_names: List[str]) -> Optional[str]:
    """Write the table of ``results`` (one device's) into ``directory``.

    Returns:
        The file's path, or None where no key has a winner.

    Raises:
        ValueError: ``spec.key`` is not one of ``key_names``, or its values are not integers.
        OSError: the file cannot be written.
    """
    if spec.key not in key_names:
        raise ValueError(f"the table's token-count key {spec.key!r} is not a key of the sweep ({key_names})")
    rows = table(results, key_names.index(spec.key))
    if not rows:
        return None
    os.makedirs(directory, exist_ok=True)
    path = os.path.join(directory, table_file_name(spec.E, spec.N, device, spec.dtype))
    atomic_write_text(path, json.dumps(rows, indent=4) + "\n")
    return path


def read_table(path: str) -> Dict[int, Dict[str, Any]]:
    """Read a table as vLLM's ``get_moe_configs`` does: ``{int(M): config}``.

    Raises:
        OSError: the file cannot be read. ValueError: it is not such a table.
    """
    with open(path) as f:
        data = json.load(f)
    return {int(k): v for k, v in data.items()}

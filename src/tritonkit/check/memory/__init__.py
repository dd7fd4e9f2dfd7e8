"""The checked interpreter's memory: a virtual address space with one slot per tensor argument
(:mod:`.space`), the layouts of the arguments' views (:mod:`.layout`) and paged per-element state
(:mod:`.cells`). Nothing here reports findings: it resolves addresses and moves bytes."""
from .cells import PAGE, PagedCells, element_cells, interval_cells
from .layout import SLOT_SHIFT, HostStorage, Layout, Region, slot_base
from .resolved import runs_within
from .space import AddressSpace, Resolved, row_windows

__all__ = ["AddressSpace", "Resolved", "row_windows", "runs_within", "HostStorage", "Layout", "Region", "slot_base",
           "SLOT_SHIFT", "PAGE", "PagedCells", "element_cells", "interval_cells"]

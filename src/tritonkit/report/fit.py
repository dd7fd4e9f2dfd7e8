"""Tables and lines that fit the width they are printed at (a CI log's 80 columns, a terminal's):
every row on one line, numbers whole, long names (kernels, configs, keys, paths) shortened in the
middle with an ellipsis, and a table too wide for the console split into parts that repeat its
name column.

The width is read when the table is printed (``ConsoleOptions.max_width``), so one table fits an
80-column log and a 200-column terminal alike; the ellipsis is "…" on a UTF-8 console and "..." on
any other. Only the terminal shortens: the JSON and HTML outputs keep the full names."""
from __future__ import annotations

from dataclasses import dataclass
from typing import List, Optional, Tuple, Union

from rich import box as rich_box
from rich.cells import cell_len
from rich.console import Console, ConsoleOptions, RenderResult
from rich.table import Table
from rich.text import Text

__all__ = ["shorten_middle", "ellipsis_for", "Column", "FitTable", "FitLine"]

#: what marks the cut in a shortened name on a UTF-8 console, and on any other
UNICODE_ELLIPSIS = "…"
ASCII_ELLIPSIS = "..."

Cell = Union[str, Text, Tuple[Union[str, Text], Union[str, Text]]]


def ellipsis_for(encoding: Optional[str]) -> str:
    """The ellipsis for a console of this encoding: "…" for UTF-8 (and UTF-16/32; None counts as
    UTF-8, rich's default), "..." for any other (ASCII, Latin-1), which may not be able to write "…"."""
    return UNICODE_ELLIPSIS if (encoding or "utf-8").lower().startswith("utf") else ASCII_ELLIPSIS


def _fit_chars(text: str, cells: int, from_end: bool = False) -> int:
    """How many characters of the start (or the end) of ``text`` take at most ``cells`` cells."""
    n = used = 0
    for ch in (reversed(text) if from_end else text):
        used += cell_len(ch)
        if used > cells:
            break
        n += 1
    return n


def _cut(text: str, width: int, ellipsis: str) -> Optional[Tuple[int, int]]:
    """(characters kept at the start, characters kept at the end) of ``text`` shortened to ``width``
    cells with ``ellipsis`` between them; None where it fits as it is. Where ``width`` leaves no room
    beside the ellipsis, the start only, with no ellipsis: ``(n, -1)``."""
    if cell_len(text) <= width:
        return None
    room = width - cell_len(ellipsis)
    if room < 1:
        return _fit_chars(text, width), -1
    head = _fit_chars(text, room * 3 // 5)
    tail = _fit_chars(text, room - cell_len(text[:head]), from_end=True)
    return head, tail


def shorten_middle(text: str, width: int, ellipsis: str = UNICODE_ELLIPSIS) -> str:
    """``text`` shortened to at most ``width`` terminal cells by cutting out its middle: its start
    (3/5 of the room) and its end (the rest) stay, with ``ellipsis`` between them, since both tell
    kernels and configs apart (``vectorized_elementwise_kernel<4, FillFunctor<float>>`` becomes
    ``vectorized_elem…Functor<float>>``). Text that fits is returned unchanged.

    Args:
        text: the name (any object, as ``str``).
        width: the most cells the result may take (a cell is one terminal column: most characters
            take one, East Asian wide ones two).
        ellipsis: what marks the cut: "…", or "..." where the console is not UTF-8 (:func:`ellipsis_for`).

    Returns:
        The shortened text, ``rich.cells.cell_len(result) <= width``. Where ``width`` leaves no room
        for a character beside the ellipsis, the start of ``text`` cut to ``width`` cells.

    Raises:
        ValueError: ``width`` < 1.
    """
    if width < 1:
        raise ValueError(f"width must be >= 1, got {width}")
    text = str(text)
    cut = _cut(text, width, ellipsis)
    if cut is None:
        return text
    head, tail = cut
    if tail < 0:
        return text[:head]
    return text[:head] + ellipsis + (text[len(text) - tail:] if tail else "")


def _shorten_text(text: Text, width: int, ellipsis: str) -> Text:
    """:func:`shorten_middle` for a styled ``rich.text.Text``: the kept parts keep their styles."""
    cut = _cut(text.plain, max(1, width), ellipsis)
    if cut is None:
        return text
    head, tail = cut
    if tail < 0:
        return text[:head]
    out = text[:head]
    out.append(ellipsis)
    if tail:
        out.append_text(text[len(text.plain) - tail:])
    return out


def _text(cell: Union[str, Text]) -> Text:
    """A cell as ``Text``: a ``str`` is taken as plain text, never as rich markup (a kernel's name
    may hold ``[``)."""
    return cell if isinstance(cell, Text) else Text(str(cell))


@dataclass
class Column:
    """A column of a :class:`FitTable`.

    Attributes:
        header: its heading; wrapped at its spaces where the column is narrower, never cut.
        justify: ``"left"``, or ``"right"`` for numbers.
        shorten: True for a name (a kernel, a config, a key, a path): its cells are shortened in the
            middle to the width left for them. The cells of other columns (numbers, short words)
            are always shown whole.
        min_width: the narrowest a name column is made, in cells, before the table is split into
            parts (a shorter longest name: that name's width).
        max_width: the widest a name column is made, in cells (None: its longest cell's width).
        key: shown in every part where the table is split (the kernel's name: each row stays
            readable on its own).
        style: the column's rich style.
    """
    header: str
    justify: str = "left"
    shorten: bool = False
    min_width: int = 12
    max_width: Optional[int] = None
    key: bool = False
    style: Optional[str] = None


class FitTable:
    """A rich table laid out for the width it is printed at: every row on one line, the cells of
    number columns whole, name columns (:attr:`Column.shorten`) shortened in the middle to the
    width left over. Where even the names at their :attr:`Column.min_width` leave the columns too
    wide, the table is printed as several tables (parts), each with the :attr:`Column.key` columns
    first (as wide in every part) and a run of the others, in order: as few parts as fit, as even
    as can be; parts after the first are titled "(continued)" and the caption goes under the last.

    Only where a part of the key columns and one other column does not fit at their least (a
    console under 40 columns, or a number column's cell wider than the console) do cells wrap onto
    more lines.

    Args:
        columns: the columns, in order.
        title: the table's title (a ``str`` is rich markup, as for ``rich.table.Table``).
        caption: the caption under the table.
        table_options: other ``rich.table.Table`` arguments (``show_edge``, ``header_style``,
            ``title_justify``, ``box``...).

    Raises:
        TypeError: ``padding``, ``expand``, ``width``, ``pad_edge`` or ``collapse_padding`` given
            (the table lays out its own widths).
    """

    def __init__(self, *columns: Column, title=None, caption=None, **table_options) -> None:
        bad = {"padding", "expand", "width", "pad_edge", "collapse_padding"} & set(table_options)
        if bad:
            raise TypeError(f"FitTable lays out its own widths: {', '.join(sorted(bad))} cannot be given")
        self.columns: List[Column] = list(columns)
        self.title = title
        self.caption = caption
        self.table_options = table_options
        self.rows: List[List[Tuple[Text, Text]]] = []

    def add_row(self, *cells: Cell) -> None:
        """Add a row: one cell per column, a ``str`` (plain text, not markup) or a ``Text``; a cell
        of a name column may be a pair ``(name, suffix)`` whose suffix (``" (+3.1%)"``) is never
        shortened.

        Raises:
            ValueError: not one cell per column.
        """
        if len(cells) != len(self.columns):
            raise ValueError(f"{len(cells)} cells for {len(self.columns)} columns")
        row = []
        for cell in cells:
            name, suffix = cell if isinstance(cell, tuple) else (cell, "")
            row.append((_text(name), _text(suffix)))
        self.rows.append(row)

    def _overhead(self, n: int) -> int:
        """Cells a table of ``n`` columns takes besides its cells: padding and lines."""
        box = self.table_options.get("box", rich_box.HEAVY_HEAD)
        lines = (n - 1 + (2 if self.table_options.get("show_edge", True) else 0)) if box else 0
        return 2 * n + lines

    def _widths(self) -> Tuple[List[int], List[int], List[int]]:
        """(least, header, most) width of each column in cells: the least keeps every number whole
        and every header word on one line; header, the whole header too; most, the longest cell."""
        least, whole, most = [], [], []
        for i, col in enumerate(self.columns):
            word = max((cell_len(w) for w in col.header.split()), default=1)
            cells = [cell_len(n.plain) + cell_len(s.plain) for n, s in (r[i] for r in self.rows)]
            longest = max(cells, default=0)
            if col.shorten:
                suffix = max((cell_len(r[i][1].plain) for r in self.rows), default=0)
                top = longest if col.max_width is None else min(longest, max(col.max_width, suffix + 4))
                low = min(top, max(col.min_width, suffix + 4))
            else:
                top = low = longest
            least.append(max(word, low, 1))
            whole.append(max(least[-1], cell_len(col.header)))
            most.append(max(whole[-1], top))
        return least, whole, most

    def _parts(self, width: int, least: List[int]) -> List[List[int]]:
        """The columns of each part: the key columns, then a run of the others, in order. As few
        parts as fit ``width`` (each part's columns at their least), and of those the split whose
        widest part is narrowest, which leaves every part room for the names."""
        keys = [i for i, c in enumerate(self.columns) if c.key]
        rest = [i for i, c in enumerate(self.columns) if not c.key]

        def cost(a: int, b: int) -> int:  # the least width of the part with rest[a:b]
            part = keys + rest[a:b]
            return sum(least[j] for j in part) + self._overhead(len(part))

        count, start = 1, 0
        for b in range(1, len(rest) + 1):  # greedy: the fewest parts
            if b - start > 1 and cost(start, b) > width:
                count, start = count + 1, b - 1
        # best[n][b]: (widest part, where the last part starts) of rest[:b] in n parts
        inf = (float("inf"), 0)
        best = [[inf] * (len(rest) + 1) for _ in range(count + 1)]
        best[0][0] = (0, 0)
        for n in range(1, count + 1):
            for b in range(1, len(rest) + 1):
                best[n][b] = min(((max(best[n - 1][a][0], cost(a, b)), a) for a in range(b)
                                  if best[n - 1][a][0] != float("inf")), default=inf)
        bounds, b = [], len(rest)
        for n in range(count, 0, -1):
            a = best[n][b][1]
            bounds.append((a, b))
            b = a
        return [keys + rest[a:b] for a, b in reversed(bounds)] or [keys]

    def _layout(self, part: List[int], width: int, least, whole, most, cap=None) -> List[int]:
        """The width of each column of ``part``: first the least; then whole headers; then the name
        columns grow toward their longest cell (or their ``cap``: {column: cells}), sharing what is
        left evenly. Where even the least is too wide, the widest columns give up cells until the
        part fits (their cells then wrap)."""
        most = [min(m, (cap or {}).get(j, m)) for j, m in enumerate(most)]
        w = [least[j] for j in part]
        spare = width - self._overhead(len(part)) - sum(w)
        while spare < 0 and max(w) > 1:
            k = w.index(max(w))
            w[k] -= 1
            spare += 1
        for k, j in enumerate(part):
            grow = min(max(spare, 0), whole[j] - w[k])
            if grow > 0:
                w[k] += grow
                spare -= grow
        growing = [k for k, j in enumerate(part) if self.columns[j].shorten and w[k] < most[part[k]]]
        while spare > 0 and growing:
            share = max(1, spare // len(growing))
            for k in list(growing):
                grow = min(share, most[part[k]] - w[k], spare)
                w[k] += grow
                spare -= grow
                if w[k] >= most[part[k]]:
                    growing.remove(k)
                if spare == 0:
                    break
        return w

    def _cell(self, cell: Tuple[Text, Text], col: Column, width: int, ellipsis: str) -> Text:
        name, suffix = cell
        if col.shorten:
            name = _shorten_text(name, width - cell_len(suffix.plain), ellipsis)
        if not suffix.plain:
            return name
        out = name.copy()
        out.append_text(suffix)
        return out

    def __rich_console__(self, console: Console, options: ConsoleOptions) -> RenderResult:
        width = options.max_width
        ellipsis = ellipsis_for(options.encoding)
        least, whole, most = self._widths()
        parts = self._parts(width, least)
        layouts = [self._layout(part, width, least, whole, most) for part in parts]
        if len(parts) > 1:  # the key columns as wide in every part: a row's name reads the same in each
            cap = {j: min(w[part.index(j)] for part, w in zip(parts, layouts))
                   for j, c in enumerate(self.columns) if c.key}
            layouts = [self._layout(part, width, least, whole, most, cap) for part in parts]
        for p, (part, widths) in enumerate(zip(parts, layouts)):
            title = self.title if p == 0 else _continued(self.title)
            caption = self.caption if p == len(parts) - 1 else None
            table = Table(title=title, caption=caption, **self.table_options)
            for j, w in zip(part, widths):
                col = self.columns[j]
                table.add_column(col.header, justify=col.justify, style=col.style, width=w, overflow="fold")
            for row in self.rows:
                table.add_row(*(self._cell(row[j], self.columns[j], w, ellipsis) for j, w in zip(part, widths)))
            yield table


def _continued(title):
    """The title of a table's second and later parts."""
    if title is None:
        return None
    if isinstance(title, Text):
        out = title.copy()
        out.append(" (continued)")
        return out
    return f"{title} (continued)"


class FitLine:
    """One line of text, ``prefix``, ``name`` and ``suffix``, whose name is shortened in the middle
    to fit the width it is printed at (a tree's label: the tree's guides take their share first).

    Args:
        prefix: the text before the name (a ``str`` is rich markup).
        name: the name (plain text).
        suffix: the text after it (a ``str`` is rich markup).
        max_width: the most cells the name takes on a wide console (None: no limit).
        min_width: the fewest cells the name is shortened to; where the line has less room than
            that, it wraps.
    """

    def __init__(self, prefix: Union[str, Text], name: str, suffix: Union[str, Text] = "",
                 max_width: Optional[int] = None, min_width: int = 12) -> None:
        self.prefix = Text.from_markup(prefix) if isinstance(prefix, str) else prefix
        self.name = str(name)
        self.suffix = Text.from_markup(suffix) if isinstance(suffix, str) else suffix
        self.max_width = max_width
        self.min_width = min_width

    def __rich_console__(self, console: Console, options: ConsoleOptions) -> RenderResult:
        room = options.max_width - self.prefix.cell_len - self.suffix.cell_len
        if self.max_width is not None:
            room = min(room, self.max_width)
        line = self.prefix.copy()
        line.append(shorten_middle(self.name, max(room, self.min_width, 1), ellipsis_for(options.encoding)))
        line.append_text(self.suffix)
        yield line

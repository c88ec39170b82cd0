"""Plain-text building blocks: number formatting and aligned tables.

A report is a :data:`Doc`, a list of blocks that are either preformatted text
or a :class:`Table`. :func:`render` turns a Doc into plain text, readable in a
pipe or a log; the CLI may instead hand the tables to rich on a terminal.
Keeping tables as data (not strings) until the last moment is what lets both
renderers share every formatter.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field


@dataclass
class Table:
    """Rows of already formatted cells. ``align`` has one ``l``/``r`` per column."""

    headers: list[str]
    rows: list[list[str]] = field(default_factory=list)
    align: str = ""
    title: str = ""

    def __post_init__(self) -> None:
        if not self.align:
            self.align = "l" + "r" * (len(self.headers) - 1)
        if len(self.align) != len(self.headers):
            raise ValueError(f"Table.align must have {len(self.headers)} letters, got {self.align!r}")


Block = str | Table
Doc = list[Block]


def fmt_int(n: float) -> str:
    """``1234567`` → ``1,234,567``."""
    return f"{round(n):,}"


def fmt_num(x: object) -> str:
    """A compact, human-readable number: ints with separators, floats to ~4 digits."""
    if x is None:
        return "-"
    if isinstance(x, bool):
        return str(x).lower()
    if isinstance(x, int):
        return f"{x:,}"
    if not isinstance(x, float):
        return str(x)
    if math.isnan(x) or math.isinf(x):
        return str(x)
    ax = abs(x)
    if ax >= 1e5:
        return f"{x:,.0f}"
    if ax >= 100:
        return f"{x:.1f}"
    if ax == 0 or ax >= 1e-3:
        return f"{x:.4g}"
    return f"{x:.3g}"


def fmt_band(band: object) -> str:
    """A check's band: ``[lo, hi]`` or a free-text rule."""
    if isinstance(band, Sequence) and not isinstance(band, str) and len(band) == 2:
        return f"[{fmt_num(band[0])}, {fmt_num(band[1])}]"
    return fmt_num(band)


def render_table(t: Table) -> str:
    """Columns padded to their widest cell, two spaces apart; a rule under the header."""
    widths = [len(h) for h in t.headers]
    for row in t.rows:
        for i, cell in enumerate(row):
            widths[i] = max(widths[i], len(cell))

    def line(cells: Sequence[str]) -> str:
        out = [c.rjust(w) if a == "r" else c.ljust(w) for c, w, a in zip(cells, widths, t.align, strict=True)]
        return "  " + "  ".join(out).rstrip()

    lines = [t.title] if t.title else []
    lines.append(line(t.headers))
    lines.append("  " + "  ".join("-" * w for w in widths))
    lines.extend(line(r) for r in t.rows)
    return "\n".join(lines)


def render(doc: Doc) -> str:
    """A Doc as plain text, blocks separated by one blank line."""
    return "\n\n".join(render_table(b) if isinstance(b, Table) else b for b in doc) + "\n"

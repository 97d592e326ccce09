"""Text the lab prints: aligned tables, byte counts and token labels, written once.

A monospace font gives a Chinese character two columns and a Latin letter one, so a table that pads by
``len()`` slides out of line as soon as a cell holds 人工智能. ``display_width`` asks ``wcwidth`` (the
library terminals use) how many columns a string really takes, and every table in the lab is padded by it:
``Trace.table``, speculative decoding's rounds, the serving tables, the benchmark and the widgets' tables.
"""
from __future__ import annotations

import numbers

from wcwidth import wcswidth, wcwidth

# How a token is shown on an axis or in a cell: whitespace made visible, everything else as it is.
VISIBLE = {" ": "␣", "\n": "⏎", "\t": "⇥"}


def display_width(s) -> int:
    """Columns ``str(s)`` takes in a monospace font: 2 for a Chinese character, 0 for a combining mark."""
    s = str(s)
    n = wcswidth(s)
    if n >= 0:
        return n
    return sum(max(0, wcwidth(ch)) for ch in s)  # a control character somewhere: count it as nothing


def pad(s, width: int, align: str = "left") -> str:
    """``str(s)`` padded with spaces to ``width`` display columns, on the right ("left") or left ("right")."""
    s = str(s)
    fill = " " * max(0, width - display_width(s))
    if align == "left":
        return s + fill
    if align == "right":
        return fill + s
    raise ValueError(f"align must be 'left' or 'right', got {align!r}")


def _is_number(v) -> bool:
    if isinstance(v, bool):
        return False
    if isinstance(v, numbers.Number):
        return True
    s = str(v).strip().replace(",", "").replace("_", "")
    for suffix in ("%", "x", "×", " B", " KiB", " MiB", " GiB", " TiB", " ms", " µs", " s"):
        if s.endswith(suffix):
            s = s[: -len(suffix)].strip()
    try:
        float(s)
    except ValueError:
        return False
    return True


def text_table(rows, header=None, align=None) -> str:
    """An aligned text table: a header line, a line of dashes, one line per row.

    ``rows``: dicts with the same keys (the keys are the header) or sequences (then give ``header``).
    ``align``: None right-aligns every column whose cells are all numbers (``1,024``, ``3.5%`` and
    ``12.55 GiB`` count) and left-aligns the rest; "left" or "right" aligns every column alike; or one
    "l"/"r" per column. Widths are display widths, so Chinese text stays in line."""
    rows = list(rows)
    if not rows:
        return "(no rows)"
    if isinstance(rows[0], dict):
        header = list(rows[0]) if header is None else list(header)
        rows = [[r[c] for c in header] for r in rows]
    elif header is None:
        raise ValueError("text_table needs a header when the rows are sequences, not dicts")
    header = [str(h) for h in header]
    rows = [list(r) for r in rows]
    bad = next((r for r in rows if len(r) != len(header)), None)
    if bad is not None:
        raise ValueError(f"every row needs {len(header)} cells (one per header column), got {len(bad)}: {bad!r}")
    if align is None:
        sides = ["right" if all(_is_number(r[j]) for r in rows) else "left" for j in range(len(header))]
    elif align in ("left", "right"):
        sides = [align] * len(header)
    else:
        if len(align) != len(header) or set(align) - {"l", "r"}:
            raise ValueError(f"align takes 'left', 'right' or one 'l'/'r' per column ({len(header)}), got {align!r}")
        sides = ["left" if a == "l" else "right" for a in align]
    cells = [header] + [[str(v) for v in r] for r in rows]
    widths = [max(display_width(r[j]) for r in cells) for j in range(len(header))]
    line = lambda r: "  ".join(pad(v, w, a) for v, w, a in zip(r, widths, sides)).rstrip()
    return "\n".join([line(header), line(["-" * w for w in widths])] + [line(r) for r in cells[1:]])


def fmt_bytes(n) -> str:
    """Binary units, two decimals: '512 B', '512.00 KiB', '12.55 GiB'."""
    if isinstance(n, bool) or not isinstance(n, numbers.Real):
        raise TypeError(f"fmt_bytes takes a number of bytes, got {type(n).__name__} {n!r}")
    for unit in ("B", "KiB", "MiB", "GiB"):
        if abs(n) < 1024:
            return f"{n:.0f} B" if unit == "B" else f"{n:.2f} {unit}"
        n /= 1024
    return f"{n:.2f} TiB"


def token_label(token: str) -> str:
    """A token as a label: a space becomes ␣ (newline ⏎, tab ⇥) so it stays visible; <eos> stays <eos>."""
    return VISIBLE.get(token, token)

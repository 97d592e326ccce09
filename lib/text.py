"""Text the lab prints: aligned tables, byte counts, rounded numbers and token labels, written once.

A monospace font gives a Chinese character two columns and a Latin letter one, so a table that pads by
``len()`` slides out of line as soon as a cell holds 人工智能. ``display_width`` asks ``wcwidth`` (the
library terminals use) how many columns a string really takes, and every table in the lab is padded by it:
``Trace.table``, speculative decoding's rounds, the serving tables, the benchmark and the widgets' tables.
"""
from __future__ import annotations

import math
import numbers

import numpy as np
from wcwidth import wcswidth, wcwidth

from .i18n import say

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


class Code(str):
    """A name from code (a parameter, a file, a function) in a table cell: ``text_table`` shows it as written, never
    translated (vLLM's ``watermark`` stays ``watermark`` in the column that names the parameter)."""


def text_table(rows, header=None, align=None, *, translate: bool = True) -> str:
    """An aligned text table: a header line, a line of dashes, one line per row.

    ``rows``: dicts with the same keys (the keys are the header) or sequences (then give ``header``).
    ``align``: None right-aligns every column whose cells are all numbers (``1,024``, ``3.5%`` and
    ``12.55 GiB`` count) and left-aligns the rest; "left" or "right" aligns every column alike; or one
    "l"/"r" per column. Widths are display widths, so Chinese text stays in line.
    ``translate``: True looks the header and every text cell up in the notebook's language (``lib.i18n.say``: a
    phase, "memory-bound", "layer 0, head 3"; other cells, numbers, tokens, names, stay as they are); False prints
    them as given, for a caller that wrote them with ``lib.i18n.t``. True is the default while notebook cells
    print their English rows through it; a lib caller says which it wants."""
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
    else:
        sides = _sides(align, len(header))
    word = say if translate else str  # the header, and a cell that is a known text (or template), or as given
    header = [word(h) for h in header]
    cells = [header] + [[word(v) if isinstance(v, str) and not isinstance(v, Code) else str(v) for v in r]
                        for r in rows]
    widths = [max(display_width(r[j]) for r in cells) for j in range(len(header))]
    line = lambda r: "  ".join(pad(v, w, a) for v, w, a in zip(r, widths, sides)).rstrip()
    return "\n".join([line(header), line(["-" * w for w in widths])] + [line(r) for r in cells[1:]])


def _sides(align, n: int) -> list[str]:
    """``align`` ("left", "right" or one "l"/"r" per column) as n sides, "left" or "right"."""
    if align in ("left", "right"):
        return [align] * n
    if len(align) != n or set(align) - {"l", "r"}:
        raise ValueError(f"align takes 'left', 'right' or one 'l'/'r' per column ({n}), got {align!r}")
    return ["left" if a == "l" else "right" for a in align]


def markdown_table(rows, header, align="right"):
    """A Markdown table for a notebook to display, in the notebook's language: an ``IPython.display.Markdown``
    of the header, an alignment line and one line per row of ``rows`` (sequences of cells, one per header column).
    A cell is written as it is (it may hold Markdown: ``**total**``, ``&lt;s>``); an empty one leaves its column
    blank. ``align``: "right" (default) or "left" for every column, or one "l"/"r" per column. Under
    ``setup(lang="zh")`` each cell is said alone (``lib.i18n.say(..., markdown=True)``: a header, a bold cell
    inside its ``**``, a template such as "compute {0}, read {1}"); numbers stay as they are."""
    from IPython.display import Markdown

    header = [str(h) for h in header]
    rows = [[str(v) for v in r] for r in rows]
    bad = next((r for r in rows if len(r) != len(header)), None)
    if bad is not None:
        raise ValueError(f"every row needs {len(header)} cells (one per header column), got {len(bad)}: {bad!r}")
    line = lambda cells: "|" + "|".join(f" {v} " if v else " " for v in cells) + "|"
    rule = "|" + "|".join("---:" if s == "right" else "---" for s in _sides(align, len(header))) + "|"
    return Markdown(say("\n".join([line(header), rule] + [line(r) for r in rows]), markdown=True))


SIG_DIGITS = 4  # significant digits of a float in a figure or a table (CONTRIBUTING.md: 4 to 6)


def sig(x: float, digits: int = SIG_DIGITS) -> float:
    """``x`` rounded to ``digits`` significant digits: sig(1234.5678) == 1235.0, sig(0.000123456) == 0.0001235.
    Every float that goes into a plotly figure or a printed table is rounded so, and its last bits (which differ
    from machine to machine) never reach a stored output."""
    return float(f"{x:.{digits - 1}e}")


def fmt_sig(x, digits: int = SIG_DIGITS, *, zeros: bool = False) -> str:
    """A number to ``digits`` significant digits, positional (no exponent): '13480', '0.00009539', '1.5'; an int
    as it is. ``zeros=True`` keeps trailing zeros and every digit before the point: '1.00', '27.3', '0.450',
    '1234' (for 3 digits; how a time is shown)."""
    if isinstance(x, int):
        return str(x)
    r = sig(x, digits)
    if not zeros:
        return np.format_float_positional(r, trim="-")
    if r == 0:
        return "0"
    return f"{x:.{max(0, digits - 1 - math.floor(math.log10(abs(r))))}f}"


def _scaled(n, units, base: int):
    """(n in the largest unit it reaches, that unit): units[k] is base**k."""
    k = 0
    while k < len(units) - 1 and abs(n) >= base ** (k + 1):
        k += 1
    return n / base ** k if k else n, units[k]


def fmt_bytes(n, digits: int | None = None, *, si: bool = False) -> str:
    """A byte count in binary units with two decimals: '512 B', '512.00 KiB', '12.55 GiB' (1 KiB = 1024 B).
    ``digits``: that many significant digits instead ('512 KiB', '1.5 GiB'); ``si=True``: decimal units as a
    datasheet writes them (1 kB = 1000 B, MB, GB, TB: '13.48 GB')."""
    if isinstance(n, bool) or not isinstance(n, numbers.Real):
        raise TypeError(f"fmt_bytes takes a number of bytes, got {type(n).__name__} {n!r}")
    value, unit = _scaled(n, ("B", "kB", "MB", "GB", "TB") if si else ("B", "KiB", "MiB", "GiB", "TiB"),
                          1000 if si else 1024)
    if digits is not None:
        return f"{fmt_sig(float(value), digits)} {unit}"
    return f"{value:.0f} B" if unit == "B" else f"{value:.2f} {unit}"


def fmt_count(n, digits: int = 3) -> str:
    """A large count with a decimal suffix and ``digits`` significant digits: '213K', '6.74B' (parameters)."""
    value, unit = _scaled(n, ("", "K", "M", "B", "T"), 1000)
    return f"{fmt_sig(float(value), digits)}{unit}"


def fmt_si(n, digits: int = 3) -> str:
    """A large quantity with an SI prefix and ``digits`` significant digits, as an axis of FLOPs says it:
    '0', '750', '4G', '1.2T' (k = 10³, M, G, T, P; no "1e9" above the axis to multiply by)."""
    value, unit = _scaled(n, ("", "k", "M", "G", "T", "P"), 1000)
    return f"{fmt_sig(float(value), digits)}{unit}"


def token_label(token: str) -> str:
    """A token as a label: a space becomes ␣ (newline ⏎, tab ⇥) so it stays visible; <eos> stays <eos>; a
    character beyond the Basic Multilingual Plane (a few rare CJK characters of the real model's vocabulary, which
    no shipped or system CJK font draws) as its code point, U+2B6F6, rather than an empty box."""
    if len(token) == 1 and ord(token) > 0xFFFF:
        return f"U+{ord(token):X}"
    return VISIBLE.get(token, token)

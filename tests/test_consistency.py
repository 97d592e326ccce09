"""One quantity, one value: every number the committed notebooks state for a named quantity is lib's value now.

The scan reads every notebook's markdown and stored text outputs (cells marked ``# NBVAL_IGNORE_OUTPUT`` hold
timings and are left out) and collects every occurrence of each quantity, keyed on its labels:

* in text (a markdown paragraph or list item, an output line), an amount belongs to the model named last
  before it (else to the model its output block names first) and to the quantity its label names: the
  words between it and its neighbouring amounts (e.g. "weights in memory", "read per step", "per token",
  "ridge"), else the one label its sentence or line carries;
* in text tables (a header line over a line of dashes), a cell belongs to the row's model and to the
  quantity its column header names.

Each collected amount must equal lib's value at the precision it is printed with (its unit converted), each
quantity must be found in at least the notebooks listed, and an amount in a quantity's range that no label
claims fails too: a future notebook that prints 12.31 GiB as Llama-2-7B's weights in memory, or "KV = weights
at 25,206 tokens", fails here.
"""
from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from lib import costs, presets
from lib.roofline import DEFAULT_GPU, REFERENCE_MACHINES

NOTEBOOKS = Path(__file__).resolve().parent.parent / "notebooks"
MODEL = "llama-2-7b"
MODEL_NAMES = sorted({*presets.PRESETS, *presets.MLA_PRESETS, *presets.MODEL_NAMES}, key=len, reverse=True)
MODEL_RE = re.compile(r"(?<![\w.-])(" + "|".join(re.escape(m) for m in MODEL_NAMES) + r")(?![\w.]|-\d)", re.I)
MACHINE_RE = re.compile(r"\b(H100|H200)\b")
UNITS = {"B": 1, "bytes": 1, "kB": 1e3, "KiB": 2 ** 10, "MB": 1e6, "MiB": 2 ** 20, "GB": 1e9, "GiB": 2 ** 30,
         "TB": 1e12, "TiB": 2 ** 40}
NUMBER = r"(?<![\w.])\d(?:[\d,]*\d)?(?:\.\d+)?(?![\d,]*\w)"
AMOUNT_RE = re.compile(rf"(?P<v>{NUMBER})(?:\s*(?P<u>{'|'.join(UNITS)})\b(?!/s))?")


def printed_matches(printed: str, expected: float) -> bool:
    """Does ``printed`` ("12.55", "25,705", "13210", "295") state ``expected`` at the precision it shows?
    Decimals give the precision; trailing zeros of a whole number may be rounding when 3 or more significant
    digits are left ("25,700", "13210"), so "26,000" does not pass for 25,705."""
    s = printed.replace(",", "")
    if "." in s:
        tol = 0.5 * 10 ** -len(s.split(".")[1])
    else:
        stripped = s.rstrip("0")
        zeros = len(s) - len(stripped) if len(stripped) >= 3 else 0
        tol = 0.5 * 10 ** zeros
    return abs(float(s) - expected) <= tol * (1 + 1e-9)


# ------------------------------------------------------------------------------------------- quantities

@dataclass
class Quantity:
    """A named quantity: lib's value, the unit kind, the amounts of that kind it could be confused with
    (``band``, in bytes or tokens), the label words that claim an amount for it, and where it must appear."""

    name: str
    value: float  # in bytes, tokens or FLOP/byte
    kind: str  # "bytes" (an amount with a byte unit), "tokens" (a plain number) or "ridge"
    band: tuple  # amounts of this kind inside the band belong to one of the quantities sharing it
    labels: str  # regex: words that name this quantity
    headers: str  # regex: table column headers that name it
    must_appear_in: tuple  # notebook prefixes
    owns_band: bool = True  # every amount in the band must carry a label (not for KV per token: a decode step
    # writes exactly one token's K/V, so the "KV write" of a batch-1 step is that amount under another name)
    found: list = field(default_factory=list)


def quantities() -> list[Quantity]:
    w_mem, w_read = costs.weight_bytes(MODEL), costs.streamed_weight_bytes(MODEL)
    kv = costs.kv_bytes_per_token(MODEL)
    return [
        Quantity("weights read per step", w_read, "bytes", (0.97 * w_read, 1.03 * w_mem),
                 r"weights? read|read per step|weight bytes read", r"^weights read", ("04", "06")),
        Quantity("weights in memory", w_mem, "bytes", (0.97 * w_read, 1.03 * w_mem),
                 r"weights? in memory|of (?:fp16 )?weights|weights:|\bweights\b|billion|parameters",
                 r"^weights in memory", ("05", "06", "07")),
        Quantity("KV bytes per token (fp16)", kv, "bytes", (0.75 * kv, 1.25 * kv), r"per token|/token",
                 r"KV per token|KV/token|^bytes \(fp16\)$|^size$", ("05", "06", "07"), owns_band=False),
        Quantity("KV read = weights read (tokens)", costs.kv_read_crossover_tokens(MODEL), "tokens", (20_000, 30_000),
                 r"\bread", r"KV read = weights read|^ctx @B=1$", ("05", "06")),
        Quantity("KV cache memory = weight memory (tokens)", costs.kv_memory_crossover_tokens(MODEL), "tokens",
                 (20_000, 30_000), r"memory|cache equals|KV = weights|matched by",
                 r"KV memory = weight memory|KV = weights", ("05", "06", "07")),
    ]


# ------------------------------------------------------------------------------------------ reading text

@dataclass
class Unit:
    """A sentence-like piece of text: a markdown paragraph or list item, or one output line."""

    where: str
    text: str
    block_model: str | None = None
    block_machine: str | None = None
    block_head: str = ""  # an output's first line, which often names what the lines below it list


def _is_table_rule(line: str) -> bool:
    return bool(line.strip()) and set(line.replace(" ", "")) == {"-"}


def _tables(lines: list[str]):
    """(header, rows) of every text table: a header line, a line of dashes, then rows until a blank line;
    cells cut at the dashes' column extents (the formatters pad every cell to its column)."""
    i = 0
    while i + 1 < len(lines):
        if lines[i].strip() and _is_table_rule(lines[i + 1]):
            spans = [m.span() for m in re.finditer(r"-+", lines[i + 1])]
            cut = lambda line: [line[a:(spans[k + 1][0] if k + 1 < len(spans) else len(line))].strip()
                                for k, (a, _) in enumerate(spans)]
            header, rows, j = cut(lines[i].ljust(len(lines[i + 1]))), [], i + 2
            while j < len(lines) and lines[j].strip() and not _is_table_rule(lines[j]):
                rows.append(cut(lines[j]))
                j += 1
            yield header, rows, range(i, j)
            i = j
        else:
            i += 1


def read_notebook(path: Path):
    """(units, tables) of one notebook; tables as (where, header, rows, block_machine)."""
    nb = json.loads(path.read_text(encoding="utf-8"))
    units, tables = [], []
    for i, cell in enumerate(nb["cells"]):
        where = f"{path.stem} cell {i}"
        src = "".join(cell["source"])
        if cell["cell_type"] == "markdown":
            for para in re.split(r"\n\s*\n|\n(?=\s*(?:[-*] |\d+\. |#))", src):
                units.append(Unit(where, " ".join(para.split())))
            continue
        if src.startswith("# NBVAL_IGNORE_OUTPUT"):
            continue
        for out in cell.get("outputs", []):
            data = out.get("data", {})
            text = "".join(out.get("text", "")) or "".join(data.get("text/markdown", ""))
            if not text:
                continue
            lines = text.splitlines()
            first = MODEL_RE.search(text)
            machine = MACHINE_RE.search(text)
            block_model = first.group(1).lower() if first else None
            block_machine = machine.group(1) if machine else None
            in_tables = set()
            for header, rows, span in _tables(lines):
                tables.append((where, header, rows, block_machine))
                in_tables.update(span)
            units += [Unit(where, line, block_model, block_machine, lines[0]) for k, line in enumerate(lines)
                      if k not in in_tables and line.strip()]
    return units, tables


# ------------------------------------------------------------------------------------------ collecting

def _amounts(text: str):
    for m in AMOUNT_RE.finditer(text):
        value = float(m.group("v").replace(",", ""))
        unit = m.group("u")
        yield m.start(), m.end(), m.group("v"), unit, (value * UNITS[unit] if unit else value)


CLAUSE_END = re.compile(r"[.;:!?](?=\s|$)|\(|\)")


def _label_of(qs: list[Quantity], pieces) -> Quantity | None:
    """The quantity whose labels the first piece of text that names any of them names (from the nearest
    words around the amount out to its whole line or block; within a piece, the more specific first)."""
    for text in pieces:
        named = [q for q in qs if re.search(q.labels, text, re.I)]
        if named:
            return named[0]
    return None


def _model_of(models, start: int, c_lo: int, c_hi: int, block_model):
    """The model an amount at ``start`` is about: the one named last before it in its clause, else first after
    it in its clause, else last before it in its line or paragraph, else (when that names none) its block's."""
    before = [name for pos, name in models if c_lo <= pos < start]
    after = [name for pos, name in models if start < pos < c_hi]
    earlier = [name for pos, name in models if pos < start]
    return (before or after or earlier or [None])[-1 if before or not after else 0] if models else block_model


def _clause(text: str, start: int, end: int) -> tuple[int, int]:
    """The clause around text[start:end]: bounded by sentence punctuation or brackets."""
    lo = max([m.end() for m in CLAUSE_END.finditer(text, 0, start)], default=0)
    nxt = CLAUSE_END.search(text, end)
    return lo, nxt.start() if nxt else len(text)


def collect(units: list[Unit], tables, qs: list[Quantity]) -> list[str]:
    """Fill each quantity's ``found`` with (where, printed, unit); return the amounts no label claims."""
    unclaimed = []
    for u in units:
        amounts = list(_amounts(u.text))
        models = [(m.start(), m.group(1).lower()) for m in MODEL_RE.finditer(u.text)]
        for k, (start, end, printed, unit, value) in enumerate(amounts):
            c_lo, c_hi = _clause(u.text, start, end)
            model = _model_of(models, start, c_lo, c_hi, u.block_model)
            if model != MODEL:
                continue
            before = u.text[max(c_lo, amounts[k - 1][1] if k else 0):start]
            after = u.text[end:min(c_hi, amounts[k + 1][0] if k + 1 < len(amounts) else len(u.text))]
            kind = "bytes" if unit else "tokens"
            candidates = [q for q in qs if q.kind == kind and q.band[0] <= value <= q.band[1]]
            if not candidates:
                continue
            q = _label_of(candidates, (before, after, u.text[c_lo:c_hi], u.text, u.block_head))
            if q is None and any(c.owns_band for c in candidates):
                unclaimed.append(f"{u.where}: {printed}{' ' + unit if unit else ''} in {u.text!r}")
            elif q is not None:
                q.found.append((u.where, printed, unit, u.text))
    for where, header, rows, _ in tables:
        lower = [h.lower() for h in header]
        for row in rows:
            cells = dict(zip(lower, row))
            model = cells.get("model", row[0]).lower()
            if model != MODEL or cells.get("dtype", "fp16") not in ("fp16", "bf16"):
                continue
            for h, cell in zip(header, row):
                m = re.match(rf"({NUMBER})\s*({'|'.join(UNITS)})?", cell)
                if not m:
                    continue
                unit = m.group(2) or next((u for u in UNITS if re.search(rf"\b{u}\b", h)), None)
                named = [q for q in qs if re.search(q.headers, h, re.I)]
                for q in named:
                    q.found.append((where, m.group(1), unit if q.kind == "bytes" else None, " | ".join(row)))
                value = float(m.group(1).replace(",", "")) * (UNITS[unit] if unit else 1)
                kind = "bytes" if unit else "tokens" if re.search(r"ctx|context|token", h, re.I) else None
                if not named and any(q.kind == kind and q.band[0] <= value <= q.band[1] and q.owns_band for q in qs):
                    unclaimed.append(f"{where}: column {h!r} = {cell!r} in {' | '.join(row)!r}")
    return unclaimed


def wrong(q: Quantity) -> list[str]:
    bad = []
    for where, printed, unit, text in q.found:
        if q.kind == "bytes" and unit is None:
            bad.append(f"{where}: {printed} with no unit in {text!r}")
            continue
        expected = q.value / UNITS[unit] if q.kind == "bytes" else q.value
        if not printed_matches(printed, expected):
            bad.append(f"{where}: {printed} {unit or ''} (lib: {expected:,.4g}) in {text!r}")
    return bad


@pytest.fixture(scope="module")
def scanned():
    qs = quantities()
    units, tables, unclaimed = [], [], []
    for path in sorted(NOTEBOOKS.glob("[0-9][0-9]_*.ipynb")):
        u, t = read_notebook(path)
        units += u
        tables += t
    unclaimed = collect(units, tables, qs)
    return {q.name: q for q in qs}, units, tables, unclaimed


# ------------------------------------------------------------------------------------------------ tests

@pytest.mark.parametrize("name", [q.name for q in quantities()])
def test_one_value_per_quantity_across_the_notebooks(scanned, name):
    q = scanned[0][name]
    assert not wrong(q), f"{name} is printed with another value than lib's:\n" + "\n".join(wrong(q))
    notebooks = {where[:2] for where, *_ in q.found}
    missing = [nb for nb in q.must_appear_in if nb not in notebooks]
    assert not missing, (f"{name} was expected in notebooks {q.must_appear_in} but not found in {missing} "
                         f"(relabelled? update the labels here); found in {sorted(notebooks)}")


def test_every_amount_near_a_quantity_is_claimed_by_a_label(scanned):
    unclaimed = scanned[3]
    assert not unclaimed, ("amounts that look like one of the quantities but carry no label saying which "
                           "(weights in memory / weights read per step / per token / which crossover):\n"
                           + "\n".join(unclaimed))


def test_the_two_crossovers_and_weights_differ_by_the_embedding_table(scanned):
    """The only difference between the memory and the read quantities is the stored-not-read lookup table."""
    q = scanned[0]
    table = presets.PRESETS[MODEL].vocab_size * presets.PRESETS[MODEL].d_model * 2
    assert q["weights in memory"].value - q["weights read per step"].value == table
    assert q["KV cache memory = weight memory (tokens)"].value - q["KV read = weights read (tokens)"].value == \
        table / costs.kv_bytes_per_token(MODEL) == 500


RIDGE_RE = re.compile(r"ridge(?: point)?(?: of the (?P<m>H[12]00) SXM)?:?\s*(?:≈\s*)?(?P<v>\d[\d,]*(?:\.\d+)?)\s*FLOP")


def test_every_ridge_point_is_a_reference_machine_s(scanned):
    """Every "ridge ... N FLOP/byte" is the ridge of the machine it names (else the default GPU's), and the
    default GPU's ridge is printed in notebooks 04 and 09."""
    units, tables = scanned[1], scanned[2]
    ridges = {name.split()[0]: m.ridge for name, m in REFERENCE_MACHINES.items()}
    default = DEFAULT_GPU.name.split()[0]
    seen, bad = [], []
    for u in units:
        for m in RIDGE_RE.finditer(u.text):
            named = m.group("m") or next(iter(re.findall(r"H[12]00", u.text[:m.start()])[-1:]), None) \
                or u.block_machine or default
            seen.append((u.where, named))
            if not printed_matches(m.group("v"), ridges[named]):
                bad.append(f"{u.where}: ridge {m.group('v')} for {named} (lib: {ridges[named]:.4g}) in {u.text!r}")
    for where, header, rows, machine in tables:
        if "ridge" in header:
            for row in rows:
                cell = dict(zip(header, row))["ridge"]
                named = machine or default
                seen.append((where, named))
                if not printed_matches(cell, ridges[named]):
                    bad.append(f"{where}: ridge column {cell} for {named} (lib: {ridges[named]:.4g})")
    assert not bad, "\n".join(bad)
    with_default = {where[:2] for where, named in seen if named == default}
    assert {"04", "06"} <= with_default, f"the default GPU's ridge appears in {sorted(with_default)} only"


# --------------------------------------------------------------------------- the scanner catches mistakes

def _scan_text(text: str, markdown: bool = False):
    qs = quantities()
    units = ([Unit("test", " ".join(text.split()))] if markdown else
             [Unit("test", line, (MODEL_RE.search(text).group(1).lower() if MODEL_RE.search(text) else None))
              for line in text.splitlines() if line.strip()])
    tables = [] if markdown else [("test", h, r, None) for h, r, _ in _tables(text.splitlines())]
    if not markdown:
        units = [u for k, u in enumerate(units) if not any(k in span for *_, span in _tables(text.splitlines()))]
    unclaimed = collect(units, tables, qs)
    return {q.name: wrong(q) for q in qs}, {q.name: len(q.found) for q in qs}, unclaimed


@pytest.mark.parametrize("text, markdown, quantity", [
    ("llama-2-7b in fp16\n  weights in memory   12.31 GiB", False, "weights in memory"),
    ("Llama-2-7B's 13.21 GB of fp16 weights in memory", True, "weights in memory"),
    ("llama-2-7b: weights read per step 12.55 GiB", False, "weights read per step"),
    ("For Llama-2-7B the KV cache equals the weights at 25,206 tokens.", True,
     "KV cache memory = weight memory (tokens)"),
    ("llama-2-7b: KV bytes read = weight bytes read at 25,705 cached tokens", False, "KV read = weights read (tokens)"),
    ("model       KV per token\n----------  ------------\nllama-2-7b    500.00 KiB", False, "KV bytes per token (fp16)"),
    ("model       weights read MB\n----------  ---------------\nllama-2-7b            13480", False,
     "weights read per step"),
])
def test_a_wrong_value_is_caught(text, markdown, quantity):
    wrong_values, found, _ = _scan_text(text, markdown)
    assert found[quantity] == 1 and len(wrong_values[quantity]) == 1, (found, wrong_values)


def test_right_values_pass_and_unlabelled_ones_are_reported():
    wrong_values, found, unclaimed = _scan_text(
        "Llama-2-7B's KV cache takes as much memory as its 12.55 GiB of weights at about 25,700 cached tokens; "
        "a decode step reads as many KV bytes as weight bytes at 25,205 tokens, with 13.21 GB of weights read per "
        "step. Llama-3-8B: 122,532 tokens.", markdown=True)
    assert not any(wrong_values.values()) and not unclaimed
    assert found == {"weights read per step": 1, "weights in memory": 1, "KV bytes per token (fp16)": 0,
                     "KV read = weights read (tokens)": 1, "KV cache memory = weight memory (tokens)": 1}
    _, _, unclaimed = _scan_text("llama-2-7b: 25,206 tokens", markdown=True)
    assert unclaimed == ["test: 25,206 in 'llama-2-7b: 25,206 tokens'"]
    assert printed_matches("25,700", 25_705.02) and not printed_matches("26,000", 25_705.02)
    assert printed_matches("13210", 13_214.69) and printed_matches("12.55", 12.5513) and not printed_matches("12.5", 12.31)

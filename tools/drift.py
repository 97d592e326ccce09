"""Do the two editions still say the same thing? ``python -m tools.drift zh [NN_name ...]`` lists every finding.

``tools.edition`` builds a Chinese notebook from the English one; this module checks what a build cannot:

- the committed Chinese notebook is what the build makes now (``differences``: cell ids, kinds, code, markdown),
  so a code change made in one edition and not the other is found;
- the outputs agree apart from their language (``output_differences``): per code cell the same kinds of output
  (stream, image, plotly, widget, ...) and the same numbers, in the same order, in its printed text;
- the Chinese prose is Chinese (``cjk_share`` at least ``MIN_CJK_SHARE`` in every cell, ``english_paragraphs``
  none);
- the glossary's key terms (``notebooks/GLOSSARY.md`` and its twin ``notebooks/zh/GLOSSARY.md``) are used: where an
  English cell says a key term, its translation says the glossary's Chinese term (``glossary_misses``).

Prose is what a reader reads as sentences: ``prose`` removes code blocks, ``inline code``, formulas, HTML tags and
comments, and links' targets (a link's text stays).
"""
from __future__ import annotations

import argparse
import ast
import re
from collections import Counter
import sys

import nbformat

from . import NOTEBOOKS
from . import edition

# A Chinese cell keeps Latin letters: identifiers outside code spans (GPT-2, Llama-2-7B, vLLM), units (KiB, GB/s),
# terms the glossary keeps (token, softmax, top-k) and the source's English phrases. Measured on the first 116
# translated cells of issue 14 (``cjk_share`` of each): the lowest was 0.36, a two-line cell of model names and
# sizes, the next 0.65, most above 0.8; the 109 cells still in English scored 0.00-0.04 (the source's example
# tokens 人工智能 are their only CJK). 0.2 sits well clear of both: a name-heavy translated cell passes, a cell
# left in English fails. A cell translated only in part is caught by ``english_paragraphs`` instead.
MIN_CJK_SHARE = 0.2
MIN_ENGLISH_WORDS = 8  # a paragraph of this many Latin words and no CJK character is an untranslated paragraph

CJK = re.compile(r"[\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff\U00020000-\U0002ffff]")
LATIN = re.compile(r"[A-Za-z]")
LATIN_WORD = re.compile(r"[A-Za-z][A-Za-z'’-]*")
NUMBER = re.compile(r"(?<![A-Za-z0-9_.])-?\d(?:[\d,]*\d)?(?:\.\d+)?(?:[eE][-+]?\d+)?")  # "3," is 3

_STRIP = [
    re.compile(r"^(```|~~~).*?^\1[ \t]*$", re.M | re.S),  # fenced code blocks
    re.compile(r"<!--.*?-->", re.S),                      # HTML comments
    re.compile(r"\$\$.+?\$\$", re.S),                      # display formulas
    re.compile(r"(?<![\\$])\$[^$\n]+?\$"),                 # inline formulas
    re.compile(r"``.+?``|`[^`\n]+`"),                      # inline code
    re.compile(r"<[^>\n]+>"),                              # HTML tags
    re.compile(r"https?://\S+"),                           # bare addresses
]
_LINK_TARGET = re.compile(r"(\]\s*)\([^)\n]*\)")             # [text](target) -> [text]


def prose(markdown: str) -> str:
    """The sentences of a markdown text: code blocks, inline code, formulas, HTML and links' targets removed."""
    text = _LINK_TARGET.sub(r"\1", markdown)
    for pattern in _STRIP:
        text = pattern.sub(" ", text)
    return text


def cjk_share(markdown: str) -> float | None:
    """CJK characters among the letters (CJK + Latin) of ``prose(markdown)``; None when it has no letters."""
    text = prose(markdown)
    cjk, latin = len(CJK.findall(text)), len(LATIN.findall(text))
    return cjk / (cjk + latin) if cjk + latin else None


def paragraphs(markdown: str) -> list[str]:
    """The blocks of a markdown text's prose: paragraphs, list items, table rows and headings, one string each."""
    blocks, current = [], []
    for line in prose(markdown).splitlines():
        starts = re.match(r"\s*([-*+]\s|\d+[.)]\s|\||#{1,6}\s|>)", line)
        if not line.strip() or starts:
            if current:
                blocks.append(" ".join(current))
            current = []
        if line.strip():
            if starts and line.lstrip().startswith("|"):
                blocks += [cell for cell in line.split("|") if cell.strip()]
            else:
                current.append(line[starts.end():].strip() if starts else line.strip())
    if current:
        blocks.append(" ".join(current))
    return blocks


def english_paragraphs(markdown: str, min_words: int = MIN_ENGLISH_WORDS) -> list[str]:
    """The blocks (``paragraphs``) with at least ``min_words`` Latin words and no CJK character: left in English."""
    return [b for b in paragraphs(markdown) if not CJK.search(b) and len(LATIN_WORD.findall(b)) >= min_words]


# --- the glossary ----------------------------------------------------------------------------------------------
def glossary_path(lang: str | None = None):
    return (NOTEBOOKS if lang is None else edition.edition_dir(lang)) / "GLOSSARY.md"


def glossary(lang: str | None = "zh") -> list[tuple[tuple[str, ...], tuple[str, ...]]]:
    """The key terms of the glossary: (English forms, ``lang`` forms) per row of the first table of
    ``notebooks/<lang>/GLOSSARY.md`` (``lang=None``: ``notebooks/GLOSSARY.md``; a later table holds terms that are
    not checked). Forms are separated by " / " in a column; a form's full-width parentheses hold another accepted
    form ("KV 缓存（键值缓存）" accepts both)."""
    path = glossary_path(lang)
    text = path.read_text(encoding="utf-8")
    rows, lines = [], text.splitlines()
    start = next((i for i, line in enumerate(lines) if line.startswith("|")), len(lines))
    table = lines[start:next((i for i in range(start, len(lines)) if not lines[i].startswith("|")), len(lines))]
    for line in table[2:]:  # after the header and its rule
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) < 2:
            raise ValueError(f"{path}: a glossary row needs an English and a translated term: {line!r}")
        english = tuple(f.strip().strip("*") for f in cells[0].split(" / ") if f.strip())
        native = []
        for form in cells[1].split(" / "):
            form = form.strip().strip("*")
            native += [f.strip() for f in re.split(r"[（）]", form) if f.strip()]
        if not english or not native:
            raise ValueError(f"{path}: a glossary row needs an English and a translated term: {line!r}")
        rows.append((english, tuple(native)))
    if not rows:
        raise ValueError(f"{path}: no glossary table found (a markdown table: | English | 中文 | ...)")
    return rows


def _english_pattern(form: str) -> re.Pattern:
    words = [re.escape(w) for w in re.split(r"[\s-]+", form)]
    tail = "" if form.isupper() else "(?:s|es)?"  # KV caches, tiles; acronyms as they are
    return re.compile(r"(?<![\w-])" + r"[\s-]+".join(words) + tail + r"(?![\w-])", re.I)


def _squeeze(text: str) -> str:
    return re.sub(r"\s+", "", text).lower()


NAMES = ("KV Cache Lab",)  # names that contain a term but are not the term: the course's own name stays as it is
# Quoted English is someone's words: the source's (which the Chinese edition quotes in the original Chinese, in
# the source's own terms: "读取KV Cache") or a program's log line ("GPU KV cache size: ..."), kept as written.
QUOTED = re.compile(r'"[^"\n]*"|“[^”]*”')


def glossary_misses(english: str, translated: str, terms) -> list[str]:
    """The key terms ``english`` uses whose glossary translation ``translated`` does not use (prose only; the
    names in ``NAMES`` and quoted English are not checked)."""
    en, native = prose(english), _squeeze(prose(translated))
    for name in NAMES:
        en = en.replace(name, " ")
    en = QUOTED.sub(" ", en)
    return [f"{forms[0]} -> {' / '.join(words)}" for forms, words in terms
            if any(_english_pattern(f).search(en) for f in forms)
            and not any(_squeeze(w) in native for w in words)]


# --- outputs ---------------------------------------------------------------------------------------------------
def output_kind(output) -> str:
    """stream, error, or the richest kind of a display: widget, plotly, image, html, markdown, text."""
    if output.get("output_type") in ("stream", "error"):
        return output["output_type"]
    data = output.get("data", {})
    for key, kind in (("application/vnd.jupyter.widget-view+json", "widget"),
                      ("application/vnd.plotly.v1+json", "plotly"), ("image/png", "image"),
                      ("image/svg+xml", "image"), ("text/html", "html"), ("text/markdown", "markdown")):
        if key in data:
            return kind
    return "text"


def output_numbers(output) -> list[str]:
    """The numbers in an output's printed text (stream text, or text/plain but a widget's, whose repr is
    truncated after a fixed number of characters whatever its language)."""
    if output.get("output_type") == "stream":
        text = output.get("text", "")
    elif output_kind(output) == "widget":
        return []
    else:
        text = output.get("data", {}).get("text/plain", "")
    text = "".join(text) if isinstance(text, list) else text
    return NUMBER.findall(text)


def merged(outputs) -> list:
    """The outputs with consecutive stream outputs of one stream joined: how a cell's printing is split into
    stream outputs depends on timing (when the kernel flushed), not on what it printed."""
    out = []
    for o in outputs:
        if o.get("output_type") == "stream" and out and out[-1].get("output_type") == "stream" \
                and out[-1].get("name") == o.get("name"):
            text = lambda x: "".join(x["text"]) if isinstance(x["text"], list) else x["text"]  # noqa: E731
            out[-1] = nbformat.from_dict({**out[-1], "text": text(out[-1]) + text(o)})
        else:
            out.append(o)
    return out


IGNORED = "# NBVAL_IGNORE_OUTPUT"  # a cell whose output nbval does not compare (times, bandwidths): kinds only


OWN_TEXT = "lib.notebook.language()"  # a cell that picks its text (a prompt, a window) by the edition's language


def own_text_cells(cells) -> set[str]:
    """The ids of the code cells whose numbers come from each edition's own text: a cell that calls
    ``lib.notebook.language()``, and every later cell that reads a name such a cell (or one after it) assigned
    (02's player run on the edition's prompt, then the live player built from it)."""
    tainted, out = set(), set()
    for c in cells:
        try:
            tree = ast.parse(c.source)
        except SyntaxError:  # a cell with IPython magic: not parsed, not followed
            continue
        reads = {n.id for n in ast.walk(tree) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load)}
        if OWN_TEXT in c.source or reads & tainted:
            out.add(c.id)
            tainted |= {n.id for n in ast.walk(tree) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store)}
    return out


def output_differences(english, translated, name: str = "") -> list[str]:
    """Where the outputs of two editions of a notebook differ in more than their language: per code cell, the
    kinds of the outputs (``merged`` streams) and the sequence of numbers printed (not for a cell marked
    ``# NBVAL_IGNORE_OUTPUT``: its numbers are measurements; nor for one of ``own_text_cells``: each edition shows
    the model its own language there)."""
    en = [c for c in english.cells if c.cell_type == "code"]
    tr = [c for c in translated.cells if c.cell_type == "code"]
    if len(en) != len(tr):
        return [f"{name}: {len(en)} code cells in English, {len(tr)} in the translation"]
    own = own_text_cells(en)
    found = []
    for i, (a, b) in enumerate(zip(en, tr), 1):
        outs = merged(a.outputs), merged(b.outputs)
        kinds = [output_kind(o) for o in outs[0]], [output_kind(o) for o in outs[1]]
        if kinds[0] != kinds[1]:
            found.append(f"{name}: code cell {i} ({a.id}): outputs {kinds[0]} in English, {kinds[1]} translated")
            continue
        if a.source.lstrip().startswith(IGNORED) or a.id in own:
            continue
        # the same numbers, each as often: a translated sentence may put them in another order
        # ("7 of 131 tokens" -> "131 个 token 中的 7 个"), but never print another number
        nums = (Counter(n for o in outs[0] for n in output_numbers(o)),
                Counter(n for o in outs[1] for n in output_numbers(o)))
        if nums[0] != nums[1]:
            only_en, only_tr = sorted((nums[0] - nums[1]).elements()), sorted((nums[1] - nums[0]).elements())
            found.append(f"{name}: code cell {i} ({a.id}): the numbers printed differ: only in English "
                         f"{only_en[:5]}, only translated {only_tr[:5]}")
    return found


def differences(lang: str, name: str) -> list[str]:
    """Where the committed ``notebooks/<lang>/<name>.ipynb`` is not what ``edition.build`` makes from the
    English notebook and the translations now (cells, code, markdown; outputs are ``output_differences``'s)."""
    path = edition.edition_dir(lang) / f"{name}.ipynb"
    if not path.is_file():
        return [f"{name}: {path} is missing: python -m tools.edition build {lang} {name}, then run it"]
    want, have = edition.built(lang, name), nbformat.read(path, as_version=4)
    shape = [(c.id, c.cell_type) for c in want.cells], [(c.id, c.cell_type) for c in have.cells]
    if shape[0] != shape[1]:
        return [f"{name}: its cells (ids, kinds) are not the English notebook's: rebuild it"]
    return [f"{name}: {c.cell_type} cell {c.id} differs from what the build makes (" +
            ("the code changed in one edition only" if c.cell_type == "code" else "edit the translation file") + ")"
            for c, h in zip(want.cells, have.cells) if c.source != h.source]


def findings(lang: str, name: str) -> list[str]:
    """Everything this module checks, for one notebook of the ``lang`` edition."""
    found = edition.problems(lang, name)
    if found:
        return found
    found = differences(lang, name)
    english = nbformat.read(NOTEBOOKS / f"{name}.ipynb", as_version=4)
    path = edition.edition_dir(lang) / f"{name}.ipynb"
    if path.is_file():
        found += output_differences(english, nbformat.read(path, as_version=4), name)
    terms = glossary(lang)
    tr = edition.read_translations(lang, name)
    for cell in english.cells:
        if cell.cell_type != "markdown":
            continue
        text = tr[cell.id][1]
        share = cjk_share(text)
        if share is not None and share < MIN_CJK_SHARE:
            found.append(f"{name}: cell {cell.id} is {share:.0%} CJK in its prose (at least {MIN_CJK_SHARE:.0%})")
        found += [f"{name}: cell {cell.id} has an English paragraph: {p[:80]!r}" for p in english_paragraphs(text)]
        found += [f"{name}: cell {cell.id} does not use the glossary's term: {m}"
                  for m in glossary_misses(cell.source, text, terms)]
    return found


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tools.drift", description=__doc__.splitlines()[0])
    parser.add_argument("lang", choices=edition.EDITIONS)
    parser.add_argument("names", nargs="*", help="notebooks (default: every one that has a translation file)")
    args = parser.parse_args(argv)
    names = args.names or edition.translated_names(args.lang)
    found = [f for n in names for f in findings(args.lang, n)]
    print("\n".join(found) or f"{len(names)} notebook(s): the {args.lang} edition agrees with the English one")
    return 1 if found else 0


if __name__ == "__main__":
    sys.exit(main())

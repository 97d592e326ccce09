"""The Chinese edition (``notebooks/zh/``), built from the English notebooks so that the two cannot drift.

One source, two editions: a Chinese notebook is *made* from its English twin by this module, never edited by
hand. Its code cells are the English code cells, unchanged except for the one declared line that picks the
language (``lib.notebook.setup(...)`` gains ``lang="zh"``); its markdown cells come from a translation file,
``notebooks/zh/src/NN_name.md``, one block per English markdown cell::

    <!-- cell 8b1f0c2e | en 5d41402a -->
    ## 自回归生成
    ...

``cell`` is the English cell's id, ``en`` the first 8 hex digits of the SHA-1 of the English text the
translation was made from. When an English markdown cell changes, its hash no longer matches and the build (and
``tests/test_edition.py``) names the stale translation; a missing translation is an error too.

A code cell that prints, draws or shows words has a block of its own in the same file, the whole cell as the
Chinese edition has it: the English code with its string literals (prints, f-strings, titles, labels, Markdown
tables, ``reveal``'s ``why``/``what``) written in Chinese::

    <!-- code 5c0e7d21 | en 9a3f11b0 -->
    ```python
    print(f"缓存里有 {cache.seq_len} 个位置")
    ```

``en`` is the English code cell's hash, so an edited English cell names its stale block. The code cannot drift:
the build refuses a block whose syntax tree differs from the English cell's anywhere but in string literals (every
string constant, and every literal part of an f-string, is compared as a placeholder; names, calls, numbers, the
expressions inside an f-string's braces and their format specs must be the same; comments are free) and names
the cell and the first statement that differs. A cell with nothing to translate has no block and is copied as it
is. Either way the one declared line then picks the language. So the Chinese edition's code says its own words,
nothing translates a ``print`` behind a learner's back. The outputs come from running the built notebook
(``python -m tools.runner --edition zh NN_name``), so they are that code's outputs.

    python -m tools.edition skeleton zh 03_kv_cache   # add a block for every untranslated cell (English text)
    python -m tools.edition build zh [NN_name ...]    # write notebooks/zh/NN_name.ipynb (not yet run)
    python -m tools.edition check zh                  # missing or stale translations (prose and code), as a list
"""
from __future__ import annotations

import argparse
import ast
import hashlib
import re
import sys
from pathlib import Path

import nbformat

from lib.i18n import LANGUAGES

from . import NOTEBOOKS, notebook_paths

# One edition per language the widgets speak (lib's list): English in notebooks/, each other in notebooks/<lang>/.
ALL_EDITIONS = LANGUAGES
EDITIONS = tuple(lang for lang in ALL_EDITIONS if lang != "en")  # built from the English notebooks
SETUP_CALL = re.compile(r"(notebook\.setup\()(\s*\))?")  # the declared line: lib.notebook.setup(...)
HEADER = re.compile(r"^<!-- (?P<kind>cell|code) (?P<id>[0-9A-Za-z_-]+) \| en (?P<hash>[0-9a-f]{8}) -->[ \t]*$", re.M)
FENCE = re.compile(r"\A(?P<fence>`{3,})python[ \t]*\n(?P<code>.*?)\n(?P=fence)[ \t]*\Z", re.S)  # a code block's body


def edition_dir(lang: str) -> Path:
    if lang not in EDITIONS:
        raise ValueError(f"unknown edition {lang!r}; the editions are: {', '.join(EDITIONS)} (English is notebooks/)")
    return NOTEBOOKS / lang


def source_path(lang: str, name: str) -> Path:
    return edition_dir(lang) / "src" / f"{name}.md"


def english_hash(text: str) -> str:
    """The first 8 hex digits of the SHA-1 of an English cell's text (markdown or code)."""
    return hashlib.sha1(text.encode("utf-8")).hexdigest()[:8]


def declared_line(source: str, lang: str) -> str:
    """The English code cell ``source`` as the ``lang`` edition has it: ``notebook.setup(`` gains ``lang=...``."""
    def add(m):
        return f'{m.group(1)}lang="{lang}")' if m.group(2) else f'{m.group(1)}lang="{lang}", '
    return SETUP_CALL.sub(add, source, count=1)


def _blocks(lang: str, name: str) -> dict[str, tuple[str, str, str]]:
    """cell id -> (kind: "cell" or "code", hash of the English text it translates, its body) from the file."""
    path = source_path(lang, name)
    if not path.is_file():
        return {}
    text = path.read_text(encoding="utf-8")
    heads = list(HEADER.finditer(text))
    out = {}
    for i, m in enumerate(heads):
        end = heads[i + 1].start() if i + 1 < len(heads) else len(text)
        body = text[m.end():end].strip("\n")
        if m["id"] in out:
            raise ValueError(f"{path}: cell {m['id']} is translated twice")
        if m["kind"] == "code":
            fenced = FENCE.match(body)
            if not fenced:
                raise ValueError(f"{path}: the code block of cell {m['id']} is not one fenced ```python block")
            body = fenced["code"]
        out[m["id"]] = (m["kind"], m["hash"], body)
    return out


def read_translations(lang: str, name: str) -> dict[str, tuple[str, str]]:
    """cell id -> (hash of the English text it translates, the translation) from the translation file: the
    markdown cells' blocks (``<!-- cell ... -->``)."""
    return {i: (h, body) for i, (kind, h, body) in _blocks(lang, name).items() if kind == "cell"}


def read_code(lang: str, name: str) -> dict[str, tuple[str, str]]:
    """cell id -> (hash of the English code it translates, the code in ``lang``): the code blocks
    (``<!-- code ... -->``) of the translation file."""
    return {i: (h, body) for i, (kind, h, body) in _blocks(lang, name).items() if kind == "code"}


class _Literals(ast.NodeTransformer):
    """A syntax tree with every string literal replaced by one placeholder: a string constant, and an f-string
    as the sorted dumps of its ``{...}`` parts (their expressions with their own literals placeholdered, their
    format specs exact), so a translation may reorder the parts of an f-string but not change them."""

    def visit_Constant(self, node):
        return ast.Constant("<str>") if isinstance(node.value, str) else node

    def visit_JoinedStr(self, node):
        parts = sorted(ast.dump(ast.FormattedValue(self.visit(v.value), v.conversion, v.format_spec))
                       for v in node.values if isinstance(v, ast.FormattedValue))
        return ast.Constant("<str>" + "".join(parts)) if parts else ast.Constant("<str>")


def _shape(source: str) -> list[str]:
    """The statements of ``source`` as ``_Literals`` sees them (one dump per top-level statement)."""
    return [ast.dump(_Literals().visit(stmt)) for stmt in ast.parse(source).body]


def code_drift(english: str, translated: str) -> str | None:
    """Where ``translated`` is more than ``english`` with other string literals: None when the two differ in
    string literals only, else the first statement that differs (line and text in both), or the syntax error."""
    try:
        en, tr = _shape(english), _shape(translated)
    except SyntaxError as e:
        return f"it does not parse: {e.msg} (line {e.lineno})"
    en_lines = [s.lineno for s in ast.parse(english).body]
    tr_lines = [s.lineno for s in ast.parse(translated).body]
    for i, (a, b) in enumerate(zip(en, tr)):
        if a != b:
            return (f"statement {i + 1} differs in more than its strings: English line {en_lines[i]} "
                    f"{english.splitlines()[en_lines[i] - 1].strip()!r}, translated line {tr_lines[i]} "
                    f"{translated.splitlines()[tr_lines[i] - 1].strip()!r}")
    if len(en) != len(tr):
        return f"it has {len(tr)} statements, the English cell {len(en)}"
    return None


def problems(lang: str, name: str) -> list[str]:
    """What keeps ``name`` from being built in ``lang``: untranslated, stale or unknown cells, and code blocks
    that are stale or change more than string literals."""
    nb = nbformat.read(NOTEBOOKS / f"{name}.ipynb", as_version=4)
    tr, code = read_translations(lang, name), read_code(lang, name)
    found, ids = [], set()
    for cell in nb.cells:
        ids.add(cell.id)
        if cell.cell_type == "code":
            found += _code_problems(name, cell, code)
        if cell.cell_type != "markdown":
            continue
        if cell.id not in tr:
            found.append(f"{name}: markdown cell {cell.id} has no translation")
        elif tr[cell.id][0] != english_hash(cell.source):
            found.append(f"{name}: the translation of cell {cell.id} is stale (the English text changed; "
                         f"translated from {tr[cell.id][0]}, now {english_hash(cell.source)})")
        elif not tr[cell.id][1].strip():
            found.append(f"{name}: the translation of cell {cell.id} is empty")
    found += [f"{name}: the translation file has cell {i}, which the English notebook no longer has"
              for i in sorted((set(tr) | set(code)) - ids)]
    kinds = {c.id: c.cell_type for c in nb.cells}
    found += [f"{name}: the translation file has a {what} block for cell {i}, which is a {kinds[i]} cell"
              for blocks, what, want in ((tr, "markdown", "markdown"), (code, "code", "code"))
              for i in sorted(blocks) if i in kinds and kinds[i] != want]
    return found


def _code_problems(name: str, cell, code: dict) -> list[str]:
    """A code block that is stale (the English code changed) or changes more than string literals."""
    if cell.id not in code:
        return []
    made_from, translated = code[cell.id]
    if made_from != english_hash(cell.source):
        return [f"{name}: the code block of cell {cell.id} is stale (the English code changed; translated from "
                f"{made_from}, now {english_hash(cell.source)})"]
    drift = code_drift(cell.source, translated)
    return [f"{name}: the code block of cell {cell.id} changes more than string literals: {drift}"] if drift else []


def built(lang: str, name: str):
    """The ``lang`` edition of ``name`` as ``build`` writes it (an nbformat notebook, outputs cleared), in memory:
    what the committed ``notebooks/<lang>/<name>.ipynb`` must equal apart from its outputs. Raises ValueError
    listing every missing or stale translation."""
    found = problems(lang, name)
    if found:
        raise ValueError(f"cannot build the {lang} edition of {name}:\n  " + "\n  ".join(found) +
                         f"\nadd them with: python -m tools.edition skeleton {lang} {name}")
    nb = nbformat.read(NOTEBOOKS / f"{name}.ipynb", as_version=4)
    tr, code = read_translations(lang, name), read_code(lang, name)
    declared = 0
    for cell in nb.cells:
        if cell.cell_type == "markdown":
            cell.source = tr[cell.id][1]
        elif cell.cell_type == "code":
            source = code[cell.id][1] if cell.id in code else cell.source
            new = declared_line(source, lang)
            declared += new != source
            cell.source, cell.outputs, cell.execution_count = new, [], None
    if declared != 1:
        raise ValueError(f"{name}: expected exactly one `lib.notebook.setup(...)` line to declare the language, "
                         f"found {declared}")
    nb.metadata.pop("widgets", None)
    return nb


def build(lang: str, name: str) -> Path:
    """Write ``notebooks/<lang>/<name>.ipynb`` from the English notebook and its translations (outputs cleared;
    run it with the runner). Raises ValueError listing every missing or stale translation."""
    nb = built(lang, name)
    out = edition_dir(lang) / f"{name}.ipynb"
    out.parent.mkdir(parents=True, exist_ok=True)
    nbformat.write(nb, out)
    return out


def refresh_markdown(lang: str, name: str) -> bool:
    """Put the translations' current text into the committed ``notebooks/<lang>/<name>.ipynb``'s markdown cells,
    keeping its code and outputs (for a change that touches prose only, such as the time estimates). Returns
    whether anything changed; a notebook whose cells are not the English one's is left for ``build``."""
    out = edition_dir(lang) / f"{name}.ipynb"
    if not out.is_file():
        return False
    want, have = built(lang, name), nbformat.read(out, as_version=4)
    if [(c.id, c.cell_type) for c in want.cells] != [(c.id, c.cell_type) for c in have.cells]:
        return False
    changed = False
    for w, h in zip(want.cells, have.cells):
        if h.cell_type == "markdown" and w.source != h.source:
            h.source, changed = w.source, True
    if changed:
        nbformat.write(have, out)
    return changed


def skeleton(lang: str, name: str) -> Path:
    """Append to the translation file a block, holding the English text to be replaced, for every markdown cell
    that has no translation yet (existing blocks are kept as they are)."""
    nb = nbformat.read(NOTEBOOKS / f"{name}.ipynb", as_version=4)
    path = source_path(lang, name)
    tr = read_translations(lang, name)
    blocks = [f"<!-- cell {c.id} | en {english_hash(c.source)} -->\n{c.source}\n"
              for c in nb.cells if c.cell_type == "markdown" and c.id not in tr]
    path.parent.mkdir(parents=True, exist_ok=True)
    old = path.read_text(encoding="utf-8") if path.is_file() else ""
    path.write_text(old + ("\n" if old and not old.endswith("\n\n") else "") + "\n".join(blocks), encoding="utf-8")
    return path


def translated_names(lang: str) -> list[str]:
    """The notebooks that have a translation file in ``lang``."""
    return sorted(p.stem for p in (edition_dir(lang) / "src").glob("[0-9][0-9]_*.md"))


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tools.edition", description=__doc__.splitlines()[0])
    parser.add_argument("action", choices=["build", "skeleton", "check"])
    parser.add_argument("lang", choices=EDITIONS)
    parser.add_argument("names", nargs="*", help="notebooks (default: every one that has a translation file)")
    args = parser.parse_args(argv)
    english = {p.stem for p in notebook_paths()}
    names = args.names or (sorted(english) if args.action == "skeleton" else translated_names(args.lang))
    unknown = sorted(set(names) - english)
    if unknown:
        parser.error(f"unknown notebook(s) {unknown}; the notebooks are: {', '.join(sorted(english))}")
    if args.action == "check":
        found = [p for n in names for p in problems(args.lang, n)]
        print("\n".join(found) or f"{len(names)} notebook(s): every markdown cell translated and current, every "
                                    "code block current and the English code apart from its strings")
        return 1 if found else 0
    for n in names:
        print((build if args.action == "build" else skeleton)(args.lang, n))
    return 0


if __name__ == "__main__":
    sys.exit(main())

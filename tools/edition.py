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
``tests/test_edition.py``) names the stale translation; a missing translation is an error too. The outputs come
from running the built notebook (``python -m tools.runner notebooks/zh/NN_name.ipynb``), so they are the
same code's outputs in the notebook's language.

    python -m tools.edition skeleton zh 03_kv_cache   # add a block for every untranslated cell (English text)
    python -m tools.edition build zh [NN_name ...]    # write notebooks/zh/NN_name.ipynb (not yet run)
    python -m tools.edition check zh                  # missing or stale translations, as a list
"""
from __future__ import annotations

import argparse
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
HEADER = re.compile(r"^<!-- cell (?P<id>[0-9A-Za-z_-]+) \| en (?P<hash>[0-9a-f]{8}) -->[ \t]*$", re.M)


def edition_dir(lang: str) -> Path:
    if lang not in EDITIONS:
        raise ValueError(f"unknown edition {lang!r}; the editions are: {', '.join(EDITIONS)} (English is notebooks/)")
    return NOTEBOOKS / lang


def source_path(lang: str, name: str) -> Path:
    return edition_dir(lang) / "src" / f"{name}.md"


def english_hash(text: str) -> str:
    """The first 8 hex digits of the SHA-1 of an English markdown cell's text."""
    return hashlib.sha1(text.encode("utf-8")).hexdigest()[:8]


def declared_line(source: str, lang: str) -> str:
    """The English code cell ``source`` as the ``lang`` edition has it: ``notebook.setup(`` gains ``lang=...``."""
    def add(m):
        return f'{m.group(1)}lang="{lang}")' if m.group(2) else f'{m.group(1)}lang="{lang}", '
    return SETUP_CALL.sub(add, source, count=1)


def read_translations(lang: str, name: str) -> dict[str, tuple[str, str]]:
    """cell id -> (hash of the English text it translates, the translation) from the translation file."""
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
        out[m["id"]] = (m["hash"], body)
    return out


def problems(lang: str, name: str) -> list[str]:
    """What keeps ``name`` from being built in ``lang``: untranslated, stale or unknown cells."""
    nb = nbformat.read(NOTEBOOKS / f"{name}.ipynb", as_version=4)
    tr = read_translations(lang, name)
    found, ids = [], set()
    for cell in nb.cells:
        ids.add(cell.id)
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
              for i in sorted(set(tr) - ids)]
    return found


def built(lang: str, name: str):
    """The ``lang`` edition of ``name`` as ``build`` writes it (an nbformat notebook, outputs cleared), in memory:
    what the committed ``notebooks/<lang>/<name>.ipynb`` must equal apart from its outputs. Raises ValueError
    listing every missing or stale translation."""
    found = problems(lang, name)
    if found:
        raise ValueError(f"cannot build the {lang} edition of {name}:\n  " + "\n  ".join(found) +
                         f"\nadd them with: python -m tools.edition skeleton {lang} {name}")
    nb = nbformat.read(NOTEBOOKS / f"{name}.ipynb", as_version=4)
    tr = read_translations(lang, name)
    declared = 0
    for cell in nb.cells:
        if cell.cell_type == "markdown":
            cell.source = tr[cell.id][1]
        elif cell.cell_type == "code":
            new = declared_line(cell.source, lang)
            declared += new != cell.source
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
        print("\n".join(found) or f"{len(names)} notebook(s): every markdown cell translated and current")
        return 1 if found else 0
    for n in names:
        print((build if args.action == "build" else skeleton)(args.lang, n))
    return 0


if __name__ == "__main__":
    sys.exit(main())

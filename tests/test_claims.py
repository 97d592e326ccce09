"""CLAIMS.md and its Chinese twin CLAIMS.zh.md: the claims of the source text (C1-C15) and where the course teaches
each. The two files list the same claims in the same order, each pointing at the same notebooks; every notebook
they name exists, and every section they quote by its heading is a heading of that notebook (in the English
notebook for CLAIMS.md, in the Chinese translation file for CLAIMS.zh.md), so a renamed section or a renumbered
notebook is found here instead of by a reader."""
import re

import nbformat
import pytest

from tools import NOTEBOOKS, ROOT, edition

FILES = {"en": ROOT / "CLAIMS.md", "zh": ROOT / "CLAIMS.zh.md"}
ON_DISK = {p.stem[:2]: p.stem for p in NOTEBOOKS.glob("[0-9][0-9]_*.ipynb")}
# A notebook is named by its two digits (optionally with its name: 13_vllm_bridge), never inside a longer number,
# a version (2.1), a claim id (C12) or a section (§3).
NOTEBOOK_REF = re.compile(r"(?<![\w.§])(\d\d)(?:_[a-z_]+)?(?![\d.%])")
QUOTED = re.compile(r"\"([^\"]+)\"|“([^”]+)”")


def rows(lang: str) -> list[list[str]]:
    """The rows of a file's claim table: [id, claim, where, what the course adds]."""
    text = FILES[lang].read_text(encoding="utf-8")
    return [[c.strip() for c in line.strip().strip("|").split("|")]
            for line in text.splitlines() if re.match(r"\| C\d+ \|", line)]


def section_rows(lang: str) -> list[list[str]]:
    """The rows of the second table: the source's sections 2.1-2.5 and the notebooks that teach them."""
    text = FILES[lang].read_text(encoding="utf-8")
    return [[c.strip() for c in line.strip().strip("|").split("|")]
            for line in text.splitlines() if re.match(r"\| 2\.\d", line)]


def notebooks_in(text: str) -> list[str]:
    """The notebooks a column names, outside its quotations (a heading such as "A 7B model is about 14 GB")."""
    return sorted(set(NOTEBOOK_REF.findall(QUOTED.sub(" ", text))))


def quoted_headings(where: str) -> list[tuple[str, str]]:
    """(notebook digits, quoted heading) in the order the "where" column names them: a quotation belongs to the
    notebook named last before it."""
    out, current = [], None
    for m in re.finditer(NOTEBOOK_REF.pattern + "|" + QUOTED.pattern, where):
        if m.group(1):
            current = m.group(1)
        else:
            out.append((current, m.group(2) or m.group(3)))
    return out


def headings(name: str, lang: str) -> list[str]:
    if lang == "en":
        nb = nbformat.read(NOTEBOOKS / f"{name}.ipynb", as_version=4)
        text = "\n".join(c.source for c in nb.cells if c.cell_type == "markdown")
    else:
        text = "\n".join(body for _, body in edition.read_translations("zh", name).values())
    return [line.lstrip("#").strip() for line in text.splitlines() if line.startswith("#")]


def test_both_files_list_the_same_claims_with_the_same_notebooks():
    en, zh = rows("en"), rows("zh")
    assert [r[0] for r in en] == [f"C{i}" for i in range(1, 16)], [r[0] for r in en]
    assert [r[0] for r in zh] == [r[0] for r in en]
    assert all(len(r) == 4 for r in en + zh), "each claim row has four columns: id, claim, where, what is added"
    for e, z in zip(en, zh):
        assert notebooks_in(e[2]) == notebooks_in(z[2]), f"{e[0]}: CLAIMS.md names {notebooks_in(e[2])}, " \
                                                         f"CLAIMS.zh.md {notebooks_in(z[2])}"
    sections = section_rows("en"), section_rows("zh")
    assert [r[1] for r in sections[0]] == [r[1] for r in sections[1]] and len(sections[0]) == 5
    for e, z in zip(*sections):
        assert notebooks_in(e[2]) == notebooks_in(z[2]), (e, z)
    text = {lang: path.read_text(encoding="utf-8") for lang, path in FILES.items()}
    assert "CLAIMS.zh.md" in text["en"] and "CLAIMS.md" in text["zh"]  # each links its twin


@pytest.mark.parametrize("lang", ["en", "zh"])
def test_every_notebook_named_exists_and_every_claim_is_taught_somewhere(lang):
    for r in rows(lang) + section_rows(lang):
        named = notebooks_in(r[2])
        assert named, f"{r[0]}: no notebook named in {r[2]!r}"
        missing = [n for n in named if n not in ON_DISK]
        assert not missing, f"{FILES[lang].name}, {r[0]}: no notebook {missing} in notebooks/"


@pytest.mark.parametrize("lang", ["en", "zh"])
def test_every_quoted_section_is_a_heading_of_its_notebook(lang):
    stale = []
    for r in rows(lang):
        for digits, title in quoted_headings(r[2]):
            assert digits, f"{r[0]}: the quotation {title!r} comes before any notebook number"
            found = headings(ON_DISK[digits], lang)
            if not any(title.casefold() in h.casefold() for h in found):
                stale.append(f"{r[0]}: {digits} has no heading with {title!r}")
    assert not stale, f"{FILES[lang].name} quotes sections its notebooks do not have:\n" + "\n".join(stale)


def test_the_readers_find_both_files():
    readme = {name: (ROOT / name).read_text(encoding="utf-8") for name in ("README.md", "README.zh.md")}
    assert "CLAIMS.md" in readme["README.md"] and "CLAIMS.zh.md" in readme["README.zh.md"]
    zh_map = edition.read_translations("zh", "00_index")
    assert any("CLAIMS.zh.md" in body for _, body in zh_map.values())

"""README's promises, kept true. README.md is the learner's page: what the course is, `make lab` and the map, the
working copy, what you need, the notebook table (exactly the notebooks in notebooks/), the install lines; the rest
lives in CONTRIBUTING.md and docs/ (one page per topic, each linked and existing). README.zh.md says the same in
Chinese. Figures that can go stale are checked against what they describe: "about N lines" of the core
(docs/library.md) is the core's line count to within 10%. (Test counts and run times are not written anywhere:
pytest and the bars of the long commands print them.)"""
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
README = (ROOT / "README.md").read_text(encoding="utf-8")
ZH = (ROOT / "README.zh.md").read_text(encoding="utf-8")
LIBRARY = (ROOT / "docs" / "library.md").read_text(encoding="utf-8")
ON_DISK = sorted(p.name for p in (ROOT / "notebooks").glob("[0-9][0-9]_*.ipynb"))
MAX_README_LINES = 120  # the learner's page; everything for contributors is one link away


def test_the_notebook_table_lists_every_notebook_and_no_other():
    listed = re.findall(r"^\| `(\d\d_\w+\.ipynb)` \|", README, re.M)
    assert listed == ON_DISK, f"README's table: {listed}; notebooks/: {ON_DISK}"


def test_the_readme_is_for_learners_and_links_the_rest():
    lines = len(README.splitlines())
    assert lines <= MAX_README_LINES, f"README.md has {lines} lines: move what is for contributors to docs/"
    start = README.split("\n## ")[1]
    assert start.startswith("Start") and "```bash\nmake lab\n```" in start and "make lab-zh" in start
    assert "00_index.ipynb" in start and "workspace/" in start and "make fresh NB=" in start
    assert "What you need" in start
    for text, name in ((README, "README.md"), (ZH, "README.zh.md"),
                       ((ROOT / "CONTRIBUTING.md").read_text(encoding="utf-8"), "CONTRIBUTING.md")):
        for link in re.findall(r"\]\(((?:docs|deploy)/[^)#]+)\)", text):
            assert (ROOT / link).is_file(), f"{name} links {link}, which does not exist"
    for page in ("library", "testing", "ci", "speed", "gpu", "classroom", "site"):
        assert f"(docs/{page}.md)" in README or f"docs/{page}.md" in README, f"README does not link docs/{page}.md"


def test_the_core_line_count_is_about_right():
    m = re.search(r"The core reads in one sitting, in this order \(about ([\d,]+) lines together\):\n\n"
                  r"(.*?)\n\n", LIBRARY, re.S)
    assert m, "docs/library.md's sentence 'The core reads in one sitting ... (about N lines together)' and its table"
    said = int(m.group(1).replace(",", ""))
    modules = re.findall(r"^\| `(lib/\w+\.py)` \|", m.group(2), re.M)
    assert len(modules) >= 5, modules
    lines = sum(len((ROOT / name).read_text(encoding="utf-8").splitlines()) for name in modules)
    assert abs(lines - said) <= 0.1 * lines, f"docs/library.md says about {said:,} lines; " \
                                             f"{', '.join(modules)} have {lines:,}"


def test_the_chinese_readme_has_the_same_commands_and_notebooks():
    """README.zh.md, linked from the top of README.md: the same commands (and the Chinese map's), the working copy,
    the same install lines, a row for every notebook."""
    assert "中文版：[README.zh.md](README.zh.md)" in README.split("\n## ", 1)[0]
    assert len(ZH.splitlines()) <= MAX_README_LINES, f"README.zh.md has {len(ZH.splitlines())} lines"
    for command in ("make lab\n", "make lab EDITION=zh", "make lab-zh", "make fresh NB=", "workspace/", "make test"):
        assert command in ZH, command
    english = re.search(r"<!-- install:begin -->\n(.*?)<!-- install:end -->", README, re.S)
    assert english and english.group(1) in ZH, "README.zh.md lacks README.md's install lines as written"
    listed = re.findall(r"^\| `(\d\d_\w+\.ipynb)` \|", ZH, re.M)
    assert listed == ON_DISK, f"README.zh.md's table: {listed}; notebooks/: {ON_DISK}"
    makefile = (ROOT / "Makefile").read_text(encoding="utf-8")
    assert re.search(r"^lab-zh:", makefile, re.M) and re.search(r"^fresh:", makefile, re.M)
    assert "EDITION ?= en" in makefile
    assert not re.search(r"\$\(LANG\)|^LANG\s*[?:]?=", makefile, re.M), "LANG is the locale: the edition is EDITION"

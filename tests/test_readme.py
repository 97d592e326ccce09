"""README's figures that can go stale, checked against what they describe: the notebook table lists exactly the
notebooks in notebooks/, and "about N lines" of the core is the core's line count to within 10%. (Test counts
and run times are not written in the README: pytest and the bars of the long commands print them.)"""
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
README = (ROOT / "README.md").read_text(encoding="utf-8")


def test_the_notebook_table_lists_every_notebook_and_no_other():
    listed = re.findall(r"^\| `(\d\d_\w+\.ipynb)` \|", README, re.M)
    on_disk = sorted(p.name for p in (ROOT / "notebooks").glob("[0-9][0-9]_*.ipynb"))
    assert listed == on_disk, f"README's table: {listed}; notebooks/: {on_disk}"


def test_the_core_line_count_is_about_right():
    m = re.search(r"The core reads in one sitting, in this order \(about ([\d,]+) lines together\):\n\n"
                  r"(.*?)\n\n", README, re.S)
    assert m, "README's sentence 'The core reads in one sitting ... (about N lines together)' and its table"
    said = int(m.group(1).replace(",", ""))
    modules = re.findall(r"^\| `(lib/\w+\.py)` \|", m.group(2), re.M)
    assert len(modules) >= 5, modules
    lines = sum(len((ROOT / name).read_text(encoding="utf-8").splitlines()) for name in modules)
    assert abs(lines - said) <= 0.1 * lines, f"README says about {said:,} lines; {', '.join(modules)} have {lines:,}"


def test_the_chinese_readme_has_the_same_commands_and_notebooks():
    """README.zh.md, linked from the top of README.md: the same two commands (and the Chinese map's), the same
    install and test lines, a row for every notebook."""
    zh = (ROOT / "README.zh.md").read_text(encoding="utf-8")
    assert "中文版：[README.zh.md](README.zh.md)" in README.split("\n## ", 1)[0]
    for command in ("make lab\n", "make lab EDITION=zh", "make lab-zh", "make test\n"):
        assert f"```bash\n{command}" in zh or command in zh, command
    for block in ("install", "tests"):
        pattern = rf"<!-- {block}:begin -->\n(.*?)<!-- {block}:end -->"
        english = re.search(pattern, README, re.S)
        assert english and english.group(1) in zh, f"README.zh.md lacks README.md's {block} lines as written"
    listed = re.findall(r"^\| `(\d\d_\w+\.ipynb)` \|", zh, re.M)
    on_disk = sorted(p.name for p in (ROOT / "notebooks").glob("[0-9][0-9]_*.ipynb"))
    assert listed == on_disk, f"README.zh.md's table: {listed}; notebooks/: {on_disk}"
    makefile = (ROOT / "Makefile").read_text(encoding="utf-8")
    assert re.search(r"^lab-zh:", makefile, re.M) and "EDITION ?= en" in makefile
    assert not re.search(r"\$\(LANG\)|^LANG\s*[?:]?=", makefile, re.M), "LANG is the locale: the edition is EDITION"

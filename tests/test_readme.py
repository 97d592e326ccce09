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

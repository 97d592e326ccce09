"""Every figure a notebook shows is checked for texts drawn over each other: lib.notebook.report_collisions, which
figure_png (the notebooks' PNG formatter) calls, and the root conftest.py, which lists at the end of an nbval run
what the kernels reported (the legibility test sees lib's figures only; a cell's own figure is checked here)."""
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import nbformat  # noqa: E402
import pytest  # noqa: E402

from lib import notebook  # noqa: E402
from lib.widgets import style  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]


def _clash():
    fig, ax = plt.subplots(figsize=(3, 2))
    ax.set_title("two labels")
    ax.text(0.5, 0.5, "x1 draft", ha="center")
    ax.text(0.5, 0.5, "target", ha="center")  # on top of the first
    return fig


def test_the_measure_finds_two_texts_on_one_spot_and_not_a_clean_figure():
    assert [(a, b) for a, b, _ in style.text_collisions(_clash())] == [("x1 draft", "target")]
    fig, ax = plt.subplots(figsize=(3, 2))
    ax.plot([0, 1], [0, 1], label="a line")
    ax.legend()
    ax.set_title("clean")
    assert style.text_collisions(fig) == []


def _filled(scale="linear"):
    """Curves across the whole panel, at its top, middle and bottom and rising through it: no corner is free."""
    fig, ax = plt.subplots(figsize=(4, 3))
    xs = list(range(1, 41))
    ax.plot(xs, [10.0] * 40, label="flat, high")
    ax.plot(xs, [1.0 + 9 * (x / 40) ** 2 for x in xs], label="rising")
    ax.plot(xs, [4.0] * 40, label="flat, lower middle")
    ax.plot(xs, [7.0] * 40, label="flat, upper middle")
    ax.plot(xs, [1.0] * 40, label="flat, low")
    ax.axvline(5, color="grey", ls=":")  # a reference across the panel: a key may cross it
    ax.set_yscale(scale)
    return fig, ax


def test_a_key_over_its_curves_is_found_and_placed_clear_of_them():
    fig, ax = _filled()
    ax.legend(loc="upper left")
    assert [c[:2] for c in style.legend_collisions(fig)] == [("flat, high", "flat, high"),
                                                             ("flat, high", "flat, upper middle")]
    fig, ax = _filled()
    before = ax.get_ylim()
    legend = style.place_legend(ax, loc="upper left")
    assert style.legend_collisions(fig) == [] and ax.get_ylim()[1] > before[1]  # room grown above the curves
    assert legend is ax.get_legend()
    fig, ax = _filled("log")
    style.place_legend(ax, loc="upper left")
    assert style.legend_collisions(fig) == []  # a log axis: a free place, or decades of room above the curves
    fig, ax = plt.subplots(figsize=(4, 3))
    ax.plot([0, 1], [0, 0.1], label="low")
    style.place_legend(ax, loc="upper left")  # free where asked: left as asked, the axis untouched
    assert ax.get_ylim()[1] < 0.2 and ax.get_legend()._loc == 2


def test_a_kernel_reports_only_where_the_environment_names_a_file(tmp_path, monkeypatch):
    report = tmp_path / "figures.jsonl"
    monkeypatch.delenv(notebook.FIGURE_CHECK, raising=False)
    assert notebook.report_collisions(_clash()) == [] and not report.exists()  # a learner's kernel: nothing
    monkeypatch.setenv(notebook.FIGURE_CHECK, str(report))
    notebook.figure_png(_clash())  # as the notebook's PNG formatter shows it
    row = json.loads(report.read_text().splitlines()[0])
    assert row["figure"] == "two labels" and [r[:2] for r in row["collisions"]] == [["x1 draft", "target"]]


def test_an_nbval_run_names_each_figure_with_texts_over_each_other(tmp_path):
    """One kernel, two figures: the one whose texts overlap is named at the end of the run and in
    figure-collisions.txt, the clean one is not (a report, not a failure: see the root conftest.py)."""
    def figure(title, y):
        return (f"fig, ax = plt.subplots(figsize=(3, 2))\nax.set_title({title!r})\n"
                f"ax.text(0.5, 0.5, 'one', ha='center')\nax.text(0.5, {y}, 'two', ha='center')\nplt.show()")
    nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(
        "import matplotlib.pyplot as plt\nfrom lib import notebook\nnotebook.setup(verbose=False)\n"
        + figure("a clean cell", 0.1) + "\n" + figure("a cell of mine", 0.5))])
    where = ROOT / ".cache" / "test-figure-check" / tmp_path.name  # under the repository: its conftest.py applies
    where.mkdir(parents=True, exist_ok=True)
    nbformat.write(nb, where / "figure.ipynb")
    try:  # --nbval-lax: the cell runs, its (absent) outputs are not compared; the figure check is the same
        out = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-p", "no:xdist",
                              "--nbval-lax", str(where / "figure.ipynb"), "--nbval-current-env"], cwd=ROOT,
                             capture_output=True, text=True, timeout=300,
                             env={**os.environ, "PYTHONPATH": str(ROOT), "KVLAB_ARTIFACTS": str(tmp_path)})
    finally:
        shutil.rmtree(where)
    assert out.returncode == 0, out.stdout[-2000:]
    report = (tmp_path / "figure-collisions.txt").read_text()
    for text in (out.stdout, report):
        assert "1 figure(s) shown by the notebooks draw texts over each other" in text
        assert "'a cell of mine'" in text and "'one', 'two'" in text and "a clean cell" not in text

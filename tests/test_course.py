"""tools, the course tooling (notebook runner, static site, classroom view): where it finds notebooks, and
that it stays apart from the teaching modules. The site and the classroom view are driven in tests/browser."""
import ast
from pathlib import Path

import pytest

import lib
import tools as course
from tools import NOTEBOOKS, runner

LIB = Path(lib.__file__).resolve().parent


def test_the_notebooks_are_found_by_name_with_or_without_ipynb_or_by_path(tmp_path):
    everything = course.all_notebooks()
    assert everything == sorted(everything) and everything[0].name == "00_index.ipynb"
    assert all(p.parent == course.NOTEBOOKS == course.ROOT / "notebooks" for p in everything)
    want = course.NOTEBOOKS / "02_autoregressive_generation.ipynb"
    assert course.notebook_path("02_autoregressive_generation") == want
    assert course.notebook_path("02_autoregressive_generation.ipynb") == want
    assert course.notebook_path(str(want)) == want
    own = tmp_path / "mine.ipynb"
    own.write_text("{}")
    assert course.notebook_path(own) == own.resolve()
    assert course.notebook_paths() == everything and course.notebook_paths([]) == everything
    assert course.notebook_paths(["03_kv_cache", "01_transformer_decoder"]) == [
        course.NOTEBOOKS / "03_kv_cache.ipynb", course.NOTEBOOKS / "01_transformer_decoder.ipynb"]


def test_an_unknown_notebook_is_named_with_the_ones_there_are(capsys):
    with pytest.raises(FileNotFoundError, match=r"no notebook 'nope'; the notebooks are: 00_index, 01_"):
        course.notebook_path("nope")
    assert runner.main(["nope"]) == 2  # before any kernel starts
    assert "no notebook 'nope'; the notebooks are: 00_index" in capsys.readouterr().err


def test_the_runner_strips_widget_state_and_timing_metadata():
    import nbformat

    nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell("1")])
    nb.metadata["widgets"] = {"application/vnd.jupyter.widget-state+json": {}}
    nb.cells[0].metadata.update(execution={"iopub.status.busy": "x"}, ExecuteTime={"start": "x"}, tags=["keep"])
    stream = nbformat.v4.new_output
    nb.cells[0].outputs = [stream("stream", name="stdout", text="alive:"), stream("stream", name="stdout", text=" True\n"),
                           stream("stream", name="stderr", text="warn\n"), stream("stream", name="stdout", text="x\n")]
    runner.clean(nb)
    assert "widgets" not in nb.metadata and nb.cells[0].metadata == {"tags": ["keep"]}
    # a print flushed in two pieces is stored as one, as nbval compares it; other streams stay apart
    assert [(o.name, o.text) for o in nb.cells[0].outputs] == [("stdout", "alive: True\n"), ("stderr", "warn\n"),
                                                               ("stdout", "x\n")]


def test_no_teaching_module_imports_the_course_tooling():
    """lib.notebook (every notebook's setup()) is teaching; tools is tooling: the flow never goes back."""
    teaching = [p for p in LIB.rglob("*.py") if "course" not in p.relative_to(LIB).parts]
    assert LIB / "notebook.py" in teaching and len(teaching) > 20
    for path in teaching:
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.ImportFrom):
                names = [node.module or ""] + [a.name for a in node.names]
            elif isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            else:
                continue
            assert not any(n == "course" or n.startswith("course.") or n.startswith("tools") for n in names), \
                f"{path.relative_to(LIB)} imports the course tooling"
    for old in ("site.py", "classroom.py", "notebooks.py"):  # moved into tools/
        assert not (LIB / old).exists()


def test_every_notebook_states_the_time_its_own_counts_give():
    """Each notebook's first cell and the map in 00 state the estimate of tools.pacing (words at a stated pace, code
    cells, widgets and the run time); the Chinese edition's first cell and map state its own, from Chinese characters."""
    from tools import edition, pacing

    est, est_zh = pacing.paces(), pacing.paces_zh()
    maps = {"en": pacing.map_minutes("en"), "zh": pacing.map_minutes("zh")}
    stale = []
    for name, p in est.items():
        en = pacing.stated(NOTEBOOKS / f"{name}.ipynb")
        zh = pacing.stated(edition.source_path("zh", name), "zh")
        said = {"first cell": en, "map": maps["en"].get(name)}
        said_zh = {"Chinese first cell": zh, "Chinese map": maps["zh"].get(name)}  # the Chinese estimate: characters
        if any(v != p.minutes for v in said.values()) or any(v != est_zh[name].minutes for v in said_zh.values()):
            stale.append(f"{name}: estimate {p.minutes} min, Chinese {est_zh[name].minutes} 分钟, {said}, {said_zh}")
    assert not stale, "run `python -m tools.pacing --write`:\n" + "\n".join(stale)


def test_the_map_and_the_readme_add_up_the_notebooks_times_exercises_included():
    """00's "In all" line is the sum of the times its map states, split into reading and the exercises, and the
    README says the same range and total, in both editions."""
    from tools import pacing

    for lang, est in (("en", pacing.paces()), ("zh", pacing.paces_zh())):
        line, readme = pacing.stated_total(lang)
        assert line == pacing.total_sentence(est, lang), f"{lang}: run `python -m tools.pacing --write` ({line})"
        assert readme == pacing.readme_phrase(est, lang), f"{lang} README: run `python -m tools.pacing --write`"
        assert sum(pacing.map_minutes(lang).values()) == sum(p.minutes for p in est.values())
    en = pacing.paces()
    assert sum(p.build_its for p in en.values()) >= 19 and sum(p.predictions for p in en.values()) >= 90


def test_the_pace_adds_up_what_a_learner_reads_runs_and_plays():
    from tools.pacing import Pace

    p = Pace("x", prose_words=1300, table_words=390, code_cells=10, widgets=1, plotly=2, run_seconds=30)
    # 10 + 1 + 5 + 3 + 2 + 0.5 = 21.5 minutes, rounded up to 25
    assert p.minutes == 25 and p.run_text() == "under a minute" and "about 25 minutes" in p.sentence()
    assert "约 25 分钟" in p.sentence("zh")
    assert Pace("y", 0, 0, 0, 0, 0, 0).minutes == 5
    # the learner's own work on top: 2 build-its x 10 + 7 predictions x 1 = 27 minutes, rounded up to 30
    q = Pace("x", 1300, 390, 10, 1, 2, 30, build_its=2, predictions=7)
    assert (q.reading_minutes, q.exercise_minutes, q.minutes) == (25, 30, 55)
    assert q.sentence().startswith("**Time:** about 55 minutes: 25 to read and run (")
    assert "30 for its 2 build-it exercises and 7 predictions (10 minutes a build-it, 1 a prediction)" in q.sentence()
    assert q.sentence("zh").startswith("**时间：** 约 55 分钟。阅读和运行约 25 分钟，按每分钟读 400 个汉字")
    assert "。2 个动手实现、7 个预测约 30 分钟，每个动手实现按 10 分钟、每个预测按 1 分钟计。" in q.sentence("zh")
    one = Pace("z", 0, 0, 0, 0, 0, 0, build_its=1)
    assert "for its 1 build-it exercise (" in one.sentence() and one.minutes == 15

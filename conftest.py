"""pytest's root conftest: under nbval (``--nbval``, ``make test-notebooks``), the notebooks' kernels draw no progress
bar (``lib.progress``: a long cell's bar is for a learner watching; the stored outputs that nbval compares have none),
and every figure they show is checked for texts drawn over each other and legends over lines
(``lib.notebook.report_collisions``: the kernels append what they find to one file). At the end the run lists each
such figure and writes the list to ``test-artifacts/figure-collisions.txt``: a report for the look, not a failure,
because some figures draw what this machine measured (06's roofline of this CPU, 03's and 10's timings) and may
crowd on one CPU and not on another; lib's own figures, on fixed inputs, are held to it by
tests/test_figure_legibility.py."""
import json
import os
import tempfile
from pathlib import Path

FIGURE_CHECK = "KVLAB_FIGURE_CHECK"  # lib.notebook.FIGURE_CHECK (not imported: this file loads before lib)


def _nbval(config) -> bool:
    return bool(config.getoption("nbval", default=False) or config.getoption("nbval_lax", default=False))


def pytest_configure(config):
    if _nbval(config):
        os.environ["KVLAB_PROGRESS"] = "0"  # lib.progress.FORCE; the kernels nbval starts inherit it
        if not hasattr(config, "workerinput") and not os.environ.get(FIGURE_CHECK):  # the controller: one file
            fd, path = tempfile.mkstemp(prefix="kvlab-figures-", suffix=".jsonl")
            os.close(fd)
            os.environ[FIGURE_CHECK] = path  # pytest-xdist's workers and their kernels inherit it
            config._kvlab_figure_check = path


def _run_seconds(path: Path) -> float:
    """The notebook's own run time, as tools.runner stored it (``kvlab_run_seconds``; 0 when it has none)."""
    try:
        return float(json.loads(path.read_text(encoding="utf-8"))["metadata"].get("kvlab_run_seconds", 0))
    except (OSError, ValueError, KeyError, TypeError):
        return 0.0


def pytest_collection_modifyitems(session, config, items):
    """Under nbval, the longest notebooks first (each notebook's cells stay together and in order): pytest-xdist's
    ``--dist loadfile`` hands the notebooks out in this order, so the two workers end together rather than one
    finishing a long notebook alone at the end (longest first is the classic way to balance such a queue)."""
    if not _nbval(config):
        return
    seconds = {}
    for item in items:
        path = Path(str(item.fspath))
        if path.suffix == ".ipynb" and path not in seconds:
            seconds[path] = _run_seconds(path)
    order = {path: i for i, path in enumerate(sorted(seconds, key=lambda p: -seconds[p]))}
    items.sort(key=lambda item: order.get(Path(str(item.fspath)), -1))  # stable: cells keep their order


def pytest_sessionfinish(session, exitstatus):
    path = getattr(session.config, "_kvlab_figure_check", None)
    if not path:
        return
    try:
        with open(path, encoding="utf-8") as f:
            rows = [json.loads(line) for line in f if line.strip()]
    finally:
        os.unlink(path)
        os.environ.pop(FIGURE_CHECK, None)
    lines = [f"{len(rows)} figure(s) shown by the notebooks draw texts over each other "
             "(lib.widgets.style.text_collisions: text, text, overlap in px; legend_collisions: legend, line, points):"]
    lines += [f"  {r['figure'][:100]!r} ({r['cwd']}): {r['collisions'][:4]}" for r in rows]
    out = Path(os.environ.get("KVLAB_ARTIFACTS", Path(__file__).resolve().parent / "test-artifacts"))
    try:
        out.mkdir(parents=True, exist_ok=True)
        (out / "figure-collisions.txt").write_text("\n".join(lines) + "\n", encoding="utf-8")
    except OSError:  # a read-only checkout still runs the notebooks
        pass
    reporter = session.config.pluginmanager.get_plugin("terminalreporter")
    if rows and reporter is not None:
        reporter.write_line("\n".join(lines), yellow=True)

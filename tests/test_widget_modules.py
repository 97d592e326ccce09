"""Every widget the notebooks create is made of core ipywidgets models only: ``@jupyter-widgets/base``,
``/controls`` and ``/output``, the modules JupyterLab, VS Code and Voilà all bundle. A plotly ``FigureWidget``
(anywidget since plotly 6) fails in VS Code ("No version of module anywidget is registered") and inside a Tab in
Voilà; nothing else in the suite would notice, since JupyterLab shows it.

``tests/widget_scan.py`` builds each widget as its notebook builds it (the notebook's own call, with the
notebook's own statements for the names it uses) in a process of its own, and reports every widget model
alive afterwards.
"""
import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from widget_scan import CORE_MODULES

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests" / "browser"))
from expected import EXPECTED  # noqa: E402  (the browser test's count of widgets per notebook)


@pytest.fixture(scope="module")
def scan(tmp_path_factory):
    out = tmp_path_factory.mktemp("scan") / "scan.json"
    env = {**os.environ, "PYTHONPATH": str(ROOT), "MPLBACKEND": "Agg"}
    run = subprocess.run([sys.executable, str(ROOT / "tests" / "widget_scan.py"), str(out)], cwd=ROOT, env=env,
                         capture_output=True, text=True, timeout=600)
    assert run.returncode == 0, f"the widget scan failed:\n{run.stdout[-2000:]}\n{run.stderr[-4000:]}"
    return json.loads(out.read_text(encoding="utf-8"))


def test_every_notebook_widget_is_a_core_widget(scan):
    widgets = scan["widgets"]
    assert len(widgets) > 100, f"only {len(widgets)} widget models found: the scan built too little"
    bad = [w for w in widgets if w["model_module"] not in CORE_MODULES
           or (w["view_module"] is not None and w["view_module"] not in CORE_MODULES)]
    assert not bad, ("widget models outside the core modules (VS Code and Voilà cannot show them): "
                     + ", ".join(sorted({f"{w['class']}: {w['model_module']} {w['model']}" for w in bad})))
    assert not scan["anywidget_imported"], "building the notebooks' widgets imported anywidget (a FigureWidget?)"


def test_the_scan_built_every_widget_the_notebooks_show(scan):
    assert scan["classes_built"] == scan["classes_in_notebooks"], (
        f"widget classes used by a notebook but never built by the scan: "
        f"{sorted(set(scan['classes_in_notebooks']) - set(scan['classes_built']))}; skipped calls: {scan['skipped']}")
    built = {Path(name).stem: len(calls) for name, calls in scan["notebooks"].items()}
    want = {name: row["widgets"] for name, row in EXPECTED.items() if row["widgets"]}
    assert built == want, "widgets built per notebook differ from the widgets its stored outputs show"
    for name, calls in scan["notebooks"].items():
        for call in calls:
            assert not call["not_in_registry"], f"{name}: {call['call']} shows widgets the scan did not count"
    assert scan["zh_same_calls"], f"the Chinese edition builds other widgets: {scan.get('zh_differs')}"


def test_the_live_tiers_draw_into_an_output_widget(scan):
    """The two widgets that used to be FigureWidgets: their plotly figure now sits in an Output widget."""
    by_class = {}
    for w in scan["widgets"]:
        by_class.setdefault(w["class"].rsplit(".", 1)[1], set()).add(w["model"])
    for cls in ("CostCurvesExplorer", "RooflineExplorer", "AttentionExplorer"):
        assert "OutputModel" in by_class[cls], f"{cls} has no Output widget: {sorted(by_class[cls])}"


def test_nothing_installs_or_uses_anywidget():
    for name in ("requirements.txt", "pyproject.toml"):
        text = (ROOT / name).read_text(encoding="utf-8")
        assert "anywidget" not in text, f"{name} still installs anywidget"
    for path in (ROOT / "lib").rglob("*.py"):
        code = path.read_text(encoding="utf-8")
        assert not re.search(r"FigureWidget\(|import anywidget", code), f"{path.relative_to(ROOT)} builds a FigureWidget"

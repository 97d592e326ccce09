"""House rules for the committed notebooks (nbval checks their outputs; this checks how they are kept)."""
import json
import re
import warnings
from pathlib import Path

import pytest

ENGLISH = sorted((Path(__file__).resolve().parent.parent / "notebooks").glob("[0-9][0-9]_*.ipynb"))
CHINESE = sorted((Path(__file__).resolve().parent.parent / "notebooks" / "zh").glob("[0-9][0-9]_*.ipynb"))
NOTEBOOKS = ENGLISH + CHINESE  # every house rule holds in both editions; the structure words are the edition's


def name(path):
    return path.name if path.parent.name == "notebooks" else f"{path.parent.name}/{path.name}"


def load(path):
    return json.loads(path.read_text(encoding="utf-8"))


def code_cells(nb):
    return [c for c in nb["cells"] if c["cell_type"] == "code"]


def src(cell):
    return "".join(cell["source"])


def test_there_are_notebooks_and_an_index():
    names = [p.name for p in ENGLISH]
    if not names:
        pytest.skip("no notebooks yet")
    assert "00_index.ipynb" in names


@pytest.mark.parametrize("path", NOTEBOOKS, ids=name)
def test_kept_small_without_widget_state(path):
    assert path.stat().st_size < 1_000_000, f"{path.name} is {path.stat().st_size:,} bytes (limit 1 MB)"
    nb = load(path)
    assert "widgets" not in nb["metadata"], "saved widget state: regenerate with `python -m tools.runner`"


@pytest.mark.parametrize("path", NOTEBOOKS, ids=name)
def test_outputs_are_stored_and_clean(path):
    nb = load(path)
    cells = code_cells(nb)
    assert cells and all(c["execution_count"] is not None for c in cells), "run `python -m tools.runner` first"
    counts = [c["execution_count"] for c in cells]
    assert counts == list(range(1, len(cells) + 1)), "cells were not run once, top to bottom, in a fresh kernel"
    for c in cells:
        for out in c.get("outputs", []):
            assert out["output_type"] != "error", f"error output in cell:\n{src(c)[:200]}"
            text = "".join(out.get("text", "")) + json.dumps(out.get("data", {}), ensure_ascii=False)
            assert "Glyph" not in text or "missing from font" not in text, "a figure is missing CJK glyphs"
            assert "Traceback" not in text
            assert "Error displaying widget" not in text


@pytest.mark.parametrize("path", NOTEBOOKS, ids=name)
def test_no_network_no_sys_path_no_notebook_renderer(path):
    nb = load(path)
    for c in nb["cells"]:
        s = src(c)
        assert "sys.path" not in s, "install the package instead of editing sys.path"
        assert "Javascript(" not in s
        assert not re.search(r"renderers\.default\s*=\s*['\"]notebook", s)
        for out in c.get("outputs", []):
            blob = json.dumps(out.get("data", {}))
            assert not re.search(r"<script[^>]+src=\\?[\"']https?://", blob), "a CDN script in an output"
            assert "cdn.plot.ly" not in blob and "cdn.jsdelivr" not in blob and "unpkg.com" not in blob


@pytest.mark.parametrize("path", NOTEBOOKS, ids=name)
def test_structure_goals_setup_recap_exercises(path):
    nb = load(path)
    first = src(nb["cells"][0]).lower()
    assert nb["cells"][0]["cell_type"] == "markdown" and first.lstrip().startswith("#")
    code = "\n".join(src(c) for c in code_cells(nb))
    assert "lib.notebook.setup(" in code or "notebook.setup(" in code
    text = "\n".join(src(c) for c in nb["cells"] if c["cell_type"] == "markdown").lower()
    if path in CHINESE:
        assert "分钟" in first, "say how long the notebook takes (约 N 分钟)"
        assert "学到" in first or "学习" in first, "say what the reader will learn (你将学到)"
        assert 'lang="zh"' in code, 'the Chinese edition declares its language: lib.notebook.setup(lang="zh")'
        recap, exercises = "小结", "练习"
    else:
        assert re.search(r"\bmin(utes?)?\b", first), "say how long the notebook takes"
        assert "learn" in first, "say what the reader will learn"
        recap, exercises = "recap", "exercise"
    if not path.name.startswith("00_"):
        assert recap in text and exercises in text, f"a {recap} and {exercises}"


@pytest.mark.parametrize("path", NOTEBOOKS, ids=name)
def test_ignored_outputs_are_few(path):
    cells = code_cells(load(path))
    ignored = [c for c in cells if src(c).lstrip().startswith(("# NBVAL_IGNORE_OUTPUT", "# NBVAL_SKIP"))]
    assert len(ignored) <= max(2, len(cells) // 4), f"{len(ignored)} of {len(cells)} code cells are not compared"
    assert not any(src(c).lstrip().startswith("# NBVAL_SKIP") for c in cells), "every cell must at least run"


def test_matplotlib_renders_the_vocabulary_without_missing_glyphs():
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from lib.widgets.fonts import use_cjk_font
    from lib.corpus import corpus_tokenizer

    use_cjk_font()
    text = "".join(c for c in corpus_tokenizer().chars if c.strip())
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # "Glyph ... missing from font(s)" is a UserWarning
        fig, ax = plt.subplots()
        for i in range(0, len(text), 40):
            ax.text(0, i / 200, text[i:i + 40])
        ax.set_title("<s> → 人工智能 <eos> · 深度学习")
        fig.canvas.draw()
        plt.close(fig)


def test_a_notebook_s_first_cell_builds_no_iri_grammar_and_plotly_still_renders():
    """lib.notebook.setup keeps jsonschema from importing rfc3987_syntax (3 s of Earley parsers in every kernel,
    jsonschema issue #1428): after it, plotly's figures render as the notebooks store them, no IRI grammar loaded."""
    import subprocess
    import sys
    code = ("import sys, lib.notebook; lib.notebook.setup(verbose=False)\n"
            "import plotly.graph_objects as go, plotly.io as pio, jsonschema\n"
            "bundle = pio.renderers['plotly_mimetype'].to_mimebundle(go.Figure(go.Bar(y=[1, 2])).to_dict())\n"
            "print(sorted(bundle), sys.modules.get('rfc3987_syntax'), 'nbformat' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.strip()
    assert out == "['application/vnd.plotly.v1+json'] None True", out

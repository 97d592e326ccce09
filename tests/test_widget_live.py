"""Every live widget stands on one skeleton (``lib.widgets.live.LiveWidget``): it owns ``.widget``, draws through
``redraw()``, and a notebook shows it the same way, by itself (``display(w)`` or ``w`` as a cell's last
expression), through the base's ``_repr_mimebundle_``; the steppers share ``FrameStepping``'s step / next / back."""
import ast
import inspect
import pkgutil
from importlib import import_module
from pathlib import Path

import ipywidgets
import pytest
import torch
from IPython.core.formatters import DisplayFormatter

import lib
import lib.widgets
from lib.widgets import live
from lib.widgets.live import FrameStepping, LiveWidget

WIDGET_VIEW = "application/vnd.jupyter.widget-view+json"
STEPPERS = {"GenerationPlayer", "RingStepper", "ServingDashboard", "TileStepper"}


def _classes_that_build_widgets() -> dict:
    """{name: class} of every class in a lib.widgets module whose source imports ipywidgets or builds ``.widget``
    (found from the source, so a new live widget that forgets the base is found too)."""
    found = {}
    for info in pkgutil.iter_modules(lib.widgets.__path__):
        module = import_module(f"lib.widgets.{info.name}")
        tree = ast.parse(Path(module.__file__).read_text(encoding="utf-8"))
        for node in tree.body:
            if isinstance(node, ast.ClassDef) and node.name not in ("LiveWidget", "FrameStepping"):
                source = ast.get_source_segment(Path(module.__file__).read_text(encoding="utf-8"), node)
                if "import ipywidgets" in source or "self.widget" in source or "widgets." in source:
                    found[node.name] = getattr(module, node.name)
    return found


LIVE = _classes_that_build_widgets()


def test_every_live_widget_class_stands_on_the_base():
    assert len(LIVE) == 13, sorted(LIVE)
    not_on_base = sorted(n for n, c in LIVE.items() if not issubclass(c, LiveWidget))
    assert not not_on_base, f"live widgets that do not subclass lib.widgets.live.LiveWidget: {not_on_base}"
    assert {n for n, c in LIVE.items() if issubclass(c, FrameStepping)} == STEPPERS
    for name, cls in LIVE.items():
        assert not issubclass(cls, ipywidgets.Widget), f"{name} is a widget box itself; it should hold one"
        own = set(vars(cls))
        assert not own & {"_ipython_display_", "_repr_mimebundle_"}, f"{name} displays itself its own way"
        assert "redraw" in own, f"{name} has no redraw()"
        if name in STEPPERS:
            assert not own & {"next", "back", "step"}, f"{name} writes next / back / step again"


def _build(name: str, chat, draft):
    model, tok = chat
    ids = torch.tensor(tok.encode("<s>人工智能深度学习人工智能深度学习人工智能"))
    build = {
        "AttentionExplorer": lambda m: m.AttentionExplorer(model, tok, "<s>", max_new_tokens=4),
        "BlockPoolWidget": lambda m: m.BlockPoolWidget(model, tok),
        "CapacityExplorer": lambda m: m.CapacityExplorer(),
        "CostCurvesExplorer": lambda m: m.CostCurvesExplorer("chat", n=8),
        "MemoryExplorer": lambda m: m.MemoryExplorer("llama-2-7b", "fp16", 4096, 2),
        "GenerationPlayer": lambda m: m.GenerationPlayer(model, tok, max_new_tokens=4),
        "RingStepper": lambda m: m.RingStepper(model, tok, ids, window=8),
        "RooflineExplorer": lambda m: m.RooflineExplorer(),
        "SamplingExplorer": lambda m: m.SamplingExplorer(model, tok, "<s>"),
        "ServingDashboard": lambda m: m.ServingDashboard(*lib.load_demo("lm"), n_requests=4, max_new_tokens=6),
        "SpeculativeExplorer": lambda m: m.SpeculativeExplorer(model, draft, tok, "<s>", max_new_tokens=4),
        "TileStepper": lambda m: m.TileStepper(model, ids[None], block_size=4),
        "WorkedExplorer": lambda m: m.WorkedExplorer(model, tok, "<s>", max_new_tokens=3),
    }[name]
    return build(inspect.getmodule(LIVE[name]))


@pytest.mark.parametrize("name", sorted(LIVE))
def test_a_notebook_shows_the_widget_itself(name, target_and_draft):
    target, draft, tok = target_and_draft
    w = _build(name, (target, tok), draft)
    assert isinstance(w.widget, ipywidgets.VBox)
    data, _ = DisplayFormatter().format(w)  # what display(w), or w as a cell's last expression, sends
    assert data[WIDGET_VIEW]["model_id"] == w.widget.model_id  # the browser draws the widget's own box
    # a page without a kernel shows the plain text: a short fallback that names the widget, never the box's repr
    assert data["text/plain"] == w.plain_text() == (f"▶ Live widget ({type(w).__name__}): run this cell to use "
                                                    f"it (a saved notebook keeps no widget).")
    assert type(w).plain_text is LiveWidget.plain_text  # one fallback for every live widget
    w.redraw()  # the one entry point draws again without a change


def test_the_fallback_speaks_the_notebooks_language(chat):
    from lib import i18n
    from lib.widgets.player import GenerationPlayer

    p = GenerationPlayer(*chat, max_new_tokens=4)
    with i18n.speaking("zh"):
        assert p.plain_text() == "▶ 交互控件（GenerationPlayer）：运行这个单元格即可使用（保存的笔记本里不存控件）。"
    assert "VBox(" not in p.plain_text() and "GenerationPlayer" in p.plain_text()


def test_stepping_stays_within_the_frames(chat):
    from lib.widgets.player import GenerationPlayer

    p = GenerationPlayer(*chat, max_new_tokens=3)
    n = len(p.frames)
    p.step = 0
    assert p.back() == 0 and [p.next() for _ in range(n + 1)] == [*range(1, n), n - 1, n - 1]
    with pytest.raises(ValueError, match=rf"step must be an integer from 0 to {n - 1}"):
        p.step = n
    assert [live.within(i, 4) for i in (-1, 0, 3, 9)] == [0, 0, 3, 3] and live.within(5, 0) == 0


def test_the_step_buttons_call_back_and_next(chat):
    from lib.widgets.blocks import BlockPoolWidget

    w = BlockPoolWidget(*chat)
    start = w.index
    w.step_button.click()
    assert w.index == start + 1 and w.slider.value == start + 1
    w.back_button.click()
    assert w.index == start and w.step() == start + 1 and w.next() == start + 2


def test_a_widget_without_redraw_says_so():
    class Bare(LiveWidget):
        pass

    with pytest.raises(NotImplementedError, match="Bare draws nothing"):
        Bare().redraw()

"""The live tier: one skeleton for every live widget, and its drawing surface, a plotly figure inside a core
``ipywidgets.Output``.

A live widget that draws a plotly figure keeps its figure as a plain ``plotly.graph_objects.Figure`` (changed in place, read back by its
``drawn`` property) and, after every change, puts one freshly rendered copy of it into an ``Output`` widget::

    out = plotly_output(height=400)          # an ipywidgets.Output: @jupyter-widgets/output
    show_plotly(out, figure, "roofline ...")  # out.outputs = (one display_data of the figure,)

The copy is what plotly's ``plotly_mimetype`` renderer makes of the figure (``application/vnd.plotly.v1+json``,
the renderer every notebook uses), so the page draws it with the same plotly renderer as every other figure of
the course. Only core widget models travel to the browser (``@jupyter-widgets/base``, ``/controls``,
``/output``: what JupyterLab, VS Code and Voilà all bundle): no ``FigureWidget``, which plotly builds on
anywidget and which VS Code cannot show. The Output's ``outputs`` are the widget's own state, so a view that
connects late (a second tab, a Voilà page) shows exactly the last drawing.

Every live widget of the course stands on one skeleton, ``LiveWidget``::

    class SomeExplorer(LiveWidget):      # or FrameStepping, for a widget whose slider walks its frames
        def __init__(self, ...):
            ...controls, their observe callbacks...
            self.widget = self.box(controls, view)   # .widget: the ipywidgets container
            self.redraw()
        def redraw(self): ...                    # the one entry point that draws the current state

``display(w)``, or ``w`` as a cell's last expression, shows ``w.widget`` (``_repr_mimebundle_``): a notebook
never needs ``.widget``. The three tiers share their data: the static figure, the plotly step-through and the
live widget are drawn from the same precomputed frames (``ring_frames``, ``tile_frames``, ``player_frames``,
``record_story``, ...); the live widget only chooses which frame to draw.
"""
from __future__ import annotations

import html

from .. import checks
from . import style
from ..i18n import t

PLOTLY_MIME = "application/vnd.plotly.v1+json"

CONFIG = style.PLOTLY_CONFIG  # the plotly config of every live figure: no toolbar, no logo link off the machine


def plotly_output(height: int):
    """An empty ``ipywidgets.Output`` for a figure ``height`` pixels tall: it keeps that height while a redraw
    replaces the figure, so the page below does not jump."""
    import ipywidgets as W

    return W.Output(layout=W.Layout(min_height=f"{int(height)}px"))


def figure_bundle(figure, text: str) -> dict:
    """The mime bundle of ``figure`` (a plotly ``Figure``, or one written out as a plain ``{"data", "layout"}``
    dict) as the ``plotly_mimetype`` renderer makes it (plain JSON: numpy arrays become lists), with the course's
    plotly config and ``text`` as its plain-text form."""
    import plotly.io as pio

    figure = dict(figure) if isinstance(figure, dict) else figure.to_dict()  # a copy: the renderer adds its config
    bundle = pio.renderers["plotly_mimetype"].to_mimebundle(figure)
    bundle[PLOTLY_MIME]["config"] = {**CONFIG, **bundle[PLOTLY_MIME].get("config", {})}
    return {**bundle, "text/plain": text}


def show_plotly(output, figure, text: str) -> dict:
    """Replace what ``output`` shows by ``figure`` (one display_data output); returns the bundle shown."""
    bundle = figure_bundle(figure, text)
    output.outputs = ({"output_type": "display_data", "data": bundle, "metadata": {}},)
    return bundle


# -------------------------------------------------------------------------------- the live widgets' skeleton

class LiveWidget:
    """The skeleton of a live widget: ``widget``, the ipywidgets container every control and view sits in;
    ``redraw()``, the one entry point that draws the current state into it (the controls' callbacks end there);
    and one way to be shown: ``display(w)`` or ``w`` as a cell's last expression shows ``widget``."""

    widget = None  # the ipywidgets container, built by the subclass (``box``)

    def redraw(self) -> None:
        """Draw the current state of the controls into the widget (no model run)."""
        raise NotImplementedError(f"{type(self).__name__} draws nothing: a live widget defines redraw()")

    @staticmethod
    def box(*children, themed: bool = False):
        """The container of ``children`` (top to bottom); ``themed``: it follows JupyterLab's dark theme for a
        plotly figure inside (``style.themed``)."""
        import ipywidgets as W

        box = W.VBox(list(children))
        return style.themed(box) if themed else box

    def step_buttons(self, layout=None) -> tuple:
        """``(back, step)``: "◀ Back" and "Step ▶" buttons that call ``back()`` and ``next()``, as wide as their
        words (never "◀ B…") unless ``layout`` says otherwise."""
        import ipywidgets as W

        layout = layout or dict(width="auto", min_width="max-content")  # a dict: each button gets a Layout of its own
        back = W.Button(description=t("◀ Back"), layout=layout)
        step = W.Button(description=t("Step ▶"), layout=layout)
        back.on_click(lambda _: self.back())
        step.on_click(lambda _: self.next())
        return back, step

    def plain_text(self) -> str:
        """The widget's plain-text form in a notebook: what a page without a running kernel shows in its place
        (JupyterLab before the cell has run, GitHub, the static site; a saved notebook keeps no widget state).
        A short fallback that says how to get the widget, not the container's repr ("VBox(children=(...")."""
        return t("▶ Live widget ({name}): run this cell to use it (a saved notebook keeps no widget).",
                 name=type(self).__name__)

    def _repr_mimebundle_(self, **kwargs) -> dict:
        return {**self.widget._repr_mimebundle_(**kwargs), "text/plain": self.plain_text()}


class RecentRuns:
    """A live widget's last ``keep`` runs of the model, by the settings they ran with: ``get(key, run)`` gives the
    kept result for ``key`` or calls ``run()`` and keeps it (the oldest goes), so a learner who goes back to a
    setting, or changes only what needs no run, waits for nothing."""

    def __init__(self, keep: int = 8):
        self.keep, self.runs = checks.integer(keep, "keep", 1), {}

    def get(self, key, run):
        if key not in self.runs:
            result = run()
            self.runs = {**dict(list(self.runs.items())[-(self.keep - 1):] if self.keep > 1 else []), key: result}
        return self.runs[key]


def problem_html(text: str) -> str:
    """A problem said under a live widget's controls (a prompt it cannot use): theme-coloured text edged in the
    "wasted" colour."""
    return (f'<span style="color:{style.css("ink")};border-left:4px solid {style.colour("recomputed")};'
            f'padding-left:6px">{html.escape(text)}</span>')


def within(i: int, n: int) -> int:
    """Frame ``i`` moved into 0..n-1, the frames a step-through has (0 when it has none)."""
    return max(0, min(int(i), n - 1))


class FrameStepping(LiveWidget):
    """A live widget whose ``slider`` indexes its ``frames`` (the generation player, the tile and ring steppers, the
    serving dashboard): ``step`` (get / set, checked against the frames), ``next()`` (on the last frame: ``more()``,
    then stays there), ``back()`` (stays on
    0), each returning the step shown; moving the slider redraws (the subclass observes it)."""

    frames = ()  # what the slider walks (the subclass sets its list)
    message = ""  # why there are no frames, when there are none

    @property
    def step(self) -> int:
        return self.slider.value

    @step.setter
    def step(self, value: int):
        if not self.frames:
            raise ValueError(f"nothing to step through: {self.message}")
        self.slider.value = checks.integer(value, "step", 0, len(self.frames) - 1)

    def next(self) -> int:
        """One step forward (on the last step, ``more()`` may add frames; else it stays there); returns the step
        shown."""
        if self.slider.value >= len(self.frames) - 1:
            self.more()
        self.slider.value = within(self.slider.value + 1, len(self.frames))
        return self.slider.value

    def more(self) -> None:
        """Add frames after the last one, when the widget makes them as it goes (the serving dashboard's engine
        runs one more step); a step-through computed in advance has none to add."""

    def back(self) -> int:
        """One step back (stays on step 0); returns the step shown."""
        self.slider.value = within(self.slider.value - 1, len(self.frames))
        return self.slider.value

    def playback(self, *before):
        """The row that steps: ``before`` (e.g. a Play widget), Back, Step and the slider, wrapping on a narrow
        page; the buttons become ``back_button`` / ``step_button``."""
        import ipywidgets as W

        self.back_button, self.step_button = self.step_buttons()
        return W.HBox([*before, self.back_button, self.step_button, self.slider],
                      layout=W.Layout(align_items="center", flex_flow="row wrap"))

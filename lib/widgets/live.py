"""The live tier's drawing surface: a plotly figure inside a core ``ipywidgets.Output``.

A live widget keeps its figure as a plain ``plotly.graph_objects.Figure`` (changed in place, read back by its
``drawn`` property) and, after every change, puts one freshly rendered copy of it into an ``Output`` widget::

    out = plotly_output(height=400)          # an ipywidgets.Output: @jupyter-widgets/output
    show_plotly(out, figure, "roofline ...")  # out.outputs = (one display_data of the figure,)

The copy is what plotly's ``plotly_mimetype`` renderer makes of the figure (``application/vnd.plotly.v1+json``,
the renderer every notebook uses), so the page draws it with the same plotly renderer as every other figure of
the course. Only core widget models travel to the browser (``@jupyter-widgets/base``, ``/controls``,
``/output``: what JupyterLab, VS Code and Voilà all bundle): no ``FigureWidget``, which plotly builds on
anywidget and which VS Code cannot show. The Output's ``outputs`` are the widget's own state, so a view that
connects late (a second tab, a Voilà page) shows exactly the last drawing.
"""
from __future__ import annotations

PLOTLY_MIME = "application/vnd.plotly.v1+json"
from . import style

CONFIG = style.PLOTLY_CONFIG  # the plotly config of every live figure: no toolbar, no logo link off the machine


def plotly_output(height: int):
    """An empty ``ipywidgets.Output`` for a figure ``height`` pixels tall: it keeps that height while a redraw
    replaces the figure, so the page below does not jump."""
    import ipywidgets as W

    return W.Output(layout=W.Layout(min_height=f"{int(height)}px"))


def figure_bundle(figure, text: str) -> dict:
    """The mime bundle of ``figure`` as the ``plotly_mimetype`` renderer makes it (plain JSON: numpy arrays
    become lists), with the course's plotly config and ``text`` as its plain-text form."""
    import plotly.io as pio

    bundle = pio.renderers["plotly_mimetype"].to_mimebundle(figure.to_dict())
    bundle[PLOTLY_MIME]["config"] = {**CONFIG, **bundle[PLOTLY_MIME].get("config", {})}
    return {**bundle, "text/plain": text}


def show_plotly(output, figure, text: str) -> dict:
    """Replace what ``output`` shows by ``figure`` (one display_data output); returns the bundle shown."""
    bundle = figure_bundle(figure, text)
    output.outputs = ({"output_type": "display_data", "data": bundle, "metadata": {}},)
    return bundle

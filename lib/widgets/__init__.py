"""Widgets and plots that read Traces and ``lib.costs``; each visual comes in three tiers (see CONTRIBUTING.md):
a static matplotlib figure or table, a plotly step-through that survives export, and a live ipywidgets view."""
from ..tokenizer import UnknownCharacterError


def figure_and_axes(ax, figsize):
    """(figure, axes) to draw on: ``ax`` and its figure, or a new figure of ``figsize`` when ``ax`` is None."""
    if ax is not None:
        return ax.figure, ax
    import matplotlib.pyplot as plt
    return plt.subplots(figsize=figsize)


def kept_prompt_message(err: ValueError, kept: str) -> str:
    """What a live widget says when a new prompt fails (``err``) and it keeps showing the last good one."""
    if isinstance(err, UnknownCharacterError):
        what = (f"not in this model's vocabulary: {''.join(err.chars)!r}. It knows printable ASCII, <s>, <eos> "
                f"and the corpus's Chinese characters (such as 人工智能深度学习)")
    else:
        what = str(err)
    return f"{what}; still showing {kept!r}."

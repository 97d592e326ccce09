"""Widgets and plots that read Traces and ``lib.costs``; each visual comes in three tiers (see CONTRIBUTING.md):
a static matplotlib figure or table, a plotly step-through that survives export, and a live ipywidgets view
(every live widget stands on ``lib.widgets.live.LiveWidget``: a notebook shows the widget itself)."""
from ..i18n import language, t
from ..tokenizer import UnknownCharacterError


def figure_and_axes(ax, figsize):
    """(figure, axes) to draw on: ``ax`` and its figure, or a new figure of ``figsize`` when ``ax`` is None, laid
    out by matplotlib's constrained layout (titles, labels and legends never overlap or get cut) whether or not
    ``lib.widgets.style.apply`` has run."""
    if ax is not None:
        return ax.figure, ax
    import matplotlib.pyplot as plt
    return plt.subplots(figsize=figsize, layout="constrained")


def prompt_problem(err: ValueError) -> str:
    """What a live widget says about a prompt it cannot use. In English the error's own message; in another
    language an unknown character is explained in the learner's words (lib's API errors stay English)."""
    if isinstance(err, UnknownCharacterError) and language() != "en":
        return t("{n} character(s) not in the vocabulary: {chars}. The vocabulary has {size} tokens: printable "
                 "ASCII, the Chinese characters and punctuation of the training corpus (such as 人工智能深度学习), and "
                 "<s>, <eos>, <pad>, <unk>.", n=len(err.chars), size=err.vocab_size,
                 chars=", ".join(f"{c!r} (U+{ord(c):04X})" for c in err.chars)) + _did_you_mean(err)
    return str(err)


def _did_you_mean(err: UnknownCharacterError) -> str:
    """" Did you mean '...'?" where the tokenizer found the text with every unknown character in a form it has."""
    return "" if getattr(err, "suggestion", None) is None else t(" Did you mean {text}?", text=repr(err.suggestion))


def kept_prompt_message(err: ValueError, kept: str) -> str:
    """What a live widget says when a new prompt fails (``err``) and it keeps showing the last good one."""
    if isinstance(err, UnknownCharacterError):
        what = t("not in this model's vocabulary: {chars}. It knows printable ASCII, <s>, <eos> and the corpus's "
                 "Chinese characters (such as 人工智能深度学习)", chars=repr("".join(err.chars))) + _did_you_mean(err)
    else:
        what = str(err)
    return t("{what}; still showing {kept}.", what=what, kept=repr(kept))


# A plotly step-through (tier 2): one frame per step, a slider that jumps to a frame, optional Play / Pause.
JUMP = dict(mode="immediate", frame=dict(duration=0, redraw=True), transition=dict(duration=0))  # no tween


def frame_slider(names, prefix: str = "", active: int = 0, labels=None, **layout) -> dict:
    """A plotly slider with one step per frame name (labelled ``labels``, default the names) that jumps to
    that frame at once; ``layout``: where it sits (x, y, len, pad, ...) or any other slider setting."""
    names = [str(n) for n in names]
    labels = names if labels is None else [str(l) for l in labels]
    slider = dict(active=active, currentvalue=dict(prefix=prefix),
                  steps=[dict(label=l, method="animate", args=[[n], JUMP]) for n, l in zip(names, labels)])
    return {**slider, **layout}


def play_buttons(frame_ms: int = 700, labels=("▶",), tween_ms: int = 0, from_current: bool = True, **layout) -> dict:
    """Plotly buttons that play the frames (``frame_ms`` per frame) and, with a second label, pause."""
    play = dict(frame=dict(duration=frame_ms, redraw=True), fromcurrent=from_current,
                transition=dict(duration=tween_ms))
    buttons = [dict(label=labels[0], method="animate", args=[None, play])]
    if len(labels) > 1:
        buttons.append(dict(label=labels[1], method="animate", args=[[None], JUMP]))
    return {**dict(type="buttons", showactive=False, buttons=buttons), **layout}


def check_controls(values: dict, allowed) -> None:
    """Refuse settings a widget does not have, naming them and the ones it has (``widget.set(temp=1)``)."""
    unknown = sorted(set(values) - set(allowed))
    if unknown:
        raise ValueError(f"unknown control(s) {unknown}; allowed: {', '.join(allowed)}")


def try_prompt(widget, text: str, run) -> None:
    """Run ``run(text)`` for a live widget's new prompt: on success it becomes ``widget.prompt``; a prompt that
    fails (an unknown character, too long) leaves the last good one and sets ``widget.message`` to say why."""
    try:
        run(text)
    except ValueError as e:
        widget.message = kept_prompt_message(e, widget.prompt)
    else:
        widget.prompt, widget.message = text, ""


# -- nb1113 -- bring your own model: a picker of named models that also holds the learner's converted checkpoint
YOUR_MODEL = "your model"  # the picker's entry for a model given as a lib.MiniTransformer or lib.ModelConfig


def picker_models(model, named: dict) -> tuple[dict, str]:
    """``(models, chosen)`` for an explorer's model picker: ``models`` maps each entry's name to its
    ``lib.ModelConfig`` (``named`` first, e.g. ``lib.PRESETS``), ``chosen`` is the entry of ``model``. ``model``:
    a name of ``named``, a ``lib.ModelConfig``, or a ``lib.MiniTransformer`` (a checkpoint converted with
    ``lib.from_hf`` / ``lib.hf.load_from_env``: its config). A config equal to a named one picks that entry; any
    other joins the picker as "your model" (``YOUR_MODEL``)."""
    from ..config import ModelConfig
    from ..model import MiniTransformer

    models = dict(named)
    if isinstance(model, MiniTransformer):
        model = model.config
    if isinstance(model, ModelConfig):
        same = next((name for name, c in models.items() if c == model), None)
        if same is not None:
            return models, same
        models[YOUR_MODEL] = model
        return models, YOUR_MODEL
    if isinstance(model, str) and model in models:
        return models, model
    from ..presets import resolve_model
    resolve_model(model)  # a name lib does not know, or not a model at all: its own error
    raise ValueError(f"model={model!r} is not in the explorer's picker; choose one of: {', '.join(models)} (a "
                     f"lib.ModelConfig or a model of your own, lib.from_hf(...), joins it as {YOUR_MODEL!r})")


def picker_options(models: dict) -> list:
    """A Dropdown's options for ``picker_models``' entries: the names, and "your model" in the notebook's
    language when it is there."""
    if YOUR_MODEL not in models:
        return list(models)
    return [(t(name) if name == YOUR_MODEL else name, name) for name in models]

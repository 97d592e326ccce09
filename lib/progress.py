"""Progress bars for the long commands (``make bench``, ``make train``, ``make notebooks``), one rule for all.

A bar (tqdm: the current item, a count, an ETA) is drawn only where a person watches: on a terminal, and not
under CI. Anywhere else (CI=true, output sent to a log file or a pipe) the commands print their plain lines
as before, and no bar. ``KVLAB_PROGRESS=1`` forces the bars on, ``KVLAB_PROGRESS=0`` off.

    from lib import progress
    with progress.bar(total=600, desc="chat", unit="step") as b:
        for step in range(600):
            ...
            b.set_postfix(loss=f"{loss:.4f}", refresh=False)
            b.update()
    progress.write("a line that does not break the bar")

A disabled bar accepts every call and draws nothing, so callers do not branch on it; ``b.disable`` says
whether it is off (then print the plain lines instead).

In a notebook (a Jupyter kernel: JupyterLab, VS Code, Voila) a long cell draws its bar as a widget under the cell
(tqdm.notebook: core ipywidgets only) once it has run for ``NOTEBOOK_DELAY`` seconds, and takes it away when done,
so a quick call draws nothing and the cell keeps only its own output. Not under CI, and not where KVLAB_PROGRESS=0:
``tools.runner`` and nbval set it for their kernels, so no stored output holds a bar.
"""
from __future__ import annotations

import os
import sys

from tqdm import tqdm

FORCE = "KVLAB_PROGRESS"  # "1": always draw bars, "0": never; unset: on a terminal outside CI
_OFF = ("", "0", "false", "no", "off")


def _is_set(value: str | None) -> bool:
    return value is not None and value.strip().lower() not in _OFF


def _setting(environ=None) -> bool | None:
    """What the environment decides for every bar: KVLAB_PROGRESS when it is set, off under CI, else None."""
    environ = os.environ if environ is None else environ
    force = environ.get(FORCE)
    if force is not None and force.strip():
        return _is_set(force)
    return False if _is_set(environ.get("CI")) else None


def show_progress(stream=None, environ=None) -> bool:
    """Whether to draw progress bars on ``stream`` (default: ``sys.stderr``, where they go).

    ``KVLAB_PROGRESS`` decides when it is "1" or "0" (also true/false, yes/no, on/off); otherwise bars are
    shown only on a terminal (``stream.isatty()``) and not under CI (``CI`` set to anything but
    0/false/no/off, as CI services set it)."""
    decided = _setting(environ)
    if decided is not None:
        return decided
    stream = sys.stderr if stream is None else stream
    isatty = getattr(stream, "isatty", None)
    try:
        return bool(isatty and isatty())
    except (ValueError, OSError):  # a closed or detached stream
        return False


NOTEBOOK_DELAY = 1.0  # seconds a notebook's call runs before its bar appears


def in_kernel() -> bool:
    """Whether this code runs in a Jupyter kernel (a notebook cell), not in a terminal or a script."""
    ipython = sys.modules.get("IPython")  # never imported here: a script that has not loaded it is no kernel
    shell = ipython.get_ipython() if ipython is not None else None
    return shell is not None and getattr(shell, "kernel", None) is not None


def show_in_notebook(environ=None) -> bool:
    """Whether a notebook's long cell draws its bar: KVLAB_PROGRESS decides when set, never under CI, else yes."""
    decided = _setting(environ)
    return True if decided is None else decided


def bar(iterable=None, total: int | None = None, desc: str = "", unit: str = "it", leave: bool = True,
        show: bool | None = None, file=None, **kwargs) -> tqdm:
    """A tqdm progress bar on ``file`` (default: ``sys.stderr``), drawn when ``show`` is True, hidden when
    False, and when ``None`` as ``show_progress(file)`` decides; in a notebook (``in_kernel``, ``file`` not given,
    ``show`` None) a widget bar that appears after NOTEBOOK_DELAY seconds and goes when it closes, where
    ``show_in_notebook`` allows it. Extra keyword arguments go to tqdm."""
    if file is None and show is None and in_kernel():
        from tqdm.notebook import tqdm as widget_bar

        return widget_bar(iterable, total=total, desc=desc, unit=unit, leave=False, disable=not show_in_notebook(),
                          delay=NOTEBOOK_DELAY, **kwargs)
    file = sys.stderr if file is None else file
    show = show_progress(file) if show is None else bool(show)
    return tqdm(iterable, total=total, desc=desc, unit=unit, leave=leave, file=file, disable=not show,
                dynamic_ncols=True, **kwargs)


def write(message: str, file=None) -> None:
    """Print one line to ``file`` (default: ``sys.stderr``) without breaking a bar being drawn there."""
    tqdm.write(message, file=sys.stderr if file is None else file)

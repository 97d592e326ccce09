"""Course tooling, kept apart from the teaching modules: it runs, publishes and projects the notebooks.

    python -m tools.runner [NAME ...]           re-run notebooks and store their outputs (make notebooks)
    python -m tools.runner --edition zh|all     build the Chinese edition (notebooks/zh/), then run it
    python -m tools.edition build|check zh      the Chinese edition from the translation files
    python -m tools.drift zh [NAME ...]         where the two editions disagree (tests/test_edition.py)
    python -m tools.site [--out site] [NAME ...]  every notebook as an offline HTML page (make site)
    python -m tools.classroom NAME [--port N]   one notebook for a projector, Voilà (make classroom)
    python -m tools.lab [PATH] [--port N]       JupyterLab with the project's own settings (make lab)
    python -m tools.gallery                     the browser test's screenshots on one page (make gallery)

No teaching module imports this package, and no notebook does: a notebook calls ``lib.notebook.setup()``.
A notebook is named by its file name with or without ``.ipynb`` (``02_autoregressive_generation``) or by a path.
"""
from __future__ import annotations

from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]  # the checkout: tools/ -> .
NOTEBOOKS = ROOT / "notebooks"


def all_notebooks() -> list[Path]:
    """Every ``notebooks/NN_*.ipynb``, in order."""
    return sorted(NOTEBOOKS.glob("[0-9][0-9]_*.ipynb"))


def notebook_path(name) -> Path:
    """``02_autoregressive_generation``, ``02_autoregressive_generation.ipynb`` or a path to an .ipynb file ->
    the notebook file; a FileNotFoundError that lists the notebooks otherwise."""
    p = Path(name)
    if p.suffix == ".ipynb" and p.is_file():
        return p.resolve()
    p = NOTEBOOKS / f"{p.stem if p.suffix == '.ipynb' else name}.ipynb"
    if not p.is_file():
        known = ", ".join(q.stem for q in all_notebooks())
        raise FileNotFoundError(f"no notebook {str(name)!r}; the notebooks are: {known}")
    return p


def notebook_paths(names=None) -> list[Path]:
    """The notebooks named (``notebook_path`` of each), or every notebook when ``names`` is empty."""
    return [notebook_path(n) for n in names] if names else all_notebooks()

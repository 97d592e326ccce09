"""Regenerate the stored outputs of the notebooks: ``python -m tools.runner [NAME ...]`` (``make notebooks``).

``--edition zh`` first builds the Chinese notebooks (``notebooks/zh/``, from the English ones and their translation
files, ``tools.edition``) and then runs them; ``--edition all`` runs the English ones, then does that. Without
names, ``zh`` means every notebook that has a translation file.

Each notebook runs top to bottom in a fresh kernel of this Python, the course's kernel (``tools.lab.KERNEL``, the one
``make lab`` offers and every notebook names), in ``notebooks/``, and is written back
with its outputs, minus what must not be committed: saved widget state (``metadata.widgets``, megabytes of
JavaScript for a FigureWidget) and per-cell timing metadata. Prints each notebook's run time and size; on a
terminal (not under CI, see ``lib.progress``) a bar shows which notebook is running and, below it, its cells.
"""
from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

from lib import progress
from . import NOTEBOOKS, drift, edition, lab, notebook_paths, pacing

MAX_BYTES = 1_000_000


def clean(nb) -> None:
    """Drop widget state and volatile metadata in place, and join consecutive pieces of one stream (where a
    ``print`` was flushed in two parts depends on the machine's load; the text does not)."""
    nb.metadata.pop("widgets", None)
    for cell in nb.cells:
        cell.metadata.pop("execution", None)
        cell.metadata.pop("ExecuteTime", None)
        if "outputs" in cell:
            cell.outputs = drift.merged(cell.outputs)  # as nbval and the editions' comparison read them


def run(path: Path, timeout: int = 600, show: bool | None = False) -> tuple[float, int]:
    """Execute one notebook and write it back cleaned; (seconds, bytes). ``show``: a bar over its cells
    (True, False, or None: as ``lib.progress.show_progress`` decides)."""
    import nbformat
    from nbclient import NotebookClient

    nb = nbformat.read(path, as_version=4)
    t0 = time.perf_counter()
    with progress.bar(total=len(nb.cells), desc=path.stem, unit="cell", leave=False, show=show) as cells:

        def at_cell(cell, cell_index, **_):  # nbclient's hook before every cell (markdown ones too)
            cells.set_postfix_str(f"cell {cell_index + 1}: {cell.cell_type}", refresh=False)
            cells.update(cell_index - cells.n)

        saved = dict(os.environ)
        os.environ.update(lab.server_env())  # JUPYTER_PATH finds the course's kernel (tools/lab_settings/kernels)
        os.environ[progress.FORCE] = "0"  # a long cell's bar (lib.progress) is for a learner: none in stored outputs
        try:
            client = NotebookClient(nb, timeout=timeout, kernel_name=lab.KERNEL,
                                    resources={"metadata": {"path": str(path.parent)}}, record_timing=False,
                                    on_cell_start=None if cells.disable else at_cell)
            client.execute()
        finally:
            os.environ.clear()
            os.environ.update(saved)
        cells.update(cells.total - cells.n)
    seconds = time.perf_counter() - t0
    clean(nb)
    nb.metadata[pacing.RUN_KEY] = round(seconds)  # the run time a learner waits for, in tools.pacing's estimate
    nbformat.write(nb, path)
    return seconds, path.stat().st_size


def edition_paths(lang: str, names=None) -> list[Path]:
    """Build the ``lang`` edition of the notebooks named (default: every one with a translation file) and return
    the built files, to be run. FileNotFoundError for an unknown notebook or one without a translation file;
    ValueError (from ``edition.build``) for missing or stale translations."""
    english = [p.stem for p in notebook_paths(names)]  # checks the names
    have = set(edition.translated_names(lang))
    if names:
        untranslated = [n for n in english if n not in have]
        if untranslated:
            raise FileNotFoundError(
                f"no {lang} translation file for {', '.join(untranslated)} (notebooks/{lang}/src/NN_name.md); start "
                f"one with: python -m tools.edition skeleton {lang} NN_name")
    return [edition.build(lang, n) for n in english if n in have]


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tools.runner", description=__doc__.splitlines()[0])
    parser.add_argument("names", nargs="*", help="notebook names or paths (default: every notebook)")
    parser.add_argument("--edition", choices=("en", *edition.EDITIONS, "all"), default="en",
                        help="en: the English notebooks (default); zh: build the Chinese ones, then run them; "
                             "all: both")
    args = parser.parse_args(argv)
    try:
        paths = notebook_paths(args.names) if args.edition in ("en", "all") else []
        for lang in edition.EDITIONS if args.edition == "all" else [] if args.edition == "en" else [args.edition]:
            paths += edition_paths(lang, args.names)
    except (FileNotFoundError, ValueError) as e:
        print(e, file=sys.stderr)
        return 2
    too_big = []
    show = progress.show_progress()
    with progress.bar(total=len(paths), desc="notebooks", unit="notebook", show=show) as notebooks:
        for p in paths:
            notebooks.set_description(p.stem)
            seconds, size = run(p, show=show)
            notebooks.update()
            label = f"{p.parent.name}/{p.name}" if p.parent.parent == NOTEBOOKS else p.name  # zh/03_kv_cache.ipynb
            progress.write(f"{label:40s} {seconds:6.1f} s  {size / 1e3:7.1f} kB", file=sys.stdout)
            if size > MAX_BYTES:
                too_big.append(label)
    if too_big:
        print(f"over {MAX_BYTES:,} bytes: {too_big}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())

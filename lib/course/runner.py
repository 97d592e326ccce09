"""Regenerate the stored outputs of the notebooks: ``python -m lib.course.runner [NAME ...]`` (``make notebooks``).

Each notebook runs top to bottom in a fresh kernel of this Python, in ``notebooks/``, and is written back
with its outputs, minus what must not be committed: saved widget state (``metadata.widgets``, megabytes of
JavaScript for a FigureWidget) and per-cell timing metadata. Prints each notebook's run time and size.
"""
from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

from . import notebook_paths

MAX_BYTES = 1_000_000


def clean(nb) -> None:
    """Drop widget state and volatile metadata in place."""
    nb.metadata.pop("widgets", None)
    for cell in nb.cells:
        cell.metadata.pop("execution", None)
        cell.metadata.pop("ExecuteTime", None)


def run(path: Path, timeout: int = 600) -> tuple[float, int]:
    import nbformat
    from nbclient import NotebookClient

    nb = nbformat.read(path, as_version=4)
    t0 = time.perf_counter()
    client = NotebookClient(nb, timeout=timeout, kernel_name="python3", resources={"metadata": {"path": str(path.parent)}},
                            record_timing=False)
    client.execute()
    seconds = time.perf_counter() - t0
    clean(nb)
    nbformat.write(nb, path)
    return seconds, path.stat().st_size


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="python -m lib.course.runner", description=__doc__.splitlines()[0])
    parser.add_argument("names", nargs="*", help="notebook names or paths (default: every notebook)")
    args = parser.parse_args(argv)
    try:
        paths = notebook_paths(args.names)
    except FileNotFoundError as e:
        print(e, file=sys.stderr)
        return 2
    too_big = []
    for p in paths:
        seconds, size = run(p)
        print(f"{p.name:40s} {seconds:6.1f} s  {size / 1e3:7.1f} kB")
        if size > MAX_BYTES:
            too_big.append(p.name)
    if too_big:
        print(f"over {MAX_BYTES:,} bytes: {too_big}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""Start one student's server: give the student their own copy of the notebooks, then run jupyterhub-singleuser.

    python deploy/jupyterhub/singleuser.py [jupyterhub-singleuser options]

The hub (``jupyterhub_config.py``) and the Kubernetes image (``Dockerfile``, ``values.yaml``) both start every
student's server through this file, as the student, in the student's home folder. The course itself (``lib``, its
weights, the kernel) is installed once for everybody; only the notebooks are copied, into ``~/kv-cache-lab/``
(``00_index.ipynb`` … and the Chinese edition in ``zh/``), so each student runs and edits their own. A notebook
already there is never overwritten (a student's work survives a restart and a course update); a notebook the
course gained since is added. ``KVLAB_NOTEBOOKS`` names the course's notebooks folder (default: the checkout's).
"""
from __future__ import annotations

import os
import shutil
import sys
from pathlib import Path

from kvlab_hub import FOLDER, ROOT  # beside this file: the student's folder, the checkout
EDITIONS = ("", "zh")  # the English notebooks, then the Chinese edition's subfolder


def copy_course(source: Path, target: Path) -> list[str]:
    """Copy every notebook (and the glossary) of both editions from ``source`` into ``target`` unless a file of
    that name is already there; returns what was copied."""
    copied = []
    for sub in EDITIONS:
        src, dst = source / sub, target / sub
        if not src.is_dir():
            continue
        dst.mkdir(parents=True, exist_ok=True)
        for path in sorted([*src.glob("[0-9][0-9]_*.ipynb"), *src.glob("GLOSSARY.md")]):
            if not (dst / path.name).exists():
                shutil.copyfile(path, dst / path.name)
                copied.append(f"{sub}/{path.name}".lstrip("/"))
    return copied


def main(argv: list[str]) -> None:
    source = Path(os.environ.get("KVLAB_NOTEBOOKS", ROOT / "notebooks"))
    home = Path(os.environ.get("HOME") or Path.cwd())
    copied = copy_course(source, home / FOLDER)
    print(f"kv-cache-lab: {len(copied)} notebook file(s) copied into {home / FOLDER}", file=sys.stderr)
    os.chdir(home)
    command = shutil.which("jupyterhub-singleuser", path=str(Path(sys.executable).parent)) or "jupyterhub-singleuser"
    os.execvp(command, [command, *argv])


if __name__ == "__main__":
    main(sys.argv[1:])

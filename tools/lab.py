"""JupyterLab for the course: ``python -m tools.lab [PATH] [--port N]`` (``make lab``).

The project's own JupyterLab settings live in ``tools/lab_settings/`` (``overrides.json``: JupyterLab's
defaults for this project): no "Would you like to get notified about official Jupyter news?" prompt, no
update check, and widget messages on the kernel's main shell (``commsOverSubshells: disabled``). JupyterLab 4.4+
otherwise sends them to a kernel subshell, a second thread of ipykernel 7, where a widget's callback (which re-runs
the model and redraws matplotlib figures) would run at the same time as the learner's cell on the same objects;
neither is made for that, and VS Code, Voila and the classroom view run callbacks on the main shell, one at a time. They are handed to JupyterLab as its application settings folder (``--LabApp.app_settings_dir``),
so nothing in the user's own ``~/.jupyter`` is read for them or written. The browser test starts its server
with the same ``options()``.
"""
from __future__ import annotations

import argparse
import os
import subprocess
import sys
from pathlib import Path

from . import NOTEBOOKS, ROOT

SETTINGS = Path(__file__).resolve().with_name("lab_settings")
DEFAULT_PORT = 8888


def options(settings: Path = SETTINGS) -> list[str]:
    """The JupyterLab options every course server uses: the project's settings folder, no news, no update check."""
    if not (Path(settings) / "overrides.json").is_file():
        raise FileNotFoundError(f"{settings} has no overrides.json: the project's JupyterLab settings are missing")
    return [f"--LabApp.app_settings_dir={settings}", "--LabApp.news_url=None",
            "--LabApp.check_for_updates_class=jupyterlab.NeverCheckForUpdate"]


def command(target: Path | str = NOTEBOOKS / "00_index.ipynb", port: int = DEFAULT_PORT,
            open_browser: bool = True) -> list[str]:
    """The command line of ``make lab``: JupyterLab on 127.0.0.1:port opening ``target``."""
    argv = [sys.executable, "-m", "jupyterlab", str(target), "--ServerApp.ip=127.0.0.1", f"--ServerApp.port={port}",
            *options()]
    if not open_browser:
        argv.append("--no-browser")
    if hasattr(os, "geteuid") and os.geteuid() == 0:
        argv.append("--allow-root")
    return argv


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tools.lab", description=__doc__.splitlines()[0])
    parser.add_argument("target", nargs="?", default=str(NOTEBOOKS / "00_index.ipynb"),
                        help="what to open (default: notebooks/00_index.ipynb)")
    parser.add_argument("--port", type=int, default=DEFAULT_PORT, help=f"port on 127.0.0.1 (default {DEFAULT_PORT})")
    parser.add_argument("--no-browser", action="store_true", help="do not open a browser")
    args = parser.parse_args(argv)
    try:
        return subprocess.call(command(args.target, args.port, not args.no_browser), cwd=ROOT)
    except KeyboardInterrupt:
        return 0


if __name__ == "__main__":
    sys.exit(main())

"""JupyterLab for the course, opened on the map of the learner's own copy of the notebooks.

    python -m tools.lab [notebooks/00_index.ipynb | notebooks/zh/00_index.ipynb] [--port N]   (make lab, make lab-zh)
    python -m tools.lab --fresh NAME [--edition zh]                                           (make fresh NB=NAME)
    python -m tools.lab --prepare                 only the working copy (Binder's postBuild, the devcontainer)

**The working copy.** The committed notebooks (``notebooks/``, ``notebooks/zh/``) stay as they are: nbval, the site
and ``git pull`` read them. JupyterLab opens a copy in ``workspace/`` (git-ignored): the first run copies every
notebook of both editions and the glossaries; later runs keep the learner's copies and add what the course gained
since (a copy the learner never changed is brought up to date; ``workspace/.copies.json`` records what was copied).
``--fresh NAME`` puts back the course's version of one notebook, keeping the learner's in ``workspace/.old/``.

**The map's URL.** The server starts with its own token and ``default_url`` at the map, so the one URL printed (and
opened in a browser) is ``http://127.0.0.1:PORT/lab/tree/00_index.ipynb?token=...`` (``zh/00_index.ipynb`` for the
Chinese edition), also on a remote or headless machine. Jupyter's own log is kept to warnings.

**One kernel.** ``tools/lab_settings/kernels/kv-cache-lab`` is the course's kernel, "Python (KV Cache Lab)": the
server's own Python (the checkout's ``.venv``), found through ``JUPYTER_PATH``, the only kernel offered and the
default; every notebook names it in its metadata. It logs errors only: ipykernel 7 warns at every start that its
messages go over TCP unencrypted (they stay on 127.0.0.1; local sockets are no way out: their paths are limited to
107 characters, which a deep runtime folder exceeds). The copies in ``workspace/`` are signed as trusted in
``workspace/.trust/`` (no "notebook is not trusted" warning; nothing is written to ``~/.local``).

**Settings.** ``tools/lab_settings/overrides.json`` is handed to JupyterLab as its application settings folder
(``--LabApp.app_settings_dir``), so nothing in the user's ``~/.jupyter`` is read for them or written: no "Would
you like to get notified about official Jupyter news?" prompt, no update check, and widget messages on the kernel's
main shell (``commsOverSubshells: disabled``). JupyterLab 4.4+ otherwise sends them to a kernel subshell, a second
thread of ipykernel 7, where a widget's callback (which re-runs the model and redraws matplotlib figures) would run
at the same time as the learner's cell on the same objects; VS Code, Voila and the classroom view run callbacks on
the main shell, one at a time. The browser test starts its server with the same ``options()`` and
``kernel_options()``.
"""
from __future__ import annotations

import argparse
import hashlib
import json
import os
import secrets
import shutil
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

from . import NOTEBOOKS, ROOT

SETTINGS = Path(__file__).resolve().with_name("lab_settings")
KERNEL = "kv-cache-lab"  # tools/lab_settings/kernels/kv-cache-lab/kernel.json: "Python (KV Cache Lab)"
WORKSPACE = ROOT / "workspace"
EDITIONS = {"en": "", "zh": "zh"}  # edition -> its folder under notebooks/ and workspace/
DEFAULT_PORT = 8888
COPIES = ".copies.json"  # in the workspace: the sha256 of every file as it was copied from the course


def options(settings: Path = SETTINGS) -> list[str]:
    """The JupyterLab options every course server uses: the project's settings folder, no news, no update check."""
    if not (Path(settings) / "overrides.json").is_file():
        raise FileNotFoundError(f"{settings} has no overrides.json: the project's JupyterLab settings are missing")
    return [f"--LabApp.app_settings_dir={settings}", "--LabApp.news_url=None",
            "--LabApp.check_for_updates_class=jupyterlab.NeverCheckForUpdate"]


def kernel_options() -> list[str]:
    """Only the course's kernel is offered, and it is the default (with ``server_env``, which makes it findable)."""
    return [f"--MultiKernelManager.default_kernel_name={KERNEL}", f"--KernelSpecManager.allowed_kernelspecs={KERNEL}",
            "--KernelSpecManager.ensure_native_kernel=False"]


def server_env(env: dict | None = None) -> dict:
    """``env`` (default: this process's) with ``tools/lab_settings`` first on ``JUPYTER_PATH`` (its ``kernels/``
    holds the course's kernel) and ``tools/lab_settings/config`` on ``JUPYTER_CONFIG_PATH`` (its
    ``labconfig/page_config.json`` hides Voila's preview button: the classroom view is ``make classroom``)."""
    env = dict(os.environ if env is None else env)
    for key, folder in (("JUPYTER_PATH", SETTINGS), ("JUPYTER_CONFIG_PATH", SETTINGS / "config")):
        env[key] = os.pathsep.join(filter(None, [str(folder), env.get(key)]))
    return env


def edition_of(target: Path | str) -> str:
    """``notebooks/00_index.ipynb`` -> "en", ``notebooks/zh/00_index.ipynb`` -> "zh" (the map of each edition)."""
    path = Path(target).resolve()
    for edition, sub in EDITIONS.items():
        if path == (NOTEBOOKS / sub / "00_index.ipynb").resolve():
            return edition
    raise ValueError(f"{target} is not a map of the course: open notebooks/00_index.ipynb or "
                     f"notebooks/zh/00_index.ipynb (the other notebooks are linked from it)")


def map_url(port: int, token: str, edition: str = "en") -> str:
    """The URL of the edition's map in the working copy, with the token: what ``make lab`` prints and opens."""
    path = "/".join(filter(None, [EDITIONS[edition], "00_index.ipynb"]))
    return f"http://127.0.0.1:{port}/lab/tree/{path}?token={token}"


def _sha(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def course_files(source: Path = NOTEBOOKS) -> list[str]:
    """Every notebook and glossary of both editions, relative to ``source`` (``03_kv_cache.ipynb``, ``zh/...``)."""
    found = []
    for sub in EDITIONS.values():
        folder = source / sub
        found += [p.relative_to(source).as_posix() for p in sorted(
            [*folder.glob("[0-9][0-9]_*.ipynb"), *folder.glob("GLOSSARY.md")])]
    return found


def prepare_workspace(source: Path = NOTEBOOKS, target: Path = WORKSPACE) -> dict:
    """Copy the course into ``target``: files not there yet, and copies the learner never changed whose course
    version did change. A file the learner changed is never touched. Returns {"copied": [...], "updated": [...],
    "kept": [...]} (relative paths)."""
    record_path = target / COPIES
    record = json.loads(record_path.read_text()) if record_path.is_file() else {}
    done = {"copied": [], "updated": [], "kept": []}
    for name in course_files(source):
        src, dst = source / name, target / name
        if dst.exists():
            if record.get(name) != _sha(dst):  # the learner's own (changed, or there before us)
                done["kept"].append(name)
                continue
            if record[name] == _sha(src):
                continue
            done["updated"].append(name)
        else:
            done["copied"].append(name)
        dst.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(src, dst)
        record[name] = _sha(dst)
    record_path.write_text(json.dumps(record, indent=1, sort_keys=True) + "\n")
    trust(target, done["copied"] + done["updated"])
    return done


def fresh(name: str, edition: str = "en", source: Path = NOTEBOOKS, target: Path = WORKSPACE) -> Path | None:
    """Put the course's version of notebook ``name`` (``03_kv_cache`` or ``03_kv_cache.ipynb``) back into the
    working copy; the learner's version moves to ``target/.old/`` (returned), or None when there was none or it was
    the course's own."""
    if edition not in EDITIONS:
        raise ValueError(f"edition must be one of {', '.join(EDITIONS)}, not {edition!r}")
    file = Path(name).name if name.endswith(".ipynb") else f"{name}.ipynb"
    rel = "/".join(filter(None, [EDITIONS[edition], file]))
    if not (source / rel).is_file():
        known = ", ".join(Path(n).stem for n in course_files(source) if n.endswith(".ipynb") and "/" not in n)
        raise FileNotFoundError(f"no notebook {rel} in the course; the notebooks are: {known}")
    old = None
    if (target / rel).exists() and _sha(target / rel) != _sha(source / rel):  # nothing to keep if it is the course's
        old = target / ".old" / f"{rel[:-6]}-{time.strftime('%Y%m%d-%H%M%S')}.ipynb"
        old.parent.mkdir(parents=True, exist_ok=True)
        shutil.move(target / rel, old)
    (target / rel).parent.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(source / rel, target / rel)
    record_path = target / COPIES
    record = json.loads(record_path.read_text()) if record_path.is_file() else {}
    record[rel] = _sha(target / rel)
    record_path.write_text(json.dumps(record, indent=1, sort_keys=True) + "\n")
    trust(target, [rel])
    return old


def notary_options(target: Path = WORKSPACE) -> list[str]:
    """Where the server keeps notebook signatures: in the working copy (``.trust/``), not in ``~/.local``."""
    return [f"--NotebookNotary.data_dir={target / '.trust'}"]


def trust(target: Path, names: list[str]) -> None:
    """Sign the course's own notebooks among ``names`` as trusted, in ``target/.trust/``."""
    import nbformat
    from nbformat.sign import NotebookNotary

    (target / ".trust").mkdir(parents=True, exist_ok=True)
    notary = NotebookNotary(data_dir=str(target / ".trust"))
    for name in names:
        if name.endswith(".ipynb"):
            notary.sign(nbformat.read(target / name, as_version=4))


def free_port(first: int, tries: int = 20) -> int:
    """The first port from ``first`` on 127.0.0.1 nothing listens on."""
    for port in range(first, first + tries):
        with socket.socket() as s:
            try:
                s.bind(("127.0.0.1", port))
                return port
            except OSError:
                continue
    raise OSError(f"ports {first}-{first + tries - 1} on 127.0.0.1 are all busy: pick another with --port")


def command(target: Path | str = NOTEBOOKS / "00_index.ipynb", port: int = DEFAULT_PORT,
            open_browser: bool = True, workspace: Path = WORKSPACE) -> list[str]:
    """The command line of ``make lab``: JupyterLab on 127.0.0.1:port serving the working copy, opening the map
    of ``target``'s edition, with only the course's kernel. Start it with ``server_env()`` and the token in
    ``JUPYTER_TOKEN``."""
    edition = edition_of(target)
    argv = [sys.executable, "-m", "jupyterlab", f"--ServerApp.root_dir={workspace}",
            f"--LabApp.default_url=/lab/tree/{'/'.join(filter(None, [EDITIONS[edition], '00_index.ipynb']))}",
            "--ServerApp.ip=127.0.0.1", f"--ServerApp.port={port}", "--ServerApp.port_retries=0",
            "--ServerApp.log_level=WARN", "--LabApp.log_level=WARN", "--LabApp.extension_manager=readonly",
            # Voila's server extension is for make classroom, not here: importing it costs 3 s and turns on a
            # deprecation warning of jupyter_server's start-up ("ServerApp.token config is deprecated").
            "--ServerApp.jpserver_extensions=voila.server_extension=False",
            *options(), *kernel_options(), *notary_options(workspace)]
    argv.append("--ServerApp.open_browser=True" if open_browser else "--no-browser")
    if hasattr(os, "geteuid") and os.geteuid() == 0:
        argv.append("--allow-root")
    return argv


def wait_ready(proc: subprocess.Popen, port: int, token: str, timeout: float = 300.0) -> bool:
    """True once the server answers on ``port``; False if it exited first or did not answer within ``timeout``."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline and proc.poll() is None:
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{port}/api/status?token={token}", timeout=5):
                return True
        except OSError:
            time.sleep(0.5)
    return False


def serve(target: Path | str, port: int, open_browser: bool) -> int:
    """Prepare the working copy, start JupyterLab on the map and print its URL; returns the server's exit status."""
    edition = edition_of(target)
    done = prepare_workspace()
    kept = f"; your own copies kept: {len(done['kept'])}" if done["kept"] else ""
    print(f"kv-cache-lab: your working copy is {WORKSPACE.relative_to(ROOT)}/ (git ignores it): "
          f"{len(done['copied'])} copied, {len(done['updated'])} brought up to date{kept}. "
          f"A fresh copy of one notebook: make fresh NB=NN_name", flush=True)
    free = free_port(port)
    if free != port:
        print(f"kv-cache-lab: port {port} is busy; using {free}", flush=True)
    token = secrets.token_hex(24)
    env = server_env()
    env["JUPYTER_TOKEN"] = token  # not on the command line, where other users of the machine could read it
    proc = subprocess.Popen(command(target, free, open_browser), cwd=WORKSPACE, env=env)
    signal.signal(signal.SIGTERM, lambda *_: proc.terminate())  # a stopped make lab stops its server too
    try:
        if wait_ready(proc, free, token):
            print(f"\nkv-cache-lab: the course map is open at\n\n    {map_url(free, token, edition)}\n\n"
                  "(Ctrl-C twice stops JupyterLab; your notebooks stay in workspace/)\n", flush=True)
        return proc.wait()
    except KeyboardInterrupt:
        proc.wait()
        return 0


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tools.lab", description=__doc__.splitlines()[0])
    parser.add_argument("target", nargs="?", default=str(NOTEBOOKS / "00_index.ipynb"),
                        help="the map of the edition to open (default: notebooks/00_index.ipynb; "
                             "notebooks/zh/00_index.ipynb for the Chinese edition)")
    parser.add_argument("--port", type=int, default=DEFAULT_PORT, help=f"port on 127.0.0.1 (default {DEFAULT_PORT}; "
                                                                       "the next free one if it is busy)")
    parser.add_argument("--no-browser", action="store_true", help="do not open a browser")
    parser.add_argument("--fresh", metavar="NAME", help="put the course's version of one notebook back into "
                                                        "workspace/ (yours moves to workspace/.old/), then exit")
    parser.add_argument("--edition", choices=sorted(EDITIONS), default="en", help="with --fresh: which edition")
    parser.add_argument("--prepare", action="store_true", help="only copy the course into workspace/, then exit "
                                                               "(Binder's postBuild, the devcontainer)")
    args = parser.parse_args(argv)
    try:
        if args.prepare:
            done = prepare_workspace()
            print(f"kv-cache-lab: workspace/ ready ({len(done['copied'])} copied, {len(done['updated'])} brought "
                  f"up to date, {len(done['kept'])} of yours kept)")
            return 0
        if args.fresh:
            old = fresh(args.fresh, args.edition)
            print(f"kv-cache-lab: a fresh copy of {args.fresh} is in workspace/"
                  + (f"; yours is kept as {old.relative_to(ROOT)}" if old else ""))
            return 0
        return serve(args.target, args.port, not args.no_browser)
    except (ValueError, FileNotFoundError, OSError) as e:
        print(f"kv-cache-lab: {e}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())

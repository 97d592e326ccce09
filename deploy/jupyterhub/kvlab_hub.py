"""What every student's server gets, on one machine (``jupyterhub_config.py``) and on Kubernetes (``Dockerfile``,
``values.yaml``): the course's one kernel and the options of its server.

    python deploy/jupyterhub/kvlab_hub.py kernel SHARE     # write the kernel into SHARE/kernels/ (the image does)
    python deploy/jupyterhub/kvlab_hub.py args [ROOT]      # the server options, as values.yaml lists them

``tests/test_deploy.py`` checks that ``values.yaml`` says what this file says.
"""
from __future__ import annotations

import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]  # the checkout: deploy/jupyterhub/ -> .
KERNEL = "kv-cache-lab"
KERNEL_DISPLAY = "Python (KV Cache Lab)"
FOLDER = "kv-cache-lab"  # the student's copy of the notebooks, in their home (singleuser.py)
MAPS = {"en": f"{FOLDER}/00_index.ipynb", "zh": f"{FOLDER}/zh/00_index.ipynb"}  # the start page per edition
ONE_THREAD = {"OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1", "OPENBLAS_NUM_THREADS": "1"}


def default_url(edition: str = "en") -> str:
    if edition not in MAPS:
        raise ValueError(f"edition must be one of {', '.join(MAPS)}, got {edition!r}")
    return f"/lab/tree/{MAPS[edition]}"


def kernel_spec(python: Path | str) -> dict:
    """The one kernel every notebook runs in: the course's Python, one thread per maths library (a class shares
    the machine's cores; ``lib.notebook.setup()`` fixes torch at one thread anyway)."""
    return {"argv": [str(python), "-m", "ipykernel_launcher", "-f", "{connection_file}"],
            "display_name": KERNEL_DISPLAY, "language": "python", "metadata": {"debugger": True}, "env": ONE_THREAD}


def write_kernel(share: Path, python: Path | str = sys.executable) -> Path:
    """Write the kernel into ``share``/kernels/kv-cache-lab/ (a Jupyter data folder every student reads)."""
    folder = Path(share) / "kernels" / KERNEL
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "kernel.json").write_text(json.dumps(kernel_spec(python), indent=1) + "\n", encoding="utf-8")
    for path in (folder.parent, folder):
        path.chmod(0o755)
    (folder / "kernel.json").chmod(0o644)
    return folder


def server_args(root: Path | str = ROOT) -> list[str]:
    """The options of every student's server: ``make lab``'s JupyterLab settings (no news prompt, no update check;
    ``tools.lab.options``) and only the course's kernel, which every notebook then opens in."""
    if str(ROOT) not in sys.path:
        sys.path.insert(0, str(ROOT))  # tools/ runs from the checkout; it is not installed
    from tools.lab import SETTINGS, options

    here, there = str(SETTINGS), str(Path(root) / "tools" / "lab_settings")  # this checkout's, the image's
    return [*(o.replace(here, there) for o in options()),
            f"--MultiKernelManager.default_kernel_name={KERNEL}",
            f"--KernelSpecManager.allowed_kernelspecs={KERNEL}",
            "--KernelSpecManager.ensure_native_kernel=False"]


def main(argv: list[str]) -> int:
    if len(argv) == 2 and argv[0] == "kernel":
        print(write_kernel(Path(argv[1])))
    elif argv and argv[0] == "args" and len(argv) <= 2:
        print(json.dumps(server_args(argv[1] if len(argv) == 2 else ROOT), indent=1))
    else:
        print(__doc__, file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

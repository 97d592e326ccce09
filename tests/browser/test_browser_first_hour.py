"""A learner's first hour, as ``make lab`` gives it: a fresh ``git clone`` of this repository, JupyterLab started
there the way ``make lab`` starts it (``python -m tools.lab``, here with ``--no-browser`` on a port of its own), and
the one URL it prints opened in Chromium. That URL must open the map, ``00_index.ipynb`` of the working copy, on
the course's kernel, the only one offered; the map's cells, run and saved there, land in ``workspace/`` and leave
``git status --porcelain`` of the clone empty; and the log ``make lab`` shows holds no warning and no error.

The clone is of the committed HEAD (as CI's fresh clone is); its kernel imports the clone's ``lib``
(``PYTHONPATH``). The server is stopped, with its kernels, by the test.
"""
from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import kvlab_browser as kb

MAP = "00_index.ipynb"
URL_RE = re.compile(r"http://127\.0\.0\.1:(\d+)/lab/tree/00_index\.ipynb\?token=([0-9a-f]+)")
NOISE_RE = re.compile(r"\[[WEC] |Traceback|Error|Warning|warn|not trusted", re.I)
# Not the project's: jupyter_server 2.21's websocket keep-alive (its own pings every 30 s, a pong timeout of 90 s)
# read by tornado 6.5 as its settings, once per kernel connection. Making the timeout equal to the interval, as
# tornado asks, makes jupyter_server close connections whose pong is a little late (tried: it did, under load).
UPSTREAM = ("The websocket_ping_timeout (90000) cannot be longer than the websocket_ping_interval (30000)",)
START_TIMEOUT_S = 300

RUN_MAP_JS = """async () => {
  const app = window.jupyterapp;
  const w = app.shell.currentWidget;
  await w.sessionContext.ready;
  await app.commands.execute('notebook:run-all-cells');
  await app.commands.execute('docmanager:save');
  return w.context.path;
}"""

MAP_STATE_JS = """() => {
  const w = window.jupyterapp && window.jupyterapp.shell.currentWidget;
  if (!w || !w.context || !w.sessionContext || !w.sessionContext.session) return null;
  const k = w.sessionContext.session.kernel;
  return {path: w.context.path, kernel: k ? k.name : null, status: k ? k.status : null,
          display: w.sessionContext.kernelDisplayName};
}"""


def start_make_lab(clone: Path, home: Path, port: int) -> tuple[subprocess.Popen, Path]:
    """``python -m tools.lab --no-browser --port PORT`` in the clone, as ``make lab`` runs it; its output in a log.
    Jupyter's config and settings live in ``home`` (kb.isolated_env); JupyterLab's app is exposed to the page through
    a config file there, so the command line is make lab's own."""
    env = kb.isolated_env(home)
    (home / "config" / "jupyter_server_config.json").write_text(json.dumps(
        {"LabApp": {"expose_app_in_browser": True}}))
    env["PYTHONPATH"] = str(clone)
    log = home / "make-lab.log"
    proc = subprocess.Popen([sys.executable, "-m", "tools.lab", "--no-browser", "--port", str(port)], cwd=clone,
                            env=env, stdout=open(log, "wb"), stderr=subprocess.STDOUT, start_new_session=True)
    return proc, log


def printed_url(proc: subprocess.Popen, log: Path) -> str:
    deadline = time.monotonic() + START_TIMEOUT_S
    while time.monotonic() < deadline:
        m = URL_RE.search(log.read_text(errors="replace"))
        if m:
            return m.group(0)
        assert proc.poll() is None, f"make lab's server exited with {proc.returncode}:\n{log.read_text()}"
        time.sleep(0.5)
    raise TimeoutError(f"make lab printed no URL of the map within {START_TIMEOUT_S} s:\n{log.read_text()}")


def stop(proc: subprocess.Popen):
    """SIGTERM to the whole process group (tools.lab, JupyterLab, its kernels), then SIGKILL if it hangs."""
    if proc.poll() is None:
        os.killpg(proc.pid, signal.SIGTERM)
        try:
            proc.wait(30)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(10)


def test_make_lab_opens_the_map_on_the_course_kernel_and_git_stays_clean(tmp_path, browser, guard):
    clone, home = tmp_path / "kv-cache-lab", tmp_path / "home"
    t0 = time.monotonic()
    subprocess.run(["git", "clone", "-q", str(kb.ROOT), str(clone)], check=True, timeout=300)
    port = kb.free_port()
    proc, log = start_make_lab(clone, home, port)
    try:
        url = printed_url(proc, log)
        assert url.startswith(f"http://127.0.0.1:{port}/lab/tree/{MAP}?token="), url
        token = URL_RE.search(url).group(2)
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/api/kernelspecs?token={token}", timeout=30) as r:
            specs = json.load(r)
        assert specs["default"] == "kv-cache-lab" and list(specs["kernelspecs"]) == ["kv-cache-lab"], specs
        with kb.checked_page(browser, guard, "make lab: the map") as page:
            page.goto(url)
            page.wait_for_function(f"""() => {{ const s = ({MAP_STATE_JS})();
                return s && s.path === '{MAP}' && s.kernel === 'kv-cache-lab' && s.status === 'idle'; }}""",
                                   timeout=START_TIMEOUT_S * 1000)
            print(f"\nfirst hour: git clone to the map, idle on its kernel: {time.monotonic() - t0:.0f} s")
            state = page.evaluate(MAP_STATE_JS)
            assert state["display"] == "Python (KV Cache Lab)", state
            assert page.evaluate(RUN_MAP_JS) == MAP
            page.wait_for_function(f"() => ({MAP_STATE_JS})().status === 'idle'", timeout=300_000)
        ran = json.loads((clone / "workspace" / MAP).read_text(encoding="utf-8"))
        code = [c for c in ran["cells"] if c["cell_type"] == "code"]
        assert code and all(c["execution_count"] for c in code), "the map's cells did not all run and save"
        errors = [o.get("ename") for c in code for o in c["outputs"] if o["output_type"] == "error"]
        assert not errors, f"the map raised {errors} in the working copy"
        status = subprocess.run(["git", "-C", str(clone), "status", "--porcelain"], capture_output=True, text=True,
                                check=True).stdout
        assert status == "", f"running the course changed the clone (git status --porcelain):\n{status}"
        noise = [line for line in log.read_text(errors="replace").splitlines()
                 if NOISE_RE.search(line) and not any(known in line for known in UPSTREAM)]
        assert not noise, "make lab's log is not quiet:\n" + "\n".join(noise)
    finally:
        stop(proc)

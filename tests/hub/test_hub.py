"""A class on one server: JupyterHub with the course's configuration (deploy/jupyterhub/jupyterhub_config.py),
five simulated students, notebook 02 run in each student's own server through the server's REST and websocket
API, and what each student costs in memory.

Loopback only: the hub, its proxy (configurable-http-proxy from the npm registry, ``make hub-deps``) and every
server listen on 127.0.0.1. The dummy authenticator and the simple local-process spawner stand in for a class's
accounts (KVLAB_HUB_AUTH=dummy, KVLAB_HUB_SPAWNER=simple); everything else is the configuration a teacher runs.

Each student logs in through the hub's login form, starts their server from the start form (four pick the
English edition, one the Chinese), and then, with a token of their own, checks that the server opens on the map
of their edition with the course's one kernel, "Python (KV Cache Lab)", starts that kernel and runs
``02_autoregressive_generation.ipynb`` (their own copy, in ``~/kv-cache-lab/``) cell by cell over the kernel's
websocket. Every output must equal the stored one, as strict nbval compares it (PNG images and widget model ids
aside; cells marked ``# NBVAL_IGNORE_OUTPUT`` only must not fail). The five run at the same time. Then each
kernel's resident memory (RSS, and its peak) is read with the models loaded, with the server's, and everything is
stopped. Every wait is bounded (``STEP_S``, ``TOTAL_S``) and every process the test started is ended by its id.
"""
from __future__ import annotations

import asyncio
import html
import json
import os
import re
import secrets
import signal
import socket
import subprocess
import sys
import time
import urllib.parse
import uuid
from http.cookies import SimpleCookie
from pathlib import Path

import pytest

from hub_report import REPORT, capacity

ROOT = Path(__file__).resolve().parents[2]
HUB_DIR = ROOT / "deploy" / "jupyterhub"
NOTEBOOK = "02_autoregressive_generation.ipynb"
STUDENTS = [("student1", "en"), ("student2", "en"), ("student3", "en"), ("student4", "en"), ("student5", "zh")]
STEP_S = 240  # the longest wait for one step (a server to start, one cell to run) on a busy two-core machine
TOTAL_S = 1200  # the whole test
COMPARED = ("text/plain", "text/html", "application/vnd.plotly.v1+json")  # what strict nbval compares
WIDGET = "application/vnd.jupyter.widget-view+json"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def rss(pid: int) -> tuple[int, int]:
    """(resident bytes now, peak resident bytes) of a process, from /proc."""
    fields = dict(line.split(":", 1) for line in Path(f"/proc/{pid}/status").read_text().splitlines() if ":" in line)
    return int(fields["VmRSS"].split()[0]) * 1024, int(fields["VmHWM"].split()[0]) * 1024


def pss(pid: int) -> int:
    """Proportional set size: resident bytes with each shared page (torch's libraries, mapped by every kernel)
    divided among the processes that share it, from /proc/<pid>/smaps_rollup (0 where the kernel lacks it)."""
    try:
        for line in Path(f"/proc/{pid}/smaps_rollup").read_text().splitlines():
            if line.startswith("Pss:"):
                return int(line.split()[1]) * 1024
    except OSError:
        pass
    return 0


def pids_of_user(name: str) -> list[int]:
    """Processes whose environment says they serve JupyterHub user ``name`` (the server and its kernels)."""
    out = []
    for d in Path("/proc").iterdir():
        if d.name.isdigit():
            try:
                if f"JUPYTERHUB_USER={name}".encode() in (d / "environ").read_bytes().split(b"\0"):
                    out.append(int(d.name))
            except OSError:
                continue
    return out


def cmdline(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
    except OSError:
        return ""


# -- outputs as strict nbval compares them --------------------------------------------------------------------

def comparable(outputs: list[dict]) -> list:
    """Outputs reduced to what nbval compares: consecutive streams of one name joined; of rich outputs the mime
    types and the values of COMPARED (not a widget's text, not a PNG's bytes)."""
    out = []
    for o in outputs:
        kind = o["output_type"]
        if kind == "stream":
            text = "".join(o["text"]) if isinstance(o["text"], list) else o["text"]
            if out and out[-1][0] == "stream" and out[-1][1] == o["name"]:
                out[-1] = ("stream", o["name"], out[-1][2] + text)
            else:
                out.append(("stream", o["name"], text))
        elif kind in ("display_data", "execute_result"):
            data = o["data"]
            values = {} if WIDGET in data else {
                k: ("".join(v) if isinstance(v, list) else v) for k, v in data.items() if k in COMPARED}
            out.append((kind, sorted(data), json.dumps(values, sort_keys=True, ensure_ascii=False)))
        elif kind == "error":
            out.append(("error", o["ename"], o["evalue"]))
    return out


# -- a small client: the hub's pages and API, a server's API and a kernel's websocket ---------------------------

class Http:
    def __init__(self, base: str):
        from tornado.httpclient import AsyncHTTPClient

        self.base, self.client, self.cookies = base, AsyncHTTPClient(), SimpleCookie()

    async def fetch(self, path: str, method: str = "GET", body=None, token: str | None = None, form: dict | None = None,
                    follow: bool = False):
        from tornado.httpclient import HTTPClientError, HTTPRequest

        headers = {}
        if token:
            headers["Authorization"] = f"token {token}"
        if self.cookies:
            headers["Cookie"] = "; ".join(f"{k}={m.value}" for k, m in self.cookies.items())
        if form is not None:
            body, headers["Content-Type"] = urllib.parse.urlencode(form), "application/x-www-form-urlencoded"
        elif body is not None and not isinstance(body, (str, bytes)):
            body, headers["Content-Type"] = json.dumps(body), "application/json"
        if method in ("POST", "PUT", "PATCH") and body is None:
            body = ""
        request = HTTPRequest(self.base + path, method=method, headers=headers, body=body, follow_redirects=follow,
                              request_timeout=60, connect_timeout=10)
        try:
            response = await self.client.fetch(request, raise_error=False)
        except HTTPClientError as e:  # pragma: no cover - raise_error=False returns most errors as responses
            response = e.response
        for cookie in response.headers.get_list("Set-Cookie"):
            self.cookies.load(cookie)
        return response


async def wait_until(what: str, check, timeout_s: float = STEP_S, every_s: float = 0.5):
    """Poll ``check()`` (async) until it returns something truthy; bounded in time."""
    t0 = time.monotonic()
    while time.monotonic() - t0 < timeout_s:
        got = await check()
        if got:
            return got
        await asyncio.sleep(every_s)
    raise AssertionError(f"{what}: not within {timeout_s:.0f} s")


def hidden_xsrf(html: str) -> str:
    m = re.search(r'name="_xsrf"\s+value="([^"]+)"', html)
    assert m, "the hub's page has no _xsrf field"
    return m.group(1)


async def run_notebook(ws_url: str, token: str, cells: list[dict]) -> tuple[list, float, int]:
    """Run every code cell over the kernel's websocket (Jupyter messaging 5.3, JSON frames); returns each cell's
    outputs, the seconds taken and the kernel's process id."""
    from tornado.httpclient import HTTPRequest
    from tornado.websocket import websocket_connect

    ws = await asyncio.wait_for(websocket_connect(HTTPRequest(ws_url, headers={"Authorization": f"token {token}"}),
                                                  max_message_size=256 * 2 ** 20), timeout=60)
    session = uuid.uuid4().hex

    async def execute(code: str) -> list[dict]:
        msg_id = uuid.uuid4().hex
        ws.write_message(json.dumps({
            "header": {"msg_id": msg_id, "session": session, "username": "student", "msg_type": "execute_request",
                       "version": "5.3", "date": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())},
            "parent_header": {}, "metadata": {}, "channel": "shell", "buffers": [],
            "content": {"code": code, "silent": False, "store_history": True, "user_expressions": {},
                        "allow_stdin": False, "stop_on_error": True}}))
        outputs, idle, replied = [], False, False
        while not (idle and replied):
            raw = await asyncio.wait_for(ws.read_message(), timeout=STEP_S)
            assert raw is not None, "the kernel's websocket closed"
            msg = json.loads(raw)
            if msg.get("parent_header", {}).get("msg_id") != msg_id:
                continue
            kind, content = msg["msg_type"], msg["content"]
            if msg["channel"] == "shell" and kind == "execute_reply":
                replied = True
            elif kind == "status" and content["execution_state"] == "idle":
                idle = True
            elif kind == "stream":
                outputs.append({"output_type": "stream", "name": content["name"], "text": content["text"]})
            elif kind in ("display_data", "execute_result"):
                outputs.append({"output_type": kind, "data": content["data"]})
            elif kind == "error":
                outputs.append({"output_type": "error", "ename": content["ename"], "evalue": content["evalue"]})
            elif kind == "clear_output":
                outputs.clear()
        return outputs

    t0 = time.monotonic()
    results = [await execute("".join(c["source"])) for c in cells]
    seconds = time.monotonic() - t0
    pid_out = await execute("import os; print(os.getpid())")
    ws.close()
    return results, seconds, int(pid_out[0]["text"].strip())


# -- the hub -----------------------------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def hub(tmp_path_factory):
    """JupyterHub with the course's configuration, on free loopback ports, its state in a temporary folder."""
    proxy = HUB_DIR / "node_modules" / ".bin" / "configurable-http-proxy"
    if not proxy.exists():
        pytest.fail(f"{proxy} is missing: run `make hub-deps` (npm ci in deploy/jupyterhub)")
    tmp = tmp_path_factory.mktemp("hub")
    token = secrets.token_hex(32)
    config = tmp / "test_config.py"
    config.write_text(
        f"load_subconfig({str(HUB_DIR / 'jupyterhub_config.py')!r})\n"
        "c.JupyterHub.services.append({'name': 'kvlab-hub-test', 'api_token': " + repr(token) + "})\n"
        "c.JupyterHub.load_roles.append({'name': 'admin', 'services': ['kvlab-hub-test']})\n"
        "c.JupyterHub.concurrent_spawn_limit = 10\n", encoding="utf-8")
    port = free_port()
    env = {**os.environ, "KVLAB_HUB_STATE": str(tmp / "state"), "KVLAB_HUB_AUTH": "dummy",
           "KVLAB_HUB_SPAWNER": "simple", "KVLAB_HUB_HOMES": str(tmp / "homes"), "KVLAB_HUB_CULL": "0",
           "KVLAB_HUB_IP": "127.0.0.1", "KVLAB_HUB_PORT": str(port), "KVLAB_HUB_API_PORT": str(free_port()),
           "KVLAB_HUB_PROXY_API_PORT": str(free_port()), "KVLAB_HUB_DEVICE": "cpu"}
    env.pop("JUPYTERHUB_API_TOKEN", None)
    log = open(tmp / "jupyterhub.log", "w")
    t0 = time.monotonic()
    proc = subprocess.Popen([sys.executable, "-m", "jupyterhub", "-f", str(config)], cwd=tmp, env=env, stdout=log,
                            stderr=subprocess.STDOUT, start_new_session=True)
    info = {"proc": proc, "url": f"http://127.0.0.1:{port}", "token": token, "log": tmp / "jupyterhub.log",
            "state": tmp / "state", "homes": tmp / "homes", "t0": t0}
    try:
        yield info
    finally:
        stop_hub(info)
        log.close()


def stop_hub(info):
    """End the hub (it stops the proxy and every server it still runs), then anything of ours left, by id."""
    proc = info["proc"]
    if proc.poll() is None:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(timeout=60)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(timeout=30)
    left = [pid for name, _ in STUDENTS for pid in pids_of_user(name)]
    pid_file = info["state"] / "private" / "proxy.pid"
    if pid_file.exists():
        left.append(int(pid_file.read_text().strip() or 0))
    for pid in left:
        try:
            os.kill(pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass
    info["left_running"] = [p for p in left if Path(f"/proc/{p}").exists()]


async def student(http_base: str, admin: str, name: str, edition: str, hub_url: str) -> dict:
    """Log in, start the server from the start form, and get a token of the student's own."""
    web = Http(http_base)
    page = await web.fetch("/hub/login")
    assert page.code == 200, f"{name}: the login page answered {page.code}"
    r = await web.fetch("/hub/login?next=", "POST",
                        form={"username": name, "password": "class", "_xsrf": hidden_xsrf(page.body.decode())})
    assert r.code == 302 and any(k.startswith("jupyterhub-session") or k == "jupyterhub-hub-login"
                                 for k in web.cookies), f"{name}: login failed ({r.code})"
    form = await web.fetch("/hub/spawn")
    assert form.code == 200 and 'name="edition"' in form.body.decode(), f"{name}: no start form ({form.code})"
    t0 = time.monotonic()
    action = re.search(r'<form[^>]*\saction="([^"]+)"', form.body.decode())  # the hub's own ?_xsrf=... URL
    assert action, f"{name}: the start form has no action"
    r = await web.fetch(html.unescape(action.group(1)), "POST", form={"edition": edition})
    assert r.code in (302, 303), f"{name}: the start form answered {r.code}: {r.body[:300]!r}"
    api = Http(http_base)

    async def ready():
        u = json.loads((await api.fetch(f"/hub/api/users/{name}", token=admin)).body)
        s = u.get("servers", {}).get("")
        return s if s and s.get("ready") else None

    server = await wait_until(f"{name}'s server to start", ready)
    started_s = time.monotonic() - t0
    r = await api.fetch(f"/hub/api/users/{name}/tokens", "POST", {"note": "class-hub test", "expires_in": 3600},
                        token=admin)
    assert r.code == 201, f"{name}: no token ({r.code}: {r.body[:200]!r})"
    return {"name": name, "edition": edition, "token": json.loads(r.body)["token"], "server_url": server["url"],
            "start_s": started_s}


async def work(http_base: str, s: dict) -> dict:
    """The student's server: the map of their edition, the one kernel, then notebook 02 run in it."""
    api, name, token = Http(http_base), s["name"], s["token"]
    base = s["server_url"].rstrip("/")  # /user/<name>
    r = await api.fetch(f"{base}/", token=token)
    where = r.headers.get("Location", "").split("?")[0]
    want = "kv-cache-lab/00_index.ipynb" if s["edition"] == "en" else "kv-cache-lab/zh/00_index.ipynb"
    assert r.code in (301, 302) and where.endswith(f"/lab/tree/{want}"), f"{name}: the server opens on {where!r}"
    specs = json.loads((await api.fetch(f"{base}/api/kernelspecs", token=token)).body)
    assert specs["default"] == "kv-cache-lab" and list(specs["kernelspecs"]) == ["kv-cache-lab"], specs
    assert specs["kernelspecs"]["kv-cache-lab"]["spec"]["display_name"] == "Python (KV Cache Lab)"
    path = NOTEBOOK if s["edition"] == "en" else f"zh/{NOTEBOOK}"
    r = await api.fetch(f"{base}/api/contents/kv-cache-lab/{path}?content=1", token=token)
    assert r.code == 200, f"{name}: no copy of {path} in ~/kv-cache-lab ({r.code})"
    nb = json.loads(r.body)["content"]
    listing = json.loads((await api.fetch(f"{base}/api/contents/kv-cache-lab/zh", token=token)).body)
    assert sum(1 for f in listing["content"] if f["name"].endswith(".ipynb")) == 12, "the Chinese edition is missing"
    r = await api.fetch(f"{base}/api/kernels", "POST", {}, token=token)  # the default kernel, as a new notebook does
    assert r.code == 201, f"{name}: kernel not started ({r.code}: {r.body[:200]!r})"
    kernel = json.loads(r.body)
    assert kernel["name"] == "kv-cache-lab"
    ws = http_base.replace("http://", "ws://") + f"{base}/api/kernels/{kernel['id']}/channels"
    cells = [c for c in nb["cells"] if c["cell_type"] == "code"]
    got, seconds, pid = await run_notebook(ws, token, cells)
    problems = []
    for k, (cell, outputs) in enumerate(zip(cells, got)):
        source = "".join(cell["source"])
        if any(o["output_type"] == "error" for o in outputs):
            problems.append(f"cell {k}: {[o for o in outputs if o['output_type'] == 'error']}")
        elif not source.lstrip().startswith("# NBVAL_IGNORE_OUTPUT") and comparable(outputs) != comparable(
                cell["outputs"]):
            problems.append(f"cell {k}: outputs differ from the stored ones:\n  stored {comparable(cell['outputs'])}"
                            f"\n  got    {comparable(outputs)}")
    assert not problems, f"{name} ({path}):\n" + "\n".join(problems)
    kernel_rss, kernel_peak = rss(pid)
    servers = [p for p in pids_of_user(name) if "jupyterhub-singleuser" in cmdline(p)]
    assert len(servers) == 1, f"{name}: server processes {servers}"
    server_rss, _ = rss(servers[0])
    shared_out = pss(pid) + pss(servers[0])  # read while all five kernels are up: shared pages divided by five
    r = await api.fetch(f"{base}/api/kernels/{kernel['id']}", "DELETE", token=token)
    assert r.code == 204, f"{name}: kernel not shut down ({r.code})"
    return {"name": name, "edition": s["edition"], "cells": len(cells), "run_s": round(seconds, 1),
            "server_start_s": round(s["start_s"], 1), "kernel_rss": kernel_rss, "kernel_peak_rss": kernel_peak,
            "server_rss": server_rss, "pss": shared_out}


async def class_session(hub) -> dict:
    base, admin = hub["url"], hub["token"]
    probe = Http(base)

    async def up():
        if hub["proc"].poll() is not None:
            raise AssertionError(f"JupyterHub exited ({hub['proc'].returncode}); see {hub['log']}:\n"
                                 + hub["log"].read_text()[-3000:])
        try:
            r = await probe.fetch("/hub/api/")
        except (ConnectionError, OSError):
            return None
        return r.code == 200

    await wait_until("JupyterHub to answer through its proxy", up, timeout_s=STEP_S, every_s=0.2)
    startup = time.monotonic() - hub["t0"]
    t0 = time.monotonic()
    logged = await asyncio.gather(*(student(base, admin, n, e, base) for n, e in STUDENTS))
    servers_ready = time.monotonic() - t0
    t1 = time.monotonic()
    students = await asyncio.gather(*(work(base, s) for s in logged))
    notebooks = time.monotonic() - t1
    fixed = sum(rss(p)[0] for p in [hub["proc"].pid, *proxy_pids(hub)] if Path(f"/proc/{p}").exists())
    api = Http(base)
    for s in students:  # stop each server, as the teacher's admin page does
        r = await api.fetch(f"/hub/api/users/{s['name']}/server", "DELETE", token=admin)
        assert r.code in (202, 204), f"{s['name']}: server not stopped ({r.code})"

    async def all_stopped():
        for s in students:
            u = json.loads((await api.fetch(f"/hub/api/users/{s['name']}", token=admin)).body)
            if u.get("servers"):
                return False
        return True

    await wait_until("every server to stop", all_stopped)
    return {"startup_s": round(startup, 1), "servers_ready_s": round(servers_ready, 1),
            "notebooks_s": round(notebooks, 1), "fixed_rss": fixed, "students": students}


def proxy_pids(hub) -> list[int]:
    f = hub["state"] / "private" / "proxy.pid"
    return [int(f.read_text().strip())] if f.exists() and f.read_text().strip() else []


def test_a_class_of_five_on_one_hub(hub):
    t0 = time.monotonic()
    result = asyncio.run(asyncio.wait_for(class_session(hub), timeout=TOTAL_S))
    stop_hub(hub)
    assert not hub["left_running"], f"processes still running after the hub stopped: {hub['left_running']}"
    result["capacity"] = capacity(result["students"], result["fixed_rss"])
    result["total_s"] = round(time.monotonic() - hub["t0"], 1)
    REPORT.update(result)
    assert len(result["students"]) == len(STUDENTS)
    assert {s["edition"] for s in result["students"]} == {"en", "zh"}
    for s in result["students"]:  # the models are loaded: more than a bare Python, less than a runaway
        assert 100 * 2 ** 20 < s["kernel_rss"] < 4 * 2 ** 30, s
    # every student had their own copy of the notebooks in their own home
    for name, _ in STUDENTS:
        assert (hub["homes"] / name / "kv-cache-lab" / "zh" / NOTEBOOK).is_file()
    assert time.monotonic() - t0 < TOTAL_S

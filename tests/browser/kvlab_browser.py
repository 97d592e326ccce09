"""Plumbing for the browser tests: servers on 127.0.0.1, the system Chromium, a loopback-only guard.

Playwright for Python drives Debian's ``/usr/bin/chromium`` (``executable_path``); it never downloads a
browser. Every request that is not to 127.0.0.1 / localhost (or a file:, data:, blob: URL) is aborted and
recorded, and Chromium's own resolver maps every other host name to "not found" as a second fence.
"""
from __future__ import annotations

import json
from contextlib import contextmanager
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from pathlib import Path
from urllib.parse import urlparse

from tools import lab as course_lab
from tools.edition import ALL_EDITIONS, edition_dir

ROOT = Path(__file__).resolve().parents[2]
NOTEBOOKS = ROOT / "notebooks"
ARTIFACTS = Path(os.environ.get("KVLAB_ARTIFACTS", ROOT / "test-artifacts"))
SCREENSHOTS = ARTIFACTS / "screenshots"
CHROMIUM = os.environ.get("KVLAB_CHROMIUM", "/usr/bin/chromium")
LOOPBACK = {"127.0.0.1", "localhost", "::1", "[::1]"}
LOCAL_SCHEMES = {"file", "data", "blob", "about", "chrome-error"}
CHROMIUM_ARGS = [
    "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
    "--disable-background-networking", "--disable-component-update", "--disable-sync",
    "--disable-default-apps", "--disable-extensions", "--no-default-browser-check",
    "--host-resolver-rules=MAP * ~NOTFOUND , EXCLUDE localhost , EXCLUDE 127.0.0.1",
]


EDITIONS = ALL_EDITIONS  # English in notebooks/, the Chinese edition in notebooks/zh/


def edition_folder(lang: str = "en") -> Path:
    """Where the notebooks of edition ``lang`` are: notebooks/ for English, notebooks/<lang>/ for another."""
    if lang not in EDITIONS:
        raise ValueError(f"unknown edition {lang!r}; the editions are: {', '.join(EDITIONS)}")
    return NOTEBOOKS if lang == "en" else edition_dir(lang)


def notebook_names(lang: str = "en") -> list[str]:
    """Every committed notebook of edition ``lang``, by name without .ipynb (``NN_topic``)."""
    return sorted(p.stem for p in edition_folder(lang).glob("[0-9][0-9]_*.ipynb"))


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def copy_notebooks(dest: Path) -> Path:
    """A throw-away copy of notebooks/ and of each edition's folder (notebooks/zh/ as dest/zh/): the servers may
    write checkpoints and outputs into it."""
    for lang in EDITIONS:
        folder = dest if lang == "en" else dest / lang
        folder.mkdir(parents=True, exist_ok=True)
        for p in edition_folder(lang).glob("*.ipynb"):
            shutil.copy2(p, folder / p.name)
    return dest


# -- servers ---------------------------------------------------------------------------------------------

class Server:
    """A Jupyter-style server started as a subprocess on 127.0.0.1:port; logs go to ``log``."""

    def __init__(self, argv: list[str], port: int, log: Path, env: dict | None = None, cwd: Path | None = None,
                 ready_path: str = "/"):
        self.argv, self.port, self.log_path, self.ready_path = argv, port, log, ready_path
        self.url = f"http://127.0.0.1:{port}"
        log.parent.mkdir(parents=True, exist_ok=True)
        self._log = open(log, "wb")
        self.proc = subprocess.Popen(argv, stdout=self._log, stderr=subprocess.STDOUT, env=env, cwd=cwd,
                                     start_new_session=True)

    def wait_ready(self, timeout: float = 180.0) -> "Server":
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"{self.argv[:4]} exited with {self.proc.returncode}; log:\n{self.log()}")
            try:
                with urllib.request.urlopen(self.url + self.ready_path, timeout=5) as r:
                    if r.status < 500:
                        return self
            except urllib.error.HTTPError as e:
                if e.code < 500:
                    return self
            except OSError:
                pass
            time.sleep(0.5)
        raise TimeoutError(f"{self.url}{self.ready_path} did not answer within {timeout:.0f} s; log:\n{self.log()}")

    def log(self) -> str:
        self._log.flush()
        return self.log_path.read_text(errors="replace")[-6000:]

    def stop(self):
        if self.proc.poll() is None:
            self.proc.terminate()  # our own child (its own session): SIGTERM, then SIGKILL if it hangs
            try:
                self.proc.wait(20)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(10)
        self._log.close()


def isolated_env(home: Path) -> dict:
    """Environment for a server: Jupyter's config, data, runtime and lab settings in ``home`` (nothing in the
    user's ~/.jupyter is read or written) and the notebook setting that keeps every cell in the page. The news
    prompt is kept away by the project's own settings (``tools.lab.options()``, as ``make lab``), not here."""
    env = dict(os.environ)
    for key, sub in (("JUPYTER_CONFIG_DIR", "config"), ("JUPYTER_RUNTIME_DIR", "runtime"),
                     ("JUPYTERLAB_SETTINGS_DIR", "lab-settings"), ("JUPYTERLAB_WORKSPACES_DIR", "workspaces"),
                     ("IPYTHONDIR", "ipython")):
        env[key] = str(home / sub)
        (home / sub).mkdir(parents=True, exist_ok=True)
    settings = home / "lab-settings"
    _write_json(settings / "@jupyterlab" / "notebook-extension" / "tracker.jupyterlab-settings",
                {"windowingMode": "none"})  # every cell stays in the DOM, so every output can be found
    # The debugger's state probe races the kernel restart and logs a console error; the test needs no debugger.
    _write_json(home / "config" / "labconfig" / "page_config.json",
                {"disabledExtensions": {"@jupyterlab/debugger-extension": True}})
    env["KVLAB_DEVICE"] = "cpu"  # the stored outputs were made on the CPU
    env.pop("JUPYTER_TOKEN", None)
    return env


def _write_json(path: Path, data: dict):
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(data))


def start_lab(root: Path, home: Path) -> Server:
    """JupyterLab on 127.0.0.1 (free port, no token) serving ``root``, the app exposed as window.jupyterapp, with the
    project's JupyterLab settings and only the course's kernel (``tools.lab.options()``, ``kernel_options()`` and
    ``server_env()``, as ``make lab``)."""
    port = free_port()
    argv = [sys.executable, "-m", "jupyterlab", "--no-browser", f"--ServerApp.root_dir={root}",
            "--ServerApp.ip=127.0.0.1", f"--ServerApp.port={port}", "--ServerApp.port_retries=0",
            "--IdentityProvider.token=", "--ServerApp.password=", "--LabApp.expose_app_in_browser=True",
            *course_lab.options(), *course_lab.kernel_options(), "--LabApp.extension_manager=readonly",
            "--ServerApp.open_browser=False",
            "--allow-root",
            "--ServerApp.terminals_enabled=False"]
    return Server(argv, port, ARTIFACTS / "logs" / "jupyterlab.log", env=course_lab.server_env(isolated_env(home)),
                  cwd=root,
                  ready_path="/api/status").wait_ready()


# -- the browser -----------------------------------------------------------------------------------------

@contextmanager
def checked_page(browser, guard, label: str):
    """A new page for one labelled check: what the page logs and requests is recorded under ``label``, and
    once the check is done it must have logged no console error and requested nothing off the machine.
    The page is closed either way."""
    guard.label = label
    page = browser.new_page()
    try:
        yield page
        assert not guard.errors_for(label), f"{label}: console errors:\n" + "\n".join(guard.errors_for(label))
        assert not guard.offsite_for(label), f"{label}: requests off the machine: {guard.offsite_for(label)}"
    finally:
        page.close()


class Guard:
    """Records what a page did that a test must reject: requests off the machine, console errors, page errors.

    ``label`` is what is being tested now (a notebook name); every record carries it."""

    def __init__(self):
        self.label = ""
        self.offsite: list[tuple[str, str]] = []
        self.console: list[tuple[str, str]] = []
        self.subshells: list[str] = []  # the label of each create_subshell_request the page sent to a kernel

    def attach_context(self, context):
        context.route("**/*", self._route)

    def attach_page(self, page):
        page.on("console", lambda m: self.console.append((self.label, f"console.{m.type}: {m.text} "
                                                                      f"@ {m.location.get('url', '')}"))
                if m.type == "error" else None)
        page.on("pageerror", lambda e: self.console.append((self.label, page_error(e))))
        page.on("websocket", self._websocket)

    def _websocket(self, ws):
        if not is_local(ws.url):
            self.offsite.append((self.label, ws.url))
        ws.on("framesent", lambda payload: self.subshells.append(self.label)
              if SUBSHELL_REQUEST in (payload if isinstance(payload, bytes) else payload.encode()) else None)

    def _route(self, route):
        url = route.request.url
        if is_local(url):
            route.continue_()
        else:
            self.offsite.append((self.label, url))
            route.abort("blockedbyclient")

    def errors_for(self, label: str) -> list[str]:
        return [m for lab, m in self.console if lab == label]

    def offsite_for(self, label: str) -> list[str]:
        return [u for lab, u in self.offsite if lab == label]

    def subshells_for(self, label: str) -> int:
        return self.subshells.count(label)


# A kernel message asking for a subshell (JupyterLab sends one per comm target when comms go over subshells):
# the project's settings turn that off (tools/lab_settings/overrides.json), so a page must never send it.
SUBSHELL_REQUEST = b'"create_subshell_request"'


def page_error(e) -> str:
    """An uncaught error of the page, with the top of its stack: the message alone ("removeChild ... not a child")
    does not say which code threw it."""
    stack = [line.strip() for line in (getattr(e, "stack", "") or "").splitlines()[1:6]]
    return f"page error: {e}" + "".join(f"\n      {line}" for line in stack)


def is_local(url: str) -> bool:
    u = urlparse(url)
    if u.scheme in LOCAL_SCHEMES:
        return True
    return u.scheme in ("http", "https", "ws", "wss") and (u.hostname or "") in LOOPBACK


def launch(playwright, guard: Guard, width: int = 1400, height: int = 1000):
    """A fresh persistent Chromium context (its own profile in a temporary folder) with the guard attached."""
    if not os.access(CHROMIUM, os.X_OK):
        raise RuntimeError(f"{CHROMIUM} is missing: run scripts/system-deps.sh (installs Debian's chromium)")
    profile = tempfile.mkdtemp(prefix="kvlab-chromium-")
    context = playwright.chromium.launch_persistent_context(
        profile, executable_path=CHROMIUM, headless=True, args=CHROMIUM_ARGS,
        viewport={"width": width, "height": height}, device_scale_factor=1, service_workers="block")
    context.set_default_timeout(60_000)
    guard.attach_context(context)
    context.on("page", guard.attach_page)
    for page in context.pages:
        guard.attach_page(page)
    context._kvlab_profile = profile
    return context


def close(context):
    profile = getattr(context, "_kvlab_profile", None)
    context.close()
    if profile:
        shutil.rmtree(profile, ignore_errors=True)


TALL_MARGIN_PX = 200  # room for JupyterLab's menu, tab, toolbar and status bars around an output


def screenshot(locator, name: str) -> Path:
    """Screenshot of one element into the screenshots folder; returns the file."""
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    path = SCREENSHOTS / f"{name}.png"
    page, grown = locator.page, None
    box, view = locator.bounding_box(), page.viewport_size
    if box and view and box["height"] + TALL_MARGIN_PX > view["height"]:
        # Taller than what the page's scrolling panel shows (10's request timeline in a 1,000-px window): the shot
        # would hold the window's bars over a cut-off figure. The window grows for this one shot, then goes back.
        grown = view
        page.set_viewport_size({"width": view["width"], "height": int(box["height"]) + TALL_MARGIN_PX})
    try:
        locator.scroll_into_view_if_needed()
        locator.screenshot(path=str(path), animations="disabled")
    finally:
        if grown:
            page.set_viewport_size(grown)
    return path


# -- waiting on the page's promises ------------------------------------------------------------------------

_SLOTS = iter(range(1, 1 << 30))


def settle(page, fn_js: str, arg=None, timeout_ms: int = 60_000, what: str = ""):
    """Call the page function ``fn_js`` with ``arg`` and wait until the promise it returns settles.

    Not ``page.evaluate("async () => await ...")``: V8's inspector holds the promise it awaits for Playwright
    only weakly, and a long wait can end in "Resulting promise was garbage collected" (seen in CI while
    JupyterLab started). Here the promise is kept on ``window`` and its outcome is polled for; a rejection
    comes back as an AssertionError that says what was being waited for."""
    slot = f"__kvlabSettle{next(_SLOTS)}"
    page.evaluate(f"""(arg) => {{
      const s = window.{slot} = {{done: false, error: null}};
      s.promise = Promise.resolve().then(() => ({fn_js})(arg)).then(
        () => {{ s.done = true; }},
        e => {{ s.done = true; s.error = String((e && e.stack) || e); }});
    }}""", arg)
    page.wait_for_function(f"() => !!window.{slot} && window.{slot}.done", timeout=timeout_ms)
    error = page.evaluate(f"() => window.{slot}.error")
    page.evaluate(f"() => {{ delete window.{slot}; }}")
    assert error is None, f"{what or fn_js}: the page's promise was rejected: {error}"


# -- themes and readable text ----------------------------------------------------------------------------

THEMES = {"light": "JupyterLab Light", "dark": "JupyterLab Dark"}  # short name (in file names) -> JupyterLab's

# Every piece of text in the widget HTML under ``el`` (elements with a text node of their own, drawn, not in an
# SVG): its computed colour and the background it is drawn on, both as [r, g, b] after compositing every
# semi-transparent layer (the element's ancestors' backgrounds, down to the page's opaque one).
TEXT_COLOURS_JS = """(el) => {
  const parse = c => { const m = c.match(/rgba?\\(([^)]+)\\)/); if (!m) return null;
    const v = m[1].split(/[ ,\\/]+/).filter(Boolean).map(Number); return [v[0], v[1], v[2], v.length > 3 ? v[3] : 1]; };
  const over = (top, under) => [0, 1, 2].map(i => top[i] * top[3] + under[i] * (1 - top[3]));
  const backdrop = node => {
    const layers = [];
    for (let n = node; n && n.nodeType === 1; n = n.parentElement) {
      const s = getComputedStyle(n);
      if (s.backgroundImage && s.backgroundImage !== 'none') return null;  // a gradient or image: not measurable
      const c = parse(s.backgroundColor);
      if (c && c[3] > 0) { layers.push(c); if (c[3] >= 1) break; }
    }
    let rgb = [255, 255, 255];
    for (const c of layers.reverse()) rgb = over(c, rgb);
    return rgb;
  };
  const res = [];
  el.querySelectorAll('.widget-html-content, .widget-html-content *').forEach(n => {
    if (n.closest('svg')) return;
    const own = Array.from(n.childNodes).filter(t => t.nodeType === 3 && t.textContent.trim()).map(t => t.textContent)
      .join(' ').trim();
    const r = n.getBoundingClientRect(), s = getComputedStyle(n);
    if (!own || r.width === 0 || r.height === 0 || s.visibility === 'hidden') return;
    const bg = backdrop(n), fg = parse(s.color);
    if (!bg || !fg) return;
    res.push({text: own.slice(0, 60), fg: over(fg, bg).map(Math.round), bg: bg.map(Math.round)});
  });
  return res;
}"""


def hex_of(rgb) -> str:
    return "#" + "".join(f"{int(round(c)):02X}" for c in rgb[:3])


def unreadable_text(locator, minimum: float = 4.5) -> list[str]:
    """Text in the widget HTML under ``locator`` whose contrast against its background is below ``minimum``
    (WCAG AA), one line per pair of colours: "colour on background = ratio: N pieces, e.g. 'text', ..."; empty
    when every piece is readable."""
    from lib.widgets.style import contrast_ratio

    bad: dict[tuple, list] = {}
    for t in locator.evaluate(TEXT_COLOURS_JS):
        fg, bg = hex_of(t["fg"]), hex_of(t["bg"])
        if contrast_ratio(fg, bg) < minimum:
            bad.setdefault((fg, bg), []).append(t["text"])
    return [f"{fg} on {bg} = {contrast_ratio(fg, bg):.2f}:1: {len(texts)} pieces, e.g. "
            + ", ".join(repr(x) for x in texts[:4]) for (fg, bg), texts in bad.items()]


def text_pieces(locator) -> int:
    """How many pieces of widget HTML text ``unreadable_text`` measured under ``locator``."""
    return len(locator.evaluate(TEXT_COLOURS_JS))

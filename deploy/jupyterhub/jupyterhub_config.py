"""JupyterHub for a class on one machine: every student logs in and gets their own JupyterLab on the course.

    make hub                     # installs what it needs (make hub-deps), then runs this file
    .venv/bin/jupyterhub -f deploy/jupyterhub/jupyterhub_config.py

The course is installed once, in the checkout's ``.venv`` (``make setup``), for every student: ``lib``, its
weights in ``assets/``, and one kernel, "Python (KV Cache Lab)", which every notebook opens in. Each student's
server starts through ``singleuser.py``, which copies the notebooks of both editions into the student's
``~/kv-cache-lab/`` (never over the student's own copy) and opens the map: ``00_index.ipynb``, or
``zh/00_index.ipynb`` for the Chinese edition, picked on the start form.

Settings, all environment variables (the defaults serve a class whose students have accounts on this machine):

    KVLAB_HUB_IP        address to serve on (127.0.0.1: put it behind your TLS proxy, or 0.0.0.0 with
                        KVLAB_HUB_SSL_CERT and KVLAB_HUB_SSL_KEY)
    KVLAB_HUB_PORT      its port (8000); KVLAB_HUB_API_PORT (8081) and KVLAB_HUB_PROXY_API_PORT (8001) stay
                        on 127.0.0.1
    KVLAB_HUB_AUTH      pam (students' Unix accounts, the default), shared-password (any name and the class
                        password KVLAB_HUB_PASSWORD, at least 8 characters: a workshop), dummy (tests only)
    KVLAB_HUB_SPAWNER   local (each student's server runs as their Unix account: run the hub as root) or simple
                        (every server as the hub's own account, homes under KVLAB_HUB_HOMES: tests and a trial
                        run; no isolation between students)
    KVLAB_HUB_ADMINS    comma-separated user names who may see and stop every server (the teacher)
    KVLAB_HUB_STATE     the hub's own files (deploy/jupyterhub/state/): database, cookie secret, the kernel
    KVLAB_HUB_DEVICE    KVLAB_DEVICE for every kernel (cpu, cuda, ...); unset: each notebook picks the best one
    KVLAB_HUB_CULL      minutes after which an idle server is stopped (60; 0: never; needs
                        jupyterhub-idle-culler, which make hub-deps installs)

``deploy/jupyterhub/README.md`` has the steps, the memory each student needs and JupyterHub on Kubernetes.
"""
import importlib.util
import os
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
from kvlab_hub import ONE_THREAD, ROOT, default_url, server_args, write_kernel  # noqa: E402  (beside this file)

PYTHON = Path(sys.executable)  # the course's .venv: the hub, every student's server and every kernel run in it
ALLOWED_AUTH = ("pam", "shared-password", "dummy")
ALLOWED_SPAWNERS = ("local", "simple")


def env(name, default):
    return os.environ.get(name, default)


def choice(name, default, allowed):
    value = env(name, default)
    if value not in allowed:
        raise ValueError(f"{name}={value!r}: allowed {', '.join(allowed)}")
    return value


STATE = Path(env("KVLAB_HUB_STATE", HERE / "state")).resolve()
PRIVATE, SHARE = STATE / "private", STATE / "share" / "jupyter"  # the hub's secrets; what every student reads
PRIVATE.mkdir(parents=True, exist_ok=True, mode=0o700)
SHARE.mkdir(parents=True, exist_ok=True)
for folder in (STATE, STATE / "share", SHARE):
    folder.chmod(0o755)
PRIVATE.chmod(0o700)
write_kernel(SHARE, PYTHON)  # "Python (KV Cache Lab)", the one kernel every notebook opens in

c = get_config()  # noqa: F821  (JupyterHub's config object)

# -- where it listens: the public port (through configurable-http-proxy), the hub's API and the proxy's API -------
c.JupyterHub.ip = env("KVLAB_HUB_IP", "127.0.0.1")
c.JupyterHub.port = int(env("KVLAB_HUB_PORT", "8000"))
c.JupyterHub.hub_ip = "127.0.0.1"
c.JupyterHub.hub_port = int(env("KVLAB_HUB_API_PORT", "8081"))
c.ConfigurableHTTPProxy.api_url = f"http://127.0.0.1:{int(env('KVLAB_HUB_PROXY_API_PORT', '8001'))}"
proxy = HERE / "node_modules" / ".bin" / "configurable-http-proxy"  # npm ci here (make hub-deps)
if proxy.exists():
    c.ConfigurableHTTPProxy.command = [str(proxy)]
c.ConfigurableHTTPProxy.pid_file = str(PRIVATE / "proxy.pid")
if env("KVLAB_HUB_SSL_CERT", ""):
    c.JupyterHub.ssl_cert, c.JupyterHub.ssl_key = env("KVLAB_HUB_SSL_CERT", ""), env("KVLAB_HUB_SSL_KEY", "")
c.JupyterHub.db_url = f"sqlite:///{PRIVATE / 'jupyterhub.sqlite'}"
c.JupyterHub.cookie_secret_file = str(PRIVATE / "jupyterhub_cookie_secret")

# -- who may log in ------------------------------------------------------------------------------------------------
auth = choice("KVLAB_HUB_AUTH", "pam", ALLOWED_AUTH)
c.JupyterHub.authenticator_class = auth
if auth == "pam":
    c.Authenticator.allow_all = True  # every account of this machine that PAM accepts
elif auth == "shared-password":
    c.SharedPasswordAuthenticator.user_password = env("KVLAB_HUB_PASSWORD", "")
admins = {name.strip() for name in env("KVLAB_HUB_ADMINS", "").split(",") if name.strip()}
if admins:
    c.Authenticator.admin_users = admins

# -- each student's server ---------------------------------------------------------------------------------------
spawner = choice("KVLAB_HUB_SPAWNER", "local", ALLOWED_SPAWNERS)
c.JupyterHub.spawner_class = spawner
if spawner == "simple":
    homes = Path(env("KVLAB_HUB_HOMES", STATE / "homes")).resolve()
    c.SimpleLocalProcessSpawner.home_dir_template = str(homes / "{username}")
c.Spawner.cmd = [str(PYTHON), str(HERE / "singleuser.py")]  # copies the notebooks, then jupyterhub-singleuser
c.Spawner.notebook_dir = "~"
c.Spawner.default_url = default_url("en")
c.Spawner.args = server_args()  # make lab's JupyterLab settings; only the course's kernel
if spawner == "simple" and hasattr(os, "geteuid") and os.geteuid() == 0:
    c.Spawner.args.append("--allow-root")  # a test run as root (CI): every server runs as the hub's account
c.Spawner.environment = {
    "JUPYTER_PATH": str(SHARE),  # the kernel above
    "KVLAB_NOTEBOOKS": str(ROOT / "notebooks"),  # what singleuser.py copies
    **ONE_THREAD,
    **({"KVLAB_DEVICE": env("KVLAB_HUB_DEVICE", "")} if env("KVLAB_HUB_DEVICE", "") else {}),
}
c.Spawner.start_timeout = 120  # a busy machine starting 30 servers at 9 o'clock
c.Spawner.http_timeout = 120

# The start form: which edition's map the server opens on. The API takes the same choice as user_options
# ({"edition": "zh"}, as the hub test does).
c.Spawner.options_form = """
<label for="kvlab-edition">Notebooks / 笔记本</label>
<select id="kvlab-edition" name="edition" class="form-control">
  <option value="en" selected>English</option>
  <option value="zh">中文</option>
</select>
"""


def options_from_form(formdata):
    return {"edition": formdata.get("edition", ["en"])[0]}


def pre_spawn_hook(spawner):
    spawner.default_url = default_url((spawner.user_options or {}).get("edition", "en"))


c.Spawner.options_from_form = options_from_form
c.Spawner.pre_spawn_hook = pre_spawn_hook

# -- idle servers are stopped, so the machine's memory goes to the students who are working -------------------------
cull_minutes = int(env("KVLAB_HUB_CULL", "60"))
if cull_minutes > 0 and importlib.util.find_spec("jupyterhub_idle_culler"):
    c.JupyterHub.load_roles = [{"name": "idle-culler", "services": ["idle-culler"],
                                "scopes": ["list:users", "read:users:activity", "read:servers", "delete:servers"]}]
    c.JupyterHub.services = [{"name": "idle-culler",
                              "command": [str(PYTHON), "-m", "jupyterhub_idle_culler", f"--timeout={cull_minutes * 60}"]}]

"""The ways in besides `make lab`, kept true without starting them: the class hub's files (deploy/jupyterhub/), the
CI workflow for forks, the devcontainer, Binder, and make gpu-check off a GPU. The hub itself runs in
tests/hub/ (make test-hub); the workflow's linters in make lint-workflow.
"""
from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[1]
HUB = ROOT / "deploy" / "jupyterhub"
IMAGE_ROOT = "/opt/kv-cache-lab"
sys.path.insert(0, str(HUB))
import kvlab_hub  # noqa: E402
import singleuser  # noqa: E402


def load_config(tmp_path, monkeypatch, **env):
    """Run jupyterhub_config.py as JupyterHub does (a traitlets Config from get_config), with KVLAB_HUB_* set."""
    from traitlets.config import Config

    monkeypatch.setenv("KVLAB_HUB_STATE", str(tmp_path / "state"))
    for k, v in env.items():
        monkeypatch.setenv(k, v)
    c = Config()
    path = HUB / "jupyterhub_config.py"
    exec(compile(path.read_text(encoding="utf-8"), str(path), "exec"), {"get_config": lambda: c, "__file__": str(path)})
    return c


def test_hub_config_for_one_machine(tmp_path, monkeypatch):
    c = load_config(tmp_path, monkeypatch, KVLAB_HUB_AUTH="dummy", KVLAB_HUB_SPAWNER="simple", KVLAB_HUB_CULL="0")
    assert c.JupyterHub.ip == "127.0.0.1" and c.JupyterHub.hub_ip == "127.0.0.1"
    assert c.Spawner.cmd == [sys.executable, str(HUB / "singleuser.py")]
    root = hasattr(os, "geteuid") and os.geteuid() == 0  # the simple spawner lets a test run as root
    assert c.Spawner.args == kvlab_hub.server_args() + (["--allow-root"] if root else [])
    assert c.Spawner.default_url == "/lab/tree/kv-cache-lab/00_index.ipynb"
    assert c.Spawner.environment["KVLAB_NOTEBOOKS"] == str(ROOT / "notebooks")
    spec = json.loads((tmp_path / "state" / "share" / "jupyter" / "kernels" / "kv-cache-lab" / "kernel.json").read_text())
    assert spec["display_name"] == "Python (KV Cache Lab)" and spec["argv"][0] == sys.executable
    assert c.Spawner.environment["JUPYTER_PATH"] == str(tmp_path / "state" / "share" / "jupyter")
    assert oct((tmp_path / "state" / "private").stat().st_mode & 0o777) == "0o700"  # database and cookie secret

    class Spawner:  # what JupyterHub hands the hook: the start form's choice as user_options
        user_options = {"edition": "zh"}
    c.Spawner.pre_spawn_hook(Spawner)
    assert Spawner.default_url == "/lab/tree/kv-cache-lab/zh/00_index.ipynb"
    assert c.Spawner.options_from_form({"edition": ["zh"]}) == {"edition": "zh"}
    Spawner.user_options = {"edition": "fr"}
    with pytest.raises(ValueError, match="edition must be one of en, zh, got 'fr'"):
        c.Spawner.pre_spawn_hook(Spawner)
    assert 'value="zh"' in c.Spawner.options_form and 'value="en" selected' in c.Spawner.options_form


def test_hub_config_refuses_unknown_settings(tmp_path, monkeypatch):
    with pytest.raises(ValueError, match=r"KVLAB_HUB_AUTH='ldap': allowed pam, shared-password, dummy"):
        load_config(tmp_path, monkeypatch, KVLAB_HUB_AUTH="ldap")
    c = load_config(tmp_path, monkeypatch, KVLAB_HUB_AUTH="pam", KVLAB_HUB_SPAWNER="local")  # the class defaults
    assert c.JupyterHub.authenticator_class == "pam" and c.JupyterHub.spawner_class == "local"


def test_student_copy_of_both_editions_never_overwrites(tmp_path):
    target = tmp_path / "home" / "kv-cache-lab"
    copied = singleuser.copy_course(ROOT / "notebooks", target)
    english = sorted(p.name for p in (ROOT / "notebooks").glob("[0-9][0-9]_*.ipynb"))
    assert sorted(p.name for p in target.glob("*.ipynb")) == english
    assert sorted(p.name for p in (target / "zh").glob("*.ipynb")) == english  # the Chinese edition, same names
    assert "GLOSSARY.md" in copied and "zh/GLOSSARY.md" in copied and not (target / "zh" / "src").exists()
    mine = target / "02_autoregressive_generation.ipynb"
    mine.write_text("my own work")
    (target / "03_kv_cache.ipynb").unlink()
    again = singleuser.copy_course(ROOT / "notebooks", target)
    assert again == ["03_kv_cache.ipynb"] and mine.read_text() == "my own work"


def test_helm_values_and_image_say_what_the_hub_says():
    values = yaml.safe_load((HUB / "values.yaml").read_text(encoding="utf-8"))
    assert values["hub"]["config"]["KubeSpawner"]["args"] == kvlab_hub.server_args(IMAGE_ROOT)
    single = values["singleuser"]
    assert single["cmd"] == ["python", f"{IMAGE_ROOT}/deploy/jupyterhub/singleuser.py"]
    assert single["defaultUrl"] == kvlab_hub.default_url("en")
    assert [p["kubespawner_override"]["default_url"] for p in single["profileList"]] == [
        kvlab_hub.default_url("en"), kvlab_hub.default_url("zh")]
    assert single["extraEnv"] == kvlab_hub.ONE_THREAD
    docker = (HUB / "Dockerfile").read_text(encoding="utf-8")
    for line in re.findall(r"^COPY (.+)$", docker, re.M):
        *sources, dest = line.split()
        assert dest.startswith(IMAGE_ROOT)
        for src in sources:
            assert (ROOT / src).exists(), f"Dockerfile copies {src}, which the checkout does not have"
    assert json.loads(re.search(r"^CMD (.+)$", docker, re.M).group(1)) == single["cmd"]
    assert "kvlab_hub.py kernel .venv/share/jupyter" in docker
    pins = dict(re.findall(r"^(jupyterhub)==(\S+)", (HUB / "requirements.txt").read_text(), re.M))
    assert f'JUPYTERHUB=jupyterhub=={pins["jupyterhub"]}' in docker  # the image's and the one machine's hub agree
    package = json.loads((HUB / "package.json").read_text())
    lock = json.loads((HUB / "package-lock.json").read_text())
    assert lock["packages"]["node_modules/configurable-http-proxy"]["version"] == \
        package["dependencies"]["configurable-http-proxy"]


def test_the_workflow_runs_the_readme_test_command_in_debian():
    wf = yaml.safe_load((ROOT / ".github" / "workflows" / "test.yml").read_text(encoding="utf-8"))
    job = wf["jobs"]["test"]
    assert "bookworm" in job["container"]["image"]  # Debian, for the browser test's chromium
    runs = [s.get("run", "") for s in job["steps"]]
    assert "make test" in runs and any("scripts/system-deps.sh" in r for r in runs)
    uses = {s["uses"].split("@")[0]: s for s in job["steps"] if "uses" in s}
    assert all(re.fullmatch(r"[0-9a-f]{40}", s["uses"].split("@")[1]) for s in uses.values()), "pin actions by hash"
    assert uses["actions/cache"]["with"]["path"] == ".venv"
    upload = uses["actions/upload-artifact"]
    assert upload["if"] == "always()" and upload["with"]["path"].split() == [
        "test-artifacts/screenshots/", "test-artifacts/gallery.html"]
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    assert "make test" in readme and ".github/workflows/test.yml" in readme


def test_devcontainer_and_binder():
    text = (ROOT / ".devcontainer" / "devcontainer.json").read_text(encoding="utf-8")
    dev = json.loads("\n".join(line for line in text.splitlines() if not line.strip().startswith("//")))
    assert "python" in dev["image"] and "make setup" in dev["postCreateCommand"]
    assert "ms-toolsai.jupyter" in dev["customizations"]["vscode"]["extensions"]
    pins = dict(re.findall(r"^([A-Za-z0-9_.-]+)==(\S+)", (ROOT / "requirements.txt").read_text(), re.M))
    binder = (ROOT / "binder" / "requirements.txt").read_text()
    assert "--extra-index-url https://download.pytorch.org/whl/cpu" in binder and "torch==2.13.0+cpu" in binder
    for name, version in re.findall(r"^([A-Za-z0-9_.-]+)==(\S+)", binder, re.M):
        if name != "torch":
            assert pins.get(name) == version, f"binder/requirements.txt pins {name}=={version}, requirements.txt " \
                                              f"{pins.get(name)}"
    assert not re.search(r"^(playwright|nbval|pytest)", binder, re.M), "Binder has no browser test"
    assert os.access(ROOT / "binder" / "postBuild", os.X_OK)


def test_gpu_check_without_a_gpu_says_so_and_passes(tmp_path):
    bin_ = tmp_path / "bin"  # a PATH without nvidia-smi, even on a GPU machine
    bin_.mkdir()
    for tool in ("dirname", "grep", "head"):
        (bin_ / tool).symlink_to(shutil.which(tool))
    run = subprocess.run([shutil.which("bash"), str(ROOT / "scripts" / "gpu_check.sh")], env={"PATH": str(bin_)},
                         capture_output=True, text=True, timeout=60)
    assert run.returncode == 0 and "no CUDA device" in run.stdout, run.stdout + run.stderr


def test_slow_and_gpu_targets_stay_out_of_make_test():
    makefile = (ROOT / "Makefile").read_text()
    recipe = re.search(r"^test: setup\n((?:\t.*\n)+)", makefile, re.M).group(1)
    assert "test-hub" not in recipe and "gpu-check" not in recipe and "tests/hub" not in recipe
    for target in ("hub-deps:", "test-hub:", "hub:", "lint-workflow:", "gpu-check:"):
        assert re.search(rf"^{target}", makefile, re.M), target

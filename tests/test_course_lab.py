"""tools.lab (``make lab``, ``make lab-zh``, ``make fresh``): the project's own JupyterLab settings, the course's one
kernel, the map's own URL and the learner's working copy in ``workspace/``. The browser test starts its server with
the same options (``tests/browser/test_browser_first_hour.py`` runs ``make lab``'s command in a fresh clone)."""
from __future__ import annotations

import json
import os
import subprocess

import nbformat
import pytest
from nbformat.sign import NotebookNotary

from tools import NOTEBOOKS, ROOT, lab


def test_the_project_settings_turn_news_update_checks_and_comm_subshells_off():
    overrides = json.loads((lab.SETTINGS / "overrides.json").read_text())
    assert overrides == {"@jupyterlab/apputils-extension:notification": {"fetchNews": "false",
                                                                        "checkForUpdates": False},
                         "@jupyterlab/apputils-extension:kernels-settings": {"commsOverSubshells": "disabled"}}


def test_options_point_jupyterlab_at_the_project_settings_not_the_users():
    opts = lab.options()
    assert f"--LabApp.app_settings_dir={lab.SETTINGS}" in opts
    assert "--LabApp.news_url=None" in opts
    assert not any("~" in o or ".jupyter" in o for o in opts)


def test_command_serves_the_working_copy_on_loopback_and_opens_the_map(tmp_path):
    argv = lab.command(NOTEBOOKS / "00_index.ipynb", 8999, open_browser=False, workspace=tmp_path)
    assert argv[1:3] == ["-m", "jupyterlab"] and f"--ServerApp.root_dir={tmp_path}" in argv
    assert "--ServerApp.ip=127.0.0.1" in argv and "--ServerApp.port=8999" in argv and "--no-browser" in argv
    assert "--ServerApp.port_retries=0" in argv  # the printed URL's port is the one served
    assert "--LabApp.default_url=/lab/tree/00_index.ipynb" in argv
    assert set(lab.options()) <= set(argv) and set(lab.kernel_options()) <= set(argv)
    assert not any("token" in a.lower() for a in argv), "the token goes in JUPYTER_TOKEN, not on the command line"
    zh = lab.command(NOTEBOOKS / "zh" / "00_index.ipynb", 8999, workspace=tmp_path)
    assert "--LabApp.default_url=/lab/tree/zh/00_index.ipynb" in zh and "--no-browser" not in zh
    assert lab.map_url(8999, "abc", "zh") == "http://127.0.0.1:8999/lab/tree/zh/00_index.ipynb?token=abc"


def test_only_a_map_can_be_opened():
    assert lab.edition_of("notebooks/00_index.ipynb") == "en" and lab.edition_of(NOTEBOOKS / "zh/00_index.ipynb") == "zh"
    with pytest.raises(ValueError, match=r"is not a map of the course: open notebooks/00_index\.ipynb or"):
        lab.edition_of(NOTEBOOKS / "03_kv_cache.ipynb")


def test_one_kernel_the_courses_named_by_every_notebook():
    spec = json.loads((lab.SETTINGS / "kernels" / lab.KERNEL / "kernel.json").read_text())
    assert spec["display_name"] == "Python (KV Cache Lab)" and spec["language"] == "python"
    assert spec["argv"][0] == "python"  # jupyter_client runs it with the server's own Python (the .venv)
    assert f"--KernelSpecManager.allowed_kernelspecs={lab.KERNEL}" in lab.kernel_options()
    assert f"--MultiKernelManager.default_kernel_name={lab.KERNEL}" in lab.kernel_options()
    env = lab.server_env({"JUPYTER_PATH": "/elsewhere"})
    assert env["JUPYTER_PATH"].split(os.pathsep) == [str(lab.SETTINGS), "/elsewhere"]
    assert env["JUPYTER_CONFIG_PATH"] == str(lab.SETTINGS / "config")
    wrong = [p.relative_to(ROOT).as_posix() for p in sorted([*NOTEBOOKS.glob("*.ipynb"), *NOTEBOOKS.glob("zh/*.ipynb")])
             if json.loads(p.read_text(encoding="utf-8"))["metadata"]["kernelspec"]
             != {"display_name": "Python (KV Cache Lab)", "language": "python", "name": lab.KERNEL}]
    assert not wrong, f"these notebooks do not name the course's kernel in metadata.kernelspec: {wrong}"


def test_the_runner_and_the_classroom_use_the_courses_kernel_too(tmp_path, monkeypatch):
    """The stored outputs are made on the kernel a learner gets (tools.runner), and Voila finds the same one."""
    from jupyter_client.kernelspec import KernelSpecManager

    from tools import classroom, runner

    seen = {}

    class Client:  # records what tools.runner asks nbclient for, runs nothing
        def __init__(self, nb, **kwargs):
            seen.update(kwargs, jupyter_path=os.environ.get("JUPYTER_PATH", ""), bars=os.environ.get("KVLAB_PROGRESS"))

        def execute(self):
            seen["spec"] = KernelSpecManager().get_kernel_spec(seen["kernel_name"]).display_name

    monkeypatch.setattr("nbclient.NotebookClient", Client)
    monkeypatch.setenv("JUPYTER_PATH", "")
    path = tmp_path / "n.ipynb"
    nbformat.write(nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell("1")]), path)
    runner.run(path)
    assert seen["kernel_name"] == lab.KERNEL and seen["spec"] == "Python (KV Cache Lab)"
    assert str(lab.SETTINGS) in seen["jupyter_path"].split(os.pathsep)
    assert seen["bars"] == "0" and "KVLAB_PROGRESS" not in os.environ  # no bar in stored outputs; given back after
    env = classroom.environment(tmp_path)["JUPYTER_PATH"].split(os.pathsep)
    assert env[:2] == [str(tmp_path), str(lab.SETTINGS)]  # the template first, then the course's kernel


def _course(folder, names=("00_index", "03_kv_cache")):
    for sub in ("", "zh"):
        (folder / sub).mkdir(parents=True, exist_ok=True)
        for name in names:
            nbformat.write(nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(f"print('{sub}{name}')")]),
                           folder / sub / f"{name}.ipynb")
        (folder / sub / "GLOSSARY.md").write_text("glossary\n")
    return folder


def test_the_working_copy_is_copied_once_then_the_learners_is_kept(tmp_path):
    source, work = _course(tmp_path / "notebooks"), tmp_path / "workspace"
    first = lab.prepare_workspace(source, work)
    assert sorted(first["copied"]) == sorted(lab.course_files(source)) and len(first["copied"]) == 6
    assert NotebookNotary(data_dir=str(work / ".trust")).check_signature(nbformat.read(work / "zh/03_kv_cache.ipynb", 4))
    (work / "03_kv_cache.ipynb").write_text((work / "03_kv_cache.ipynb").read_text() + " ")  # the learner's work
    nbformat.write(nbformat.v4.new_notebook(), source / "03_kv_cache.ipynb")  # the course changes both notebooks
    nbformat.write(nbformat.v4.new_notebook(), source / "00_index.ipynb")
    nbformat.write(nbformat.v4.new_notebook(), source / "14_new.ipynb")  # and gains one
    again = lab.prepare_workspace(source, work)
    assert again == {"copied": ["14_new.ipynb"], "updated": ["00_index.ipynb"], "kept": ["03_kv_cache.ipynb"]}
    assert (work / "03_kv_cache.ipynb").read_text().endswith(" ")
    assert lab.prepare_workspace(source, work) == {"copied": [], "updated": [], "kept": ["03_kv_cache.ipynb"]}


def test_fresh_puts_the_courses_notebook_back_and_keeps_the_learners(tmp_path):
    source, work = _course(tmp_path / "notebooks"), tmp_path / "workspace"
    lab.prepare_workspace(source, work)
    (work / "zh/03_kv_cache.ipynb").write_text("mine")
    old = lab.fresh("03_kv_cache", "zh", source, work)
    assert old.parent == work / ".old" / "zh" and old.read_text() == "mine"
    assert (work / "zh/03_kv_cache.ipynb").read_bytes() == (source / "zh/03_kv_cache.ipynb").read_bytes()
    assert lab.prepare_workspace(source, work)["kept"] == []  # the fresh copy counts as the course's again
    assert lab.fresh("03_kv_cache", "zh", source, work) is None  # the course's own copy: nothing to keep
    with pytest.raises(FileNotFoundError, match=r"no notebook 99_x\.ipynb in the course; the notebooks are: 00_index, "):
        lab.fresh("99_x", "en", source, work)
    with pytest.raises(ValueError, match=r"edition must be one of en, zh, not 'fr'"):
        lab.fresh("03_kv_cache", "fr", source, work)


def test_git_ignores_the_working_copy():
    ignored = subprocess.run(["git", "-C", str(ROOT), "check-ignore", "-q", "workspace/03_kv_cache.ipynb"])
    if ignored.returncode == 128:
        pytest.skip("not a git checkout")
    assert ignored.returncode == 0, "workspace/ must be git-ignored (.gitignore)"


def test_options_refuse_a_settings_folder_without_overrides(tmp_path):
    with pytest.raises(FileNotFoundError, match=r"has no overrides\.json: the project's JupyterLab settings"):
        lab.options(tmp_path)

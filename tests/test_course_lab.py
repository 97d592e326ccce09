"""tools.lab (``make lab``): the project's own JupyterLab settings, handed to JupyterLab on its command line.
The browser test starts its server with the same options and checks that no news prompt shows."""
from __future__ import annotations

import json

import pytest

from tools import lab


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


def test_command_serves_on_loopback_with_those_options(tmp_path):
    argv = lab.command(tmp_path / "x.ipynb", 8999, open_browser=False)
    assert argv[1:3] == ["-m", "jupyterlab"] and str(tmp_path / "x.ipynb") in argv
    assert "--ServerApp.ip=127.0.0.1" in argv and "--ServerApp.port=8999" in argv and "--no-browser" in argv
    assert set(lab.options()) <= set(argv)
    assert "--no-browser" not in lab.command(tmp_path, 8999)


def test_options_refuse_a_settings_folder_without_overrides(tmp_path):
    with pytest.raises(FileNotFoundError, match=r"has no overrides\.json: the project's JupyterLab settings"):
        lab.options(tmp_path)

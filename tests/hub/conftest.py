"""The class-hub test starts JupyterHub, five servers and five kernels (a few minutes on two cores), so a plain
``pytest tests`` skips it; it runs with ``make test-hub``, ``pytest tests/hub`` or ``KVLAB_HUB=1``.
"""
from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from hub_report import REPORT, summary_lines
from helpers import opted_in

HERE = Path(__file__).resolve().parent


def _enabled(config) -> bool:
    return opted_in(config, HERE, "KVLAB_HUB")


def pytest_collection_modifyitems(config, items):
    if _enabled(config):
        return
    skip = pytest.mark.skip(reason="class-hub test: run `make test-hub`, `pytest tests/hub` or set KVLAB_HUB=1")
    for item in items:
        if HERE in Path(str(item.path)).resolve().parents:
            item.add_marker(skip)


def pytest_terminal_summary(terminalreporter):
    if not REPORT.get("students"):
        return
    tr = terminalreporter
    tr.section("class hub")
    for line in summary_lines(REPORT):
        tr.write_line(line)
    out = Path(os.environ.get("KVLAB_ARTIFACTS", HERE.parents[1] / "test-artifacts")) / "hub" / "hub.json"
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(REPORT, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")
    tr.write_line(f"written: {out}")

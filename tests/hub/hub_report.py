"""The class-hub test's figures: start-up time, memory per student and how many students a machine holds.

A student costs their single-user server (JupyterLab) plus one kernel with the course's models loaded; the hub and
its proxy are paid once. The table counts resident memory (RSS), which counts the pages every kernel shares
(torch's libraries) once per student, so it errs on the safe side; PSS, shown beside it, divides them. ``capacity`` keeps ``HEADROOM_GIB`` for the operating system and the page cache and a
``MARGIN`` on top of the largest student measured (a second notebook open, a bigger widget run), and rounds down.
"""
from __future__ import annotations

import math

GIB = 1024 ** 3
MACHINES_GB = (8, 16, 64)  # what the capacity table is for (GB as sold: GiB here, the smaller, so it rounds down)
HEADROOM_GIB = 1.5  # the operating system, the page cache, a terminal or two
MARGIN = 1.25  # each student budgeted at 1.25x the largest one measured
REPORT: dict = {}  # the test fills it; tests/hub/conftest.py prints it and writes test-artifacts/hub/hub.json


def per_student_bytes(students: list[dict]) -> int:
    """The largest measured student: server RSS + the peak RSS of their kernel (models loaded, notebook run)."""
    return max(s["server_rss"] + s["kernel_peak_rss"] for s in students)


def capacity(students: list[dict], fixed_bytes: int, machines=MACHINES_GB) -> list[dict]:
    """Students per machine: (memory − headroom − hub and proxy) / (largest student × MARGIN), rounded down."""
    each = per_student_bytes(students) * MARGIN
    rows = []
    for gb in machines:
        free = gb * GIB - HEADROOM_GIB * GIB - fixed_bytes
        rows.append({"machine_gib": gb, "students": max(0, math.floor(free / each)),
                     "budget_per_student_mib": round(each / 2 ** 20)})
    return rows


def mib(n: int) -> str:
    return f"{n / 2 ** 20:,.0f} MiB"


def summary_lines(report: dict) -> list[str]:
    s = report["students"]
    lines = [f"hub start-up (process start to its API answering through the proxy): {report['startup_s']:.1f} s",
             f"hub + proxy: {mib(report['fixed_rss'])} RSS (paid once)",
             f"{len(s)} students, servers started together: ready after {report['servers_ready_s']:.1f} s; "
             f"notebook 02 run in each, together: {report['notebooks_s']:.1f} s",
             "student  edition  server RSS  kernel RSS  kernel peak  both PSS  cells  run s"]
    for r in s:
        lines.append(f"{r['name']:<8} {r['edition']:<8} {mib(r['server_rss']):>10}  {mib(r['kernel_rss']):>10}  "
                     f"{mib(r['kernel_peak_rss']):>11}  {mib(r['pss']):>8}  {r['cells']:>5}  {r['run_s']:5.1f}")
    lines.append(f"per student (largest server + kernel peak): {mib(per_student_bytes(s))}; budgeted x{MARGIN}")
    lines.append("machine   students   (" + f"{HEADROOM_GIB} GiB kept for the system, hub and proxy counted)")
    for row in report["capacity"]:
        lines.append(f"{row['machine_gib']:>4} GB   {row['students']:>8}")
    lines.append(f"whole test: {report['total_s']:.0f} s")
    return lines

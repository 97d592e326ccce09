"""What the browser test expects to see in each notebook, counted from the committed outputs.

``EXPECTED[name]``: ``images`` (PNG outputs: the static tier), ``plotly`` (plotly figures: the step-through
tier) and ``widgets`` (widget views: the live tier). A new or changed notebook needs its row here; print
every row from the committed notebooks with ``.venv/bin/python tests/browser/expected.py``, or rewrite the
table with ``... expected.py --write``.

The browser test drives every widget view by what it shows (tests/browser/drive.py, ``kind_of``):
  player    Step / Back buttons and a Play widget: press Step, Back and Play; the step and the drawing change
  stepper   Step / Back buttons: press them; the step and the drawing change
  heatmap   "layer" and "head" pickers: pick another layer and head; the heat-map's title and cells change
  memory    "model", "dtype" and a "requests" slider: move the slider; the page shows lib's numbers
  tiles     Step / Back and a "tile size" picker (11): step, back, another tile size; the number of steps follows
  ring      Step / Back and "window W" / "sinks" sliders (12): step, back, one sink more; the model runs again
  capacity  "GPU", "gpu_memory_utilization", "KV dtype" (13): move the slider, pick a dtype; the page shows lib's numbers
  slider    anything else: move its sliders one notch until what it draws changes
``MUST_DRIVE``: the widget kinds that must have been found and driven in a notebook (kept by hand).

The Chinese edition (notebooks/zh/NN_name.ipynb) has the English notebook's code cells and outputs, so it has no rows
of its own: the browser test expects the English row for it (and checks the committed Chinese outputs against it),
and MUST_DRIVE holds for it too, its controls found by their Chinese labels (drive.py computes them with lib.i18n).
"""
from __future__ import annotations

import json
import sys
from pathlib import Path

EXPECTED = {
    "00_index": {"images": 3, "plotly": 0, "widgets": 0},
    "01_transformer_decoder": {"images": 3, "plotly": 1, "widgets": 1},
    "02_autoregressive_generation": {"images": 4, "plotly": 1, "widgets": 1},
    "03_kv_cache": {"images": 9, "plotly": 3, "widgets": 3},
    "04_worked_example": {"images": 0, "plotly": 1, "widgets": 1},
    "05_kv_cache_memory": {"images": 3, "plotly": 1, "widgets": 1},
    "06_roofline": {"images": 3, "plotly": 1, "widgets": 1},
    "07_misconceptions": {"images": 1, "plotly": 0, "widgets": 0},
    "08_speculative_decoding": {"images": 2, "plotly": 1, "widgets": 1},
    "09_paged_cache": {"images": 1, "plotly": 1, "widgets": 1},
    "10_serving": {"images": 8, "plotly": 1, "widgets": 1},
    "11_flash_attention": {"images": 3, "plotly": 1, "widgets": 1},
    "12_sliding_window": {"images": 5, "plotly": 1, "widgets": 1},
    "13_vllm_bridge": {"images": 2, "plotly": 1, "widgets": 2},
}

MUST_DRIVE = {
    "02_autoregressive_generation": {"player"},  # GenerationPlayer: Step, Back, Play
    "03_kv_cache": {"heatmap"},  # AttentionExplorer: another layer and head
    "05_kv_cache_memory": {"memory"},  # MemoryExplorer: the requests slider, the KV-cache format, lib's numbers
    "09_paged_cache": {"stepper"},  # BlockPoolWidget: Step, Back
    "12_sliding_window": {"ring"},  # RingStepper: Step, Back, one sink more (in Chinese: 前进 ▶, 汇点数)
    "10_serving": {"dashboard"},  # ServingDashboard: Step, Back, Play, the token budget, a prompt sent
}
# 11's tile stepper ("tiles") and 13's capacity explorer ("capacity") are driven in the English run like every widget
# found; they are not listed above, because a notebook listed here also runs in the Chinese edition in JupyterLab,
# and the browser test's share of `make test` has no room for two more (12's ring stands for the three in Chinese).

# Widgets whose point is two things seen together: in JupyterLab at the browser test's 1,000-px-high window, from
# the top of the first control to the bottom of the widget must fit the notebook panel's visible height
# (the worked example: its step slider and its KV-cache table on one screen).
# The Chinese notebooks opened in JupyterLab, their widgets found and driven by their Chinese labels. Every Chinese
# notebook runs under nbval, every Chinese page of the static site is drawn in the browser (test_browser_site.py),
# and every live widget is driven in Chinese control by control without a browser (tests/test_i18n.py); in
# JupyterLab these two cover every kind of control the Chinese labels name (the memory explorer's slider and
# dropdowns, the ring's Step/Back, layer, head and sinks, the same buttons and labels the player, the heat-map, the
# block stepper and 10's dashboard use), which keeps the browser test within make test's budget.
ZH_IN_LAB = {"05_kv_cache_memory", "12_sliding_window"}

MUST_FIT = {"04_worked_example"}

# Notebooks the classroom-view test opens (the first two that exist).
CLASSROOM = ["02_autoregressive_generation", "05_kv_cache_memory", "03_kv_cache", "01_transformer_decoder"]

PLOTLY = "application/vnd.plotly.v1+json"
WIDGET = "application/vnd.jupyter.widget-view+json"


def output_kind(mimes) -> str | None:
    """"plotly", "widget", "image" or None for one output's mime types (a plotly output that also carries a
    PNG copy, as JupyterLab stores it, is a plotly output)."""
    if PLOTLY in mimes:
        return "plotly"
    if WIDGET in mimes:
        return "widget"
    if "image/png" in mimes:
        return "image"
    return None


def counted(path: Path) -> dict:
    """The row for one committed notebook, counted from its stored outputs."""
    nb = json.loads(path.read_text())
    row = {"images": 0, "plotly": 0, "widgets": 0}
    for cell in nb["cells"]:
        for out in cell.get("outputs", []) if cell["cell_type"] == "code" else []:
            kind = output_kind(out.get("data", {}))
            if kind:
                row[{"image": "images", "plotly": "plotly", "widget": "widgets"}[kind]] += 1
    return row


def table_source(root: Path) -> str:
    rows = "".join(f"    {p.stem!r}: {counted(p)!r},\n" for p in sorted(root.glob("[0-9][0-9]_*.ipynb")))
    return ("EXPECTED = {\n" + rows + "}\n").replace("'", '"')


if __name__ == "__main__":
    here = Path(__file__).resolve()
    table = table_source(here.parents[2] / "notebooks")
    if sys.argv[1:] == ["--write"]:  # replace the table above with the committed notebooks' counts
        text = here.read_text()
        start = text.index("EXPECTED = {\n")
        end = text.index("}\n", start) + 2
        here.write_text(text[:start] + table + text[end:])
        print(f"rewrote EXPECTED in {here}")
    else:
        print(table, end="")

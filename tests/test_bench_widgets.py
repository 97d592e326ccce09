"""tools.bench_widgets (``make bench-widgets``): it finds every control of a live widget, changes each the way the
browser does (a value different from the one before, a click), measures the kernel's time and counts the bytes the
change sends to the page. Not a timed test: it checks what is measured, never how fast."""
import json

import ipywidgets as W
import pytest

from tools import bench_widgets as B


def test_every_control_gets_values_that_each_change_something():
    box = W.VBox([W.IntSlider(value=3, min=0, max=5), W.Dropdown(options=[("a", 1), ("b", 2)], value=1),
                  W.HBox([W.Checkbox(value=False), W.Text(value="<s>ab")]), W.Button(description="Step"),
                  W.Play(), W.IntSlider(disabled=True), W.HTML("not a control"), W.Output()])
    found = B.controls(box)
    assert [type(c).__name__ for c in found] == ["IntSlider", "Dropdown", "Checkbox", "Text", "Button"]
    for c in found[:4]:
        values = B.changes(c, 9)
        assert len(values) == 9 and all(a != b for a, b in zip([c.value] + values, values)), (c, values)
    assert B.changes(found[0], 9)[0] == 4  # one notch first, as a learner drags
    assert B.changes(found[3], 2) == ["<s>abe", "<s>ab"]  # the text edited at its end, and back
    assert B.changes(found[4], 3) == [None] * 3  # a button is clicked
    assert B.changes(W.IntSlider(value=0, min=0, max=0), 5) == []  # nothing to change


def test_the_memory_explorer_measured_control_by_control(tmp_path, capsys):
    out = tmp_path / "rows.json"
    assert B.main(["--only", "memory", "--repeat", "3", "--json", str(out)]) == 0
    rows = json.loads(out.read_text())
    assert [r["control"] for r in rows] == ["Dropdown 'model'", "Dropdown 'weights'", "Dropdown 'KV cache'",
                                            "BoundedIntText 'context'", "IntSlider 'requests'"]
    for r in rows:
        assert r["widget"] == "memory (05)" and r["changes"] == 3
        assert 0 < r["p50_ms"] <= r["p95_ms"] and r["kib_per_change"] > 1  # every change redraws the figure
    assert "IntSlider 'requests'" in capsys.readouterr().out


def test_comms_count_bytes_inside_the_block_only():
    with B.measuring_comms():
        s = W.IntSlider()
        B._Sent.take()
        s.value = 7
        assert B._Sent.take() > 0
    after = W.IntSlider()
    after.value = 3
    assert B._Sent.take() == 0


def test_an_unknown_widget_or_repeat_is_refused_with_what_is_allowed(capsys):
    with pytest.raises(SystemExit):
        B.main(["--only", "no such widget"])
    assert "matches no widget; the widgets: sampling (01, lm), player (02, lm)" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        B.main(["--repeat", "0"])
    assert "--repeat must be at least 1, got 0" in capsys.readouterr().err

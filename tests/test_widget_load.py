"""The load curves of notebook 10 (lib.widgets.load): rate_sweep's points as a table and two panels, each policy
drawn in its own neutral look, the p90 above the mean, the numbers those of the points."""
import statistics

import pytest

from lib import serving
from lib.serving.arrivals import p90
from lib.widgets import load, style


@pytest.fixture(scope="module")
def points(chat):
    model, tok = chat
    return serving.rate_sweep(model, tok, [5, 50], n=6, clock="predicted", max_batch=2,
                              prompts=["人工智能", "深度学习"], max_new_tokens=4)


def test_the_table_has_a_row_per_point_with_its_numbers(points):
    lines = load.load_table(points).splitlines()
    assert len(lines) == 2 + len(points)
    for line, p in zip(lines[2:], points):
        assert line.split()[0] == p.policy and float(line.split()[2]) == p.row()["tokens/s"]


def test_the_figure_draws_each_policy_with_the_points_numbers(points):
    fig = load.plot_load(points, "predicted")
    tput, ttft = fig.axes
    assert [l.get_label() for l in tput.get_lines()] == ["static", "continuous"]
    for line, policy in zip(tput.get_lines(), ("static", "continuous")):
        pts = [p for p in points if p.policy == policy]
        assert list(line.get_ydata()) == [p.tokens_per_second for p in pts]
    mean, top = ttft.get_lines()[:2]
    pts = [p for p in points if p.policy == "static"]
    assert list(mean.get_ydata()) == pytest.approx([1e3 * statistics.mean(p.ttft) for p in pts])
    assert list(top.get_ydata()) == pytest.approx([1e3 * p90(p.ttft) for p in pts])
    assert all(b >= a for a, b in zip(mean.get_ydata(), top.get_ydata()))
    assert ttft.get_yscale() == "log"
    assert not style.legibility(fig)["merged"], "every series stays apart in grey-scale"

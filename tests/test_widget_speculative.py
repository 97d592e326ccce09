"""Speculative-decoding widget: its cells are the run's decisions, its three tiers draw them, its controls work."""
import html
import json
import re

import matplotlib.pyplot as plt
import pytest
import torch

from helpers import drawn_without_missing_glyphs
import lib
from lib.speculative import speculative_generate
from lib.widgets import speculative as S


@pytest.fixture(scope="module")
def models(target_and_draft):
    target, draft, tok = target_and_draft
    torch.manual_seed(0)
    bad = lib.MiniTransformer(draft.config).eval()  # untrained: its proposals are nearly always rejected
    return target, draft, bad, tok


@pytest.fixture(scope="module")
def runs(models):
    target, draft, bad, tok = models
    return {
        "good": speculative_generate(target, draft, tok.encode("<s>the"), 24, k=4, eos_id=tok.eos_id),
        "bad": speculative_generate(target, bad, tok.encode("<s>深"), 10, k=3, temperature=1.0, eos_id=tok.eos_id,
                                    seed=1),
        "eos": speculative_generate(target, draft, tok.encode("<s>深"), 20, k=6, eos_id=tok.eos_id),
        "mixed": speculative_generate(target, bad, tok.encode("<s>"), 12, k=2, temperature=1.0, seed=4),
    }


def test_cells_are_the_runs_decisions(runs, models):
    tok = models[-1]
    for r in runs.values():
        rows = S.round_cells(r, tok)
        assert len(rows) == len(r.rounds)
        for row, rd in zip(rows, r.rounds):
            props, target = row[:-1], row[-1]
            assert [c.token for c in props] == rd.proposed and target.token == rd.target_token
            assert target.slot == r.k and [c.slot for c in props] == list(range(len(rd.proposed)))
            statuses = [c.status for c in props]
            assert statuses.count("accepted") == rd.accepted
            assert statuses.count("rejected") == (1 if rd.kind == "correction" else 0)
            assert statuses == sorted(statuses, key=["accepted", "rejected", "discarded"].index)
            assert target.status in (rd.kind, "cut")
            assert [c.p for c in props] == rd.p and [c.q for c in props] == rd.q
        shown = sum(c.status in ("accepted", "correction", "bonus", "target") for row in rows for c in row)
        assert shown == r.n_new  # every emitted token is one coloured cell


def test_bonus_after_eos_is_marked_unused(runs, models):
    tok = models[-1]
    r = runs["eos"]
    (row,) = S.round_cells(r, tok)
    assert [c.label for c in row[:-1]] == ["度", "学", "习", "<eos>"]
    assert [c.status for c in row] == ["accepted"] * 4 + ["cut"]
    assert S.text_after(r, tok, 1) == "<s>深度学习<eos>" == tok.decode(r.sequences[0])


def test_bad_draft_rounds_are_corrections(runs, models):
    tok = models[-1]
    r = runs["bad"]
    assert tok.decode(r.sequences[0]) == "<s>深度学习<eos>"  # the target's text, whatever the draft said
    rows = S.round_cells(r, tok)
    assert all(row[-1].status == "correction" for row in rows)
    assert [S.text_after(r, tok, i) for i in range(len(rows) + 1)] == \
        ["<s>深", "<s>深度", "<s>深度学", "<s>深度学习", "<s>深度学习<eos>"]


def test_static_figure(runs, models):
    tok = models[-1]
    for name, r in runs.items():
        fig = drawn_without_missing_glyphs(lambda: S.plot_rounds(r, tok))
        ax = fig.axes[0]
        n_cells = sum(len(row) for row in S.round_cells(r, tok))
        assert len(ax.patches) == n_cells
        texts = [t.get_text() for t in ax.texts]
        for row in S.round_cells(r, tok):
            assert all(c.label in texts for c in row)
        assert ax.get_title().startswith(f"k={r.k}, ")
        assert f"{r.target_forwards} target passes (generate: {r.n_new})" in ax.get_title()
        plt.close(fig)


def test_plotly_frames(runs, models):
    tok = models[-1]
    r = runs["mixed"]
    fig = S.rounds_figure(r, tok, title="<s>, k=2")
    rows = S.round_cells(r, tok)
    cells = [c for row in rows for c in row]
    assert len(fig.frames) == len(r.rounds) == len(fig.layout.sliders[0].steps)
    last = fig.frames[-1].data[0]
    assert list(last.marker.color) == [S.COLORS[c.status] for c in cells]
    assert list(last.marker.symbol) == [S.SYMBOLS[c.status] for c in cells]  # the second cue, frame by frame
    assert fig.layout.width is None  # the cell's width
    assert all(s in ("square", "square-x", "square-open", "circle", "star-square") for s in S.SYMBOLS.values())
    first = fig.frames[0].data[0]
    assert [t for t, c in zip(first.text, cells) if c.round > 0] == [""] * sum(c.round > 0 for c in cells)
    assert fig.frames[0].layout.title.text.startswith("&lt;s&gt;, k=2 — round 0: ")
    assert "&lt;s&gt;" in fig.frames[-1].layout.title.text  # <s> escaped, or plotly would strike the text through
    assert fig.frames[-1].layout.title.text == fig.layout.title.text
    again = S.rounds_figure(r, tok, title="<s>, k=2")
    assert json.dumps(fig.to_plotly_json(), default=str) == json.dumps(again.to_plotly_json(), default=str)


def test_html_chips(runs, models):
    tok = models[-1]
    r = runs["eos"]
    h = S.rounds_html(r, tok)
    assert "&lt;s&gt;深度学习&lt;eos&gt;" in h and "<s>" not in h
    assert h.count("display:inline-block;min-width") == 5
    assert "after &lt;eos&gt;, unused" in h
    with pytest.raises(TypeError, match=r"round_cells needs a SpeculativeResult from speculative_generate, got dict"):
        S.round_cells({}, tok)


def test_live_explorer_is_drivable_from_python(models):
    target, draft, _, tok = models
    ex = S.SpeculativeExplorer(target, draft, tok, prompt="<s>the", k=4)
    assert ex.result.k == 4 and tok.decode(ex.result.sequences[0]).startswith("<s>the cat")
    ex.set(k=2)
    expected = speculative_generate(target, draft, tok.encode("<s>the"), 24, k=2, eos_id=tok.eos_id, seed=0)
    assert ex.result.k == 2 and torch.equal(ex.result.sequences, expected.sequences)
    assert [x.proposed for x in ex.result.rounds] == [x.proposed for x in expected.rounds]
    assert ex.html.endswith(S.rounds_html(ex.result, tok)) and S.describe(expected).split(":")[0] in ex.html
    ex.set(temperature=1.0, seed=3)
    same = speculative_generate(target, draft, tok.encode("<s>the"), 24, k=2, temperature=1.0,
                                eos_id=tok.eos_id, seed=3)
    assert torch.equal(ex.result.sequences, same.sequences) and ex.result.sampling["seed"] == 3
    ex.set(prompt="<s>深")
    assert tok.decode(ex.result.sequences[0]) == "<s>深度学习<eos>" and ex.message == ""
    before = ex.result
    ex.set(prompt="<s>€")
    assert ex.result is before and "not in this model's vocabulary: '€'" in ex.message
    assert html.escape("still showing '<s>深'") in ex.html  # shown escaped: <s> is not a tag
    ex.set(prompt="<s>机")
    assert ex.message == "" and tok.decode(ex.result.sequences[0]) == "<s>机器学习<eos>"
    assert ex.last_update_seconds > 0


def test_explorer_rejects_values_its_controls_cannot_show(models):
    target, draft, _, tok = models
    ex = S.SpeculativeExplorer(target, draft, tok, prompt="<s>")
    with pytest.raises(ValueError, match=r"k must be an integer from 1 to 8 \(the explorer's k slider\), got 9"):
        ex.set(k=9)
    with pytest.raises(ValueError, match=r"the explorer's temperature takes one of \[0.0, 0.5, 0.8, 1.0, 1.2, 1.5\], "
                                         r"got 0.7"):
        ex.set(temperature=0.7)
    with pytest.raises(ValueError, match=r"seed must be an integer from 0 to 2147483647, got 'a'"):
        ex.set(seed="a")
    assert ex.result.k == 4  # nothing changed


def test_tokens_per_pass_figure(models):
    from lib.speculative import expected_tokens_per_pass, measure_acceptance
    target, draft, _, tok = models
    rows = measure_acceptance(target, draft, [tok.encode("<s>the kv"), tok.encode("<s>model")], ks=(1, 2, 4),
                              max_new_tokens=16, eos_id=tok.eos_id)
    fig = S.plot_tokens_per_pass(rows)
    ax = fig.axes[0]
    line = [ln for ln in ax.lines if ln.get_label() == "predicted from the measured α"][0]
    assert list(line.get_ydata()) == pytest.approx([expected_tokens_per_pass(r["α"], r["k"]) for r in rows])
    dots = {c.get_label(): c.get_offsets().tolist() for c in ax.collections}
    assert dots["measured, all passes"] == [[r["k"], r["tokens/pass"]] for r in rows]
    assert dots["measured, full rounds"] == [[r["k"], r["tokens/full round"]] for r in rows]
    assert [t.get_text() for t in ax.texts] == [f"α={r['α']:.2f}" for r in rows]
    with pytest.raises(ValueError, match=r"needs the rows of lib.speculative.measure_acceptance \(keys k, α"):
        S.plot_tokens_per_pass([{"k": 1}])
    from lib import i18n
    with i18n.speaking("zh"):  # a title the notebook passes is shown in the notebook's language
        assert S.plot_tokens_per_pass(rows, title="greedy, English passages").axes[0].get_title() == "贪心，英文段落"
    plt.close("all")


def test_states_are_concepts_with_a_second_cue():
    import matplotlib.colors as mc

    assert S.COLORS["accepted"] == lib.widgets.style.colour("accepted") == lib.widgets.style.colour("computed")
    assert S.COLORS["rejected"] == lib.widgets.style.colour("rejected") == lib.widgets.style.colour("recomputed")
    assert S.COLORS["discarded"] == lib.widgets.style.colour("draft") and S.COLORS["cut"] == lib.widgets.style.FREE
    # where two states share a colour, the hatch (matplotlib) and the symbol (plotly) still tell them apart
    for a in S.COLORS:
        for b in S.COLORS:
            if a < b and S.COLORS[a] == S.COLORS[b] and {a, b} != {"target", "cut"}:
                assert S.HATCHES[a] != S.HATCHES[b] and S.SYMBOLS[a] != S.SYMBOLS[b], (a, b)
    green, red = "#2ca02c", "#d62728"  # the old pair, unreadable with deuteranopia
    assert green not in S.COLORS.values() and red not in S.COLORS.values()


def test_static_grid_cells_carry_colour_and_hatch(runs, models):
    import matplotlib.colors as mc

    tok = models[-1]
    r = runs["mixed"]
    fig = S.plot_rounds(r, tok)
    ax = fig.axes[0]
    cells = [c for row in S.round_cells(r, tok) for c in row]
    assert [mc.to_hex(p.get_facecolor()) for p in ax.patches] == [S.COLORS[c.status].lower() for c in cells]
    assert [p.get_hatch() or "" for p in ax.patches] == [S.HATCHES[c.status] for c in cells]
    legend = fig.legends[0]  # the figure's key, under the grid
    assert {t.get_text() for t in legend.get_texts()} == {S.MEANING[c.status] for c in cells}
    plt.close(fig)


def test_the_rounds_grid_keeps_its_width_beside_its_key(runs, models):
    """The regression of look pass 2: a legend anchored to the axes and wider than them made constrained layout
    shrink the grid to a 50-px strip, its column labels printed over each other. The grid keeps at least half the
    figure's width, and no two column labels overlap."""
    tok = models[-1]
    for name, run in runs.items():
        with plt.rc_context():
            lib.widgets.style.apply()  # the notebooks' sizes: the bigger type made the key wider than the grid
            fig = S.plot_rounds(run, tok)
            fig.canvas.draw()
        ax = fig.axes[0]
        assert ax.get_position().width >= 0.5, f"{name}: the grid is {ax.get_position().width:.0%} of the figure"
        r = fig.canvas.get_renderer()
        boxes = [label.get_window_extent(r) for label in ax.get_xticklabels()]
        assert all(a.x1 <= b.x0 for a, b in zip(boxes, boxes[1:])), f"{name}: column labels overlap"
        plt.close(fig)


def test_html_chips_follow_the_theme_and_mark_states_without_colour(runs, models):
    tok = models[-1]
    h = S.rounds_html(runs["good"], tok) + S.rounds_html(runs["mixed"], tok)
    assert f"color:{lib.widgets.style.css('ink')}" in h and lib.widgets.style.css("muted") in h
    assert "#fff" not in h and "#555" not in h and "#666" not in h  # no fixed greys that vanish in the dark theme
    chips = re.findall(r'title="([^"]*)" style="([^"]*)"', h)
    rejected = [css for title, css in chips if "draft token rejected" in title]
    assert rejected and all("line-through" in css for css in rejected)
    kept = [css for title, css in chips if "draft token kept" in title]
    assert kept and not any("line-through" in css for css in kept)

"""The attention heat-map over cached keys: its data against the Trace, and all three tiers driven from Python."""
import math

import matplotlib.patches as mpatches
import matplotlib.pyplot as plt
import pytest
import torch

from helpers import drawn_without_missing_glyphs
import lib
import matplotlib.colors as mcolors
from lib.widgets import style
from lib.widgets import attention as A


@pytest.fixture(scope="module")
def run(chat):
    """<s>模 -> 型逐字生成文本<eos>: a 2-token prompt (prefill) and 7 decode steps."""
    model, tok = chat
    return lib.generate(model, tok.encode("<s>模"), 20, eos_id=tok.eos_id, trace=True)


@pytest.fixture(scope="module")
def explorer(chat):
    return A.AttentionExplorer(*chat, "<s>", max_new_tokens=10)


def gqa_trace(use_cache=True):
    cfg = lib.ModelConfig(vocab_size=20, n_layers=2, d_model=24, n_heads=6, n_kv_heads=2, max_seq_len=16,
                          positions="rope")
    torch.manual_seed(1)
    model = lib.MiniTransformer(cfg).eval()
    return lib.generate(model, [1, 5, 7], 6, use_cache=use_cache, trace=True).trace


# ------------------------------------------------------------------------------------------------ data

@pytest.mark.parametrize("layer,head", [(0, 0), (1, 2), (3, 3)])
def test_view_is_the_traces_attention_on_a_fixed_grid(run, chat, layer, head):
    tr, tok = run.trace, chat[1]
    v = A.attention_view(tr, tok, layer, head)
    assert v.grid.shape == (len(tr), tr.prompt_len + len(tr) - 1) == (8, 9)
    assert torch.equal(torch.nan_to_num(v.grid, -1.0), torch.nan_to_num(tr.attention_grid(layer, head), -1.0))
    for s, step in enumerate(tr.steps):
        n = step.n_keys
        assert torch.equal(v.grid[s, :n], step.attention[layer, 0, head])  # the weights the model used
        assert math.isclose(float(v.grid[s, :n].sum()), 1.0, abs_tol=1e-5)  # a distribution over existing keys
        assert (v.grid[s, :n] >= 0).all()
        assert torch.isnan(v.grid[s, n:]).all()  # keys not in the cache yet
        assert v.keys_at(s) == n


def test_newest_key_is_the_key_written_this_step_and_the_querys_own(run, chat):
    tr, tok = run.trace, chat[1]
    v = A.attention_view(tr, tok, 2, 1)
    assert v.newest_key == [1, 2, 3, 4, 5, 6, 7, 8]  # prefill of <s>模 ends at position 1, then one per step
    for s, step in enumerate(tr.steps):
        assert v.newest_key[s] == step.n_keys - 1 == step.positions[-1]
        assert not math.isnan(float(v.grid[s, v.newest_key[s]]))
        if s + 1 < len(tr):
            assert math.isnan(float(v.grid[s, v.newest_key[s] + 1]))


def test_tokens_and_hover_text(run, chat):
    _, tok = chat
    v = A.attention_view(run.trace, tok, 0, 0)
    assert v.key_tokens == ["<s>", "模", "型", "逐", "字", "生", "成", "文", "本"]
    assert v.query_tokens == ["模", "型", "逐", "字", "生", "成", "文", "本"]
    w = float(run.trace.steps[3].attention[0, 0, 0, 1])
    assert v.hover(3, 1) == f"step 3: query 字 (pos 4) -> key 模 (pos 1): weight {w:.4f}"
    assert v.hover(0, 5) == "step 0: query 模 (pos 1) -> key 生 (pos 5): weight not in the cache yet"
    assert A.attention_view(run.trace, None, 0, 0).key_tokens[:2] == [str(tok.bos_id), str(tok.encode("模")[0])]


def test_grid_at_hides_later_steps_without_changing_shape(run, chat):
    v = A.attention_view(run.trace, chat[1], 1, 1)
    g = v.grid_at(2)
    assert g.shape == v.grid.shape
    assert torch.equal(torch.nan_to_num(g[:3], -1.0), torch.nan_to_num(v.grid[:3], -1.0))
    assert torch.isnan(g[3:]).all()
    assert torch.equal(torch.nan_to_num(v.grid_at(None), -1.0), torch.nan_to_num(v.grid, -1.0))


def test_gqa_and_uncached_traces_give_the_same_heatmap():
    cached, uncached = gqa_trace(True), gqa_trace(False)
    assert cached.n_heads == 6 and cached.n_kv_heads == 2
    for head in range(6):
        a = A.attention_view(cached, None, 1, head)
        b = A.attention_view(uncached, None, 1, head)
        assert a.newest_key == b.newest_key == [2, 3, 4, 5, 6, 7]
        assert torch.allclose(torch.nan_to_num(a.grid, -1.0), torch.nan_to_num(b.grid, -1.0), atol=1e-5)
        # the same keys, told apart under the key axis: read from the cache vs computed again at every step
        assert a.chips(3) == ["cached"] * 5 + ["new", "none", ""] and a.appended(3) == b.appended(3) == (5, 5)
        assert b.chips(3) == ["recomputed"] * 5 + ["new", "none", ""]  # "": not in the sequence yet
        assert a.appended(0) == b.appended(0) == (0, 2) and a.prompt_len == b.prompt_len == 3  # the prefill


def test_key_axis_brackets_set_the_prompt_apart_from_decode_appends():
    v = A.attention_view(gqa_trace(True), None, 0, 0)
    assert A._spans(v) == [(0, 2, "prefill: 3 prompt key(s), one pass"),
                           (3, 7, "decode: one key appended per step")]
    one = A.AttentionView(0, 0, 0, torch.tensor([[0.5, 0.5]]), [1], ["b"], ["a", "b"], prompt_len=2,
                          kv=(("new", "new", "none"),))  # a hand-built prefill only: no decode bracket
    assert A._spans(one) == [(0, 1, "prefill: 2 prompt key(s), one pass")] and one.chips(0) == ["new", "new"]
    assert A.AttentionView(0, 0, 0, torch.tensor([[1.0]]), [0], ["a"], ["a"]).appended(0) == (0, 0)  # no kv: own key


def test_future_cells_are_quiet_in_plotly_on_either_card():
    r, g, b, alpha = (float(x) for x in A.FUTURE_PLOTLY[5:-1].split(","))
    assert round(255 - alpha * (255 - r)) == int(style.FREE[1:3], 16)  # on the white card: style.FREE exactly
    dark = 0x11 + alpha * (r - 0x11)  # on a dark theme's #111111 card: a dark grey, far below the viridis cells
    assert dark < 0x20 and (r, g) == (g, b)
    assert 'shapelayer path[style*="fill: rgb(255, 255, 255)"]' in style.themed_plotly_css()  # veils follow the theme


def test_induction_prompt_and_head_are_measured(chat):
    """On any model: the prompt is a held-out passage and its first half again; the head is the one the measure
    picks (the real model's picture is checked against its checkpoint, not here)."""
    from lib import heads
    model, tok = chat
    ids = heads.passages_twice(tok, "zh", 12, 1)[0]
    assert tok.encode(A.induction_prompt(tok, "zh", 12)) == ids[:1 + 12 + 6]
    share = torch.stack([heads.induction_share(model, torch.tensor(i), 12)
                         for i in heads.passages_twice(tok, "zh", 12, 2)]).mean(0)
    assert A.induction_head(model, tok, "zh", 12, count=2) == heads.strongest(share)
    ex = A.induction_explorer(model, tok, "zh", 12, max_new_tokens=3)
    assert ex.induction == A.induction_head(model, tok, "zh", 12)  # measured over 4 passages by default
    assert (ex.layer.value, ex.head.value) == ex.induction[:2]
    assert ex.prompt.value == A.induction_prompt(tok, "zh", 12)


@pytest.mark.parametrize("kwargs,message", [
    (dict(layer=4), "layer must be an integer from 0 to 3 (the model has 4 layers), got 4"),
    (dict(layer=-1), "layer must be an integer from 0 to 3 (the model has 4 layers), got -1"),
    (dict(layer=True), "layer must be an integer from 0 to 3 (the model has 4 layers), got True"),
    (dict(head=4), "head must be an integer from 0 to 3 (the model has 4 query heads), got 4"),
    (dict(head="all"), "head must be an integer from 0 to 3 (the model has 4 query heads), got 'all'"),
    (dict(head=1.0), "head must be an integer from 0 to 3 (the model has 4 query heads), got 1.0"),
    (dict(batch=1), "batch must be an integer from 0 to 0 (the trace holds 1 sequence(s)), got 1"),
])
def test_bad_layer_head_batch_say_what_is_allowed(run, chat, kwargs, message):
    with pytest.raises(ValueError) as e:
        A.attention_view(run.trace, chat[1], **kwargs)
    assert str(e.value) == message


def test_bad_trace_and_step(run, chat):
    with pytest.raises(TypeError, match=r"trace must be a lib.Trace \(generate\(..., trace=True\).trace\), got list"):
        A.attention_view([], chat[1])
    empty = lib.Trace(prompt_len=1, use_cache=True, cache_kind="static", n_layers=1, n_heads=1, n_kv_heads=1,
                      sampling={}, prompt_ids=torch.zeros(1, 1, dtype=torch.long))
    with pytest.raises(ValueError, match="trace has no steps: generate at least one token with trace=True"):
        A.attention_view(empty, chat[1])
    with pytest.raises(ValueError, match=r"step must be an integer from 0 to 7 \(the trace has 8 steps\), got 8"):
        A.plot_attention(run.trace, chat[1], step=8)
    with pytest.raises(ValueError, match=r"key must be an integer from 0 to 8 \(the grid has 9 key positions\), got 9"):
        A.attention_view(run.trace, chat[1]).hover(0, 9)


# ---------------------------------------------------------------------------------- tier 1: matplotlib

def test_static_heatmap_draws_the_grid_up_to_the_step_and_boxes_the_newest_key(run, chat):
    _, tok = chat
    fig = drawn_without_missing_glyphs(lambda: A.plot_attention(run.trace, tok, 1, 2, step=4))
    ax = fig.axes[0]
    img = ax.get_images()[0].get_array()
    expected = A.attention_view(run.trace, tok, 1, 2).grid_at(4)
    assert img.shape == tuple(expected.shape)
    assert (img.mask == torch.isnan(expected).numpy()).all()
    assert torch.allclose(torch.tensor(img.filled(-1.0)).double(), torch.nan_to_num(expected, -1.0).double())
    row, *boxes = [p for p in ax.patches if isinstance(p, mpatches.Rectangle)][:3]
    # this step's row, thinly outlined over the 6 keys it read; earlier rows faded, the current row at full strength
    assert (row.get_x(), row.get_y(), row.get_width(), row.get_height()) == (-0.5, 3.5, 6, 1)
    alpha = ax.get_images()[0].get_alpha()
    assert (alpha[4] == 1).all() and (alpha[:4][~torch.isnan(expected[:4]).numpy()] == A.PAST_ALPHA).all()
    # only the K/V step 4 appended is outlined, one cell, not a column: a dark halo under a line in the "newest" colour
    assert all((b.get_x(), b.get_y(), b.get_width(), b.get_height()) == (5 - 0.5, 4 - 0.5, 1, 1) for b in boxes)
    assert [mcolors.to_hex(b.get_edgecolor()).upper() for b in boxes] == [style.INK, style.colour("newest")]
    assert not any(b.get_fill() for b in boxes) and boxes[0].get_linewidth() > boxes[1].get_linewidth()
    assert ax.get_images()[0].get_cmap().name.startswith(style.SEQUENTIAL)
    # the weights written on the cells: ink on the light (high) end of viridis, paper on the dark end
    colours = {t.get_text(): t.get_color() for t in ax.texts}
    assert colours["1.00"] == style.INK and any(c == style.PAPER for c in colours.values())
    # one labelling scheme for every heat-map: position and token, for key columns and query rows alike
    assert [t.get_text() for t in ax.get_xticklabels()] == ["0 <s>", "1 模", "2 型", "3 逐", "4 字", "5 生", "6 成",
                                                            "7 文", "8 本"]
    assert [t.get_text() for t in ax.get_yticklabels()][:2] == ["1 模", "2 型"]  # step 0's query sits at position 1
    assert [t.get_text() for t in ax.get_yticklabels()][-1] == "K/V"  # the chips' row under the key axis
    assert "step 4's query 生 over 6 cached keys\n(bright: this step's row; outlined: the K/V it appended)" in \
        ax.get_title(loc="left")
    words = [t.get_text() for t in ax.texts]
    # the player's K/V chips of step 4: keys 0..4 read from the cache, 5 computed now, 6 (the chosen token) none yet
    assert words[-9:-2] == ["=", "=", "=", "=", "=", "+", "."]
    assert words[-2:] == ["prefill: 2 prompt key(s), one pass", "decode: one key appended per step"]
    plt.close(fig)


def test_the_prefill_outlines_the_prompt_s_keys_and_future_cells_stay_quiet(run, chat):
    _, tok = chat
    fig = A.plot_attention(run.trace, tok, 0, 0, step=0)
    ax = fig.axes[0]
    row, halo, box = [p for p in ax.patches if isinstance(p, mpatches.Rectangle)][:3]
    assert (box.get_x(), box.get_width()) == (-0.5, 2)  # the prefill wrote both prompt keys in one pass
    assert ax.get_images()[0].get_cmap().get_bad()[:3] == pytest.approx(mcolors.to_rgb(style.FREE))
    assert style.relative_luminance(style.FREE) < style.relative_luminance(style.PAPER)  # quieter than the card
    plt.close(fig)


def test_layer_and_head_change_what_is_drawn(run, chat):
    _, tok = chat
    a = drawn_without_missing_glyphs(lambda: A.plot_attention(run.trace, tok, 0, 0))
    b = drawn_without_missing_glyphs(lambda: A.plot_attention(run.trace, tok, 2, 3))
    ia, ib = (f.axes[0].get_images()[0].get_array().filled(-1.0) for f in (a, b))
    assert (ia != ib).any()
    assert torch.allclose(torch.tensor(ib).double(), torch.nan_to_num(run.trace.attention_grid(2, 3), -1.0).double())
    plt.close("all")


def test_small_multiples_one_panel_per_head_and_layer(run, chat):
    _, tok = chat
    fig = drawn_without_missing_glyphs(lambda: A.plot_attention_heads(run.trace, tok, layer=None))
    panels = [ax for ax in fig.axes if ax.get_images()]
    assert len(panels) == 4 * 4
    for i, ax in enumerate(panels):
        grid = run.trace.attention_grid(i // 4, i % 4)
        assert torch.allclose(torch.tensor(ax.get_images()[0].get_array().filled(-1.0)).double(),
                              torch.nan_to_num(grid, -1.0).double())
    one = A.plot_attention_heads(run.trace, tok, layer=1, step=3)
    assert len([ax for ax in one.axes if ax.get_images()]) == 4
    with pytest.raises(ValueError, match="layer must be an integer from 0 to 3"):
        A.plot_attention_heads(run.trace, tok, layer=5)
    plt.close("all")


def test_spaces_are_visible_and_render(chat):
    model, tok = chat
    out = lib.generate(model, tok.encode("<s>kv"), 12, eos_id=tok.eos_id, trace=True)
    v = A.attention_view(out.trace, tok)
    assert v.key_tokens[:5] == ["<s>", "k", "v", "␣", "c"]  # 'kv cache ...': the space is shown as ␣
    drawn_without_missing_glyphs(lambda: A.plot_attention(out.trace, tok))
    plt.close("all")


# ------------------------------------------------------------------------------------ tier 2: plotly

def rows(grid):
    """What plotly gets: per step only the keys that existed, rounded to 4 decimals."""
    return [[round(w, 4) for w in row if not math.isnan(w)] for row in grid.tolist()]


def test_plotly_frames_slider_and_fixed_axes(run, chat):
    tr, tok = run.trace, chat[1]
    fig = A.attention_figure(tr, tok, 1, 2)
    n, W = 8, 9
    view = A.attention_view(tr, tok, 1, 2)
    assert [d.type for d in fig.data] == ["heatmap", "scatter"]  # the heat-map and the K/V chips under it
    heat, chips = fig.data
    assert [list(r) for r in heat.z] == rows(view.grid)  # row s: step s's weights over its keys
    assert [len(r) for r in heat.z] == [2, 3, 4, 5, 6, 7, 8, 9]  # grows one key per step
    assert list(heat.x) == ["0 &lt;s&gt;", "1 模", "2 型", "3 逐", "4 字", "5 生", "6 成", "7 文", "8 本"]
    assert list(heat.y)[:2] == ["1 模", "2 型"]  # as the columns: position and token (the hover reads them)
    assert "query at %{y}" in heat.hovertemplate and "key at position %{x}" in heat.hovertemplate
    assert "weight %{z:.4f}" in heat.hovertemplate
    assert [f.name for f in fig.frames] == [str(s) for s in range(n)]
    assert [s.label for s in fig.layout.sliders[0].steps] == [str(s) for s in range(n)]
    assert fig.layout.sliders[0].active == n - 1  # opens on the last step
    assert chips.yaxis == "y2" and fig.layout.xaxis.anchor == "y2"  # chips under the grid, key labels under both
    for s, frame in enumerate(fig.frames):
        (chip_frame,) = frame.data  # a frame moves shapes and the chips only: the axes and weights never change
        assert list(frame.traces) == [1]
        assert list(chip_frame.hovertext[:s + 3]) == [f"position {p}: " + ("K/V read from the cache, not computed" if p <= s and s
                                                      else "K/V computed for the first time in this step" if p <= s + 1
                                                      else "no K/V yet: the newest token is fed in the next step")
                                                      for p in range(min(s + 3, W))]  # the last chosen: no column
        veil, cover, quiet, row, halo, box, prefill, decode = frame.layout.shapes
        assert (veil.y0, veil.y1, veil.fillcolor, veil.opacity) == (-0.5, s - 0.5, style.PAPER, 1 - A.PAST_ALPHA)
        assert (cover.y0, cover.y1, cover.x0, cover.x1) == (s + 0.5, n - 0.5, -0.5, W - 0.5)  # steps to come
        assert (quiet.y0, quiet.y1) == (s + 0.5, n - 0.5) and cover.fillcolor == style.PAPER
        assert quiet.fillcolor == A.FUTURE_PLOTLY == fig.layout.plot_bgcolor
        assert (row.x0, row.x1, row.y0, row.y1) == (-0.5, view.keys_at(s) - 0.5, s - 0.5, s + 0.5)
        first = 0 if s == 0 else view.newest_key[s]  # the prefill appended both prompt keys, a decode step one
        for b in (halo, box):
            assert (b.x0, b.x1, b.y0, b.y1) == (first - 0.5, view.newest_key[s] + 0.5, s - 0.5, s + 0.5)  # a cell
        assert (halo.line.color, box.line.color) == (style.INK, style.colour("newest"))
        assert halo.line.width > box.line.width
        assert (prefill.x0, prefill.x1, decode.x0, decode.x1) == (-0.42, 1.42, 1.58, W - 1 + 0.42)  # set apart
        assert prefill.yref == decode.yref == "y2"
        assert f"step {s}: query {view.query_tokens[s]} reads {view.keys_at(s)} cached key(s)" in frame.layout.title.text
    assert tuple(fig.layout.xaxis.range) == (-0.5, W - 0.5) and tuple(fig.layout.yaxis.range) == (n - 0.5, -0.5)
    assert fig.layout.shapes == fig.frames[-1].layout.shapes
    # no fixed width, and fonts and colours left to the installed template (kvlab after lib.notebook.setup)
    assert fig.layout.width is None and fig.layout.font.size is None and fig.layout.paper_bgcolor is None
    assert "red" not in fig.layout.title.text and "outlined = the K/V it appended" in fig.layout.title.text
    assert [a.text for a in fig.layout.annotations] == ["prefill: 2 prompt key(s), one pass",
                                                        "decode: one key appended per step"]


def test_plotly_picker_swaps_in_each_layer_and_heads_weights(run, chat):
    tr, tok = run.trace, chat[1]
    fig = A.attention_figure(tr, tok, 0, 1)
    picker = fig.layout.updatemenus[0]
    assert [b.label for b in picker.buttons][:5] == ["layer 0 · head 0", "layer 0 · head 1", "layer 0 · head 2",
                                                     "layer 0 · head 3", "layer 1 · head 0"]
    assert len(picker.buttons) == 16 and picker.active == 1
    z, traces = picker.buttons[4 * 3 + 2].args  # layer 3, head 2
    assert list(traces) == [0]
    assert z["z"] == [rows(tr.attention_grid(3, 2))]
    assert picker.buttons[1].args[0]["z"] == [[list(r) for r in fig.data[0].z]]  # the active option is what is shown


def test_plotly_all_heads_small_multiples(run, chat):
    _, tok = chat
    fig = A.attention_figure(run.trace, tok, 2, "all")
    assert len(fig.data) == 4  # one panel per head
    for h in range(4):
        assert [list(r) for r in fig.data[h].z] == rows(run.trace.attention_grid(2, h))
    assert [a.text for a in fig.layout.annotations] == ["head 0", "head 1", "head 2", "head 3"]
    assert len(fig.frames[0].layout.shapes) == 24  # veil, cover, quiet fill, row, appended K/V (halo + line) each
    assert not fig.frames[0].data  # small multiples: no chips, the frames move shapes only
    assert {sh.xref for sh in fig.frames[0].layout.shapes} == {"x", "x2", "x3", "x4"}
    picker = fig.layout.updatemenus[0]
    assert [b.label for b in picker.buttons] == ["layer 0", "layer 1", "layer 2", "layer 3"] and picker.active == 2
    assert picker.buttons[1].args[0]["z"][3] == rows(run.trace.attention_grid(1, 3))


def test_plotly_caps_the_animated_length(chat):
    model, tok = chat
    out = lib.generate(model, tok.encode("<s>kv"), 30, trace=True)  # no eos: 32 key positions
    with pytest.raises(ValueError, match="this trace has 32 key positions, more than max_keys=16"):
        A.attention_figure(out.trace, tok, max_keys=16)
    assert len(A.attention_figure(out.trace, tok, max_keys=32).frames) == 30
    with pytest.raises(ValueError, match="max_keys must be a positive int, got 0"):
        A.attention_figure(out.trace, tok, max_keys=0)


# ---------------------------------------------------------------------------------- tier 3: ipywidgets

def test_explorer_draws_the_chosen_layer_head_and_step(explorer):
    ex = explorer
    ex.set(layer=2, head=1, step=2)
    d = ex.drawn
    tr = ex.trace  # <s> -> 人工智能<eos>: 5 steps
    assert (d["layer"], d["head"], d["step"], d["figure"]) == (2, 1, 2, "one head")
    expected = A.attention_view(tr, ex.tokenizer, 2, 1).grid_at(2)
    assert [list(r) for r in d["z"][0]] == [[None if math.isnan(w) else round(w, 4) for w in row]
                                            for row in expected.tolist()]
    assert d["highlight"] == 2 and d["appended"] == (2, 2) and "step 2: query 工 reads 3 cached key(s)" in d["title"]
    assert d["chips"][:4] == ["position 0: K/V read from the cache, not computed",
                              "position 1: K/V read from the cache, not computed",
                              "position 2: K/V computed for the first time in this step",
                              "position 3: no K/V yet: the newest token is fed in the next step"] and d["chips"][4] == ""
    assert [sh["name"] for sh in ex.figure["layout"]["shapes"]][-2:] == ["bracket", "bracket"]
    assert ex.figure["layout"]["plot_bgcolor"] == A.FUTURE_PLOTLY
    assert d["key_labels"] == ["0 &lt;s&gt;", "1 人", "2 工", "3 智", "4 能"]
    assert d["hover"][2][1].startswith("step 2: query 工 (pos 2) -> key 人 (pos 1): weight ")
    assert d["hover"][1][3] == ""  # no hover where the key did not exist yet
    ex.set(layer=0, head=3)  # the pickers change what is drawn
    assert ex.drawn["z"][0] != d["z"][0]
    ex.step.value = 4  # as if the user dragged the slider
    assert ex.drawn["highlight"] == 4 and ex.drawn["z"][0][4][4] is not None
    assert ex.last_update_seconds > 0


def test_explorer_all_heads(explorer):
    ex = explorer
    ex.set(layer=1, head="all", step=3)
    d = ex.drawn
    assert d["figure"] == "all heads" and len(d["z"]) == 4
    for h in range(4):
        grid = A.attention_view(ex.trace, ex.tokenizer, 1, h).grid_at(3)
        assert [list(r) for r in d["z"][h]] == [[None if math.isnan(w) else round(w, 4) for w in row]
                                                for row in grid.tolist()]
    assert len(ex.figure["layout"]["shapes"]) == 24 and ex.figure["layout"]["xaxis4"]["ticktext"][0] == "0 &lt;s&gt;"
    assert d["chips"] is None  # small multiples: no chips
    scale = ex.figure["layout"]["coloraxis"]["colorscale"]  # spelled out: dark for 0, light for 1, as in tier 2
    assert scale == [list(c) for c in A.attention_figure(ex.trace, ex.tokenizer).layout.coloraxis.colorscale]
    assert scale[0] == [0.0, "#440154"] and scale[-1] == [1.0, "#fde725"]  # viridis, as style.SEQUENTIAL
    assert "width" not in ex.figure["layout"]
    assert ex.figure["layout"]["template"]["layout"]["paper_bgcolor"] == style.PAPER  # kvlab, written out
    ex.set(head=0)
    assert ex.drawn["figure"] == "one head" and len(ex.drawn["z"]) == 1


def test_explorer_draws_the_cache_tensor_beside_the_heatmap(explorer):
    """The slab follows the step: <s> -> 人工智能<eos> reserves 11 positions (1 + 10 new tokens)."""
    ex = explorer
    ex.set(layer=1, head=0, step=0)
    assert ex.slab.value.count("title=") == 2 * 4 * 11  # K and V, 4 KV heads, 11 positions each
    assert "K of layer 1" in ex.slab.value and "(1, 4, 11, 16)" in ex.slab.value and "1 of 11 positions" in ex.slab.value
    ex.set(step=3)
    assert "4 of 11 positions" in ex.slab.value
    assert ex.slab.value.count("3px solid") == 2 * 4  # the appended position, in K and in V of every head


def test_explorer_output_holds_exactly_the_figure(explorer):
    """The browser shows the Output widget's own state: one plotly output, the figure drawn last."""
    ex = explorer
    ex.set(layer=2, head=3, step=1)
    (out,) = ex.output.outputs
    plotly_json = out["data"]["application/vnd.plotly.v1+json"]
    assert plotly_json["data"] == ex.figure["data"] and plotly_json["layout"] == ex.figure["layout"]
    assert out["data"]["text/plain"].startswith("attention heat-map: layer 2, head 3 · step 1: query 人")
    import json
    json.dumps(out)  # plain JSON all the way down: what the comm sends


def test_explorer_prompt_reruns_and_unknown_characters_give_a_message(chat):
    model, tok = chat
    ex = A.AttentionExplorer(model, tok, "<s>", max_new_tokens=10, layer=1, head=2, step=1)
    assert ex.step.value == 1 and ex.drawn["step"] == 1
    ex.set(prompt="<s>深")
    assert ex.tokenizer.decode(ex.trace.tokens()) == "<s>深度学习<eos>"
    assert ex.step.max == 3 and ex.step.value == 3  # new trace: the slider spans it and shows the last step
    assert ex.drawn["key_labels"] == ["0 &lt;s&gt;", "1 深", "2 度", "3 学", "4 习"]
    assert "度学习" in ex.message.value and ex.error is None
    before = ex.trace
    ex.set(prompt="<s>深✓")
    assert ex.trace is before  # the old picture stays
    assert "not in the vocabulary" in ex.message.value and "U+2713 CHECK MARK" in ex.message.value
    assert ex.error.startswith("1 character(s) not in the vocabulary: '✓' (U+2713 CHECK MARK).")
    assert "The heat-map still shows the last prompt that worked, &#x27;&lt;s&gt;深&#x27;." in ex.message.value
    ex.set(prompt="")
    assert "the prompt is empty" in ex.message.value and ex.trace is before


def test_explorer_puts_the_start_token_before_a_prompt_without_it_and_says_so(chat):
    """The models learnt from texts that start with <s>: a prompt typed without it gets it, and the message says
    so (without it the model would run on a start it never saw)."""
    model, tok = chat
    ex = A.AttentionExplorer(model, tok, "<s>", max_new_tokens=10)
    ex.set(prompt="深")
    assert ex.tokenizer.decode(ex.trace.tokens()) == "<s>深度学习<eos>" and ex.error is None
    assert "(&lt;s&gt; added in front" in ex.message.value  # escaped: a bare <s> would strike the HTML through
    ex.set(prompt="<s>深")
    assert "added in front" not in ex.message.value


def test_explorer_bad_values_say_what_is_allowed(chat, explorer):
    model, tok = chat
    with pytest.raises(ValueError, match=r"layer must be an integer from 0 to 3 \(the model has 4 layers\), got 4"):
        A.AttentionExplorer(model, tok, layer=4)
    with pytest.raises(ValueError, match=r'head must be an integer from 0 to 3 or "all" .* got 7'):
        explorer.set(head=7)
    with pytest.raises(ValueError, match=r"step must be an integer from 0 to 4 .* got 9"):
        explorer.set(step=9)


def test_explorer_starts_on_a_bad_prompt_with_the_message_and_a_fallback(chat):
    model, tok = chat
    ex = A.AttentionExplorer(model, tok, "<s>✓", max_new_tokens=6)
    assert "not in the vocabulary" in ex.message.value
    assert ex.trace.tokens()[0] == tok.bos_id and ex.drawn["z"]


def test_plotly_picker_can_offer_only_some_layers(run, chat):
    tr, tok = run.trace, chat[1]
    fig = A.attention_figure(tr, tok, 2, 1, layers=[2])
    picker = fig.layout.updatemenus[0]
    assert [b.label for b in picker.buttons] == [f"layer 2 · head {h}" for h in range(4)] and picker.active == 1
    assert picker.buttons[3].args[0]["z"] == [rows(tr.attention_grid(2, 3))]
    fig = A.attention_figure(tr, tok, 1, "all", layers=[3, 1])
    picker = fig.layout.updatemenus[0]
    assert [b.label for b in picker.buttons] == ["layer 1", "layer 3"] and picker.active == 0
    with pytest.raises(ValueError, match=r"layers=\[0\] must include the layer the figure opens on \(layer=2\)"):
        A.attention_figure(tr, tok, 2, 0, layers=[0])
    with pytest.raises(ValueError, match=r"each of layers must be an integer from 0 to 3"):
        A.attention_figure(tr, tok, 0, 0, layers=[0, 7])

"""lib.widgets.cost_curves: every plotted series equals lib.costs; slopes; the three tiers; errors."""
import json
import warnings

import pytest
import torch

import lib
from lib import costs
from lib.widgets import style
from lib.widgets.fonts import use_cjk_font
from lib.measure import cumulative, fit_loglog_slope, larger_config, measure_positions, random_model
from lib.widgets import cost_curves as cc

CHAT = lib.load_demo("chat")[0].config

# plain data shaped like lib.measure.measure_generation's result (made up: only the plotting is tested)
FAKE = {"positions": [1, 2, 4, 8], "modes": ["no cache", "static"], "kind": "generation", "clock": "wall",
        "config": {"n_layers": 4, "d_model": 256},
        "seconds": {"no cache": [0.001, 0.002, 0.004, 0.008], "static": [0.001, 0.001, 0.001, 0.001234567]},
        "cumulative": {"no cache": [0.001, 0.003, 0.007, 0.015], "static": [0.001, 0.002, 0.003, 0.004234567]},
        "slopes": {"no cache": {"per_step": 1.0, "cumulative": 1.1}, "static": {"per_step": 0.0, "cumulative": 0.9}}}


# ------------------------------------------------------------------------------------------------ data

@pytest.mark.parametrize("model, n, prompt_len", [("chat", 64, 1), ("chat", 10, 5), ("larger", 300, 1),
                                                  ("gpt2", 50, 7)])
def test_analytic_curves_equal_lib_costs(model, n, prompt_len):
    c = cc.analytic_curves(model, n, prompt_len)
    config = cc.resolve(model)[1]
    assert c["name"] == model and c["config"] == config and c["n"] == n
    for cache in ("cache", "no cache"):
        use = cache == "cache"
        rows = costs.generation_steps(config, prompt_len, n, use)
        assert c["positions"] == [r["n_keys"] for r in rows] == list(range(prompt_len, prompt_len + n))
        assert c["kv"][cache] == costs.kv_computations(prompt_len, n, use)
        assert c["kv_cumulative"][cache][-1] == costs.total_kv_computations(prompt_len, n, use)
        f = c["flops"][cache]
        assert f["attention"] == [r["attn_scores"] + r["attn_values"] for r in rows]
        assert f["linear"] == [r["qkv_proj"] + r["out_proj"] + r["ffn"] + r["lm_head"] for r in rows]
        assert f["total"] == [r["total"] for r in rows]
        total = costs.generation_flops(config, prompt_len, n, use)
        for part, key in (("attention", "attention"), ("total", "total")):
            assert c["flops_cumulative"][cache][part] == cumulative(f[part])
            assert c["flops_cumulative"][cache][part][-1] == total[key]


def test_kv_counts_are_n_vs_triangle():
    c = cc.analytic_curves("chat", 64)
    assert c["kv_cumulative"]["cache"][-1] == 64
    assert c["kv_cumulative"]["no cache"][-1] == 64 * 65 // 2


def test_analytic_slopes():
    s = cc.analytic_curves("larger", 512)["slopes"]
    per, cum = s["per_step"], s["cumulative"]
    assert per["cache"]["attention"] == pytest.approx(1.0, abs=0.02)  # O(t) per step with a cache
    assert per["no cache"]["attention"] == pytest.approx(2.0, abs=0.02)  # O(t²) without
    assert per["cache"]["linear"] == 0.0 and per["cache"]["kv"] == 0.0  # constant
    assert per["no cache"]["linear"] == pytest.approx(1.0, abs=0.01)
    assert cum["cache"]["kv"] == pytest.approx(1.0, abs=0.01)  # n vs n(n+1)/2
    assert cum["no cache"]["kv"] == pytest.approx(2.0, abs=0.05)
    assert cum["no cache"]["attention"] == pytest.approx(3.0, abs=0.05)  # O(n³) without, O(n²) with
    assert cum["cache"]["attention"] == pytest.approx(2.0, abs=0.05)
    # the same numbers as fitting lib.costs' series directly
    rows = costs.generation_steps(larger_config(), 1, 512, True)
    direct = fit_loglog_slope([r["n_keys"] for r in rows[1:]], [r["attention"] for r in rows[1:]], 0.5)
    assert per["cache"]["attention"] == round(direct, 2)
    assert cc.analytic_curves("chat", 2)["slopes"]["per_step"]["cache"]["attention"] is None


def test_memory_curves_equal_lib_costs():
    m = cc.memory_curves("llama-2-7b", 100, dtype=torch.bfloat16, batch_size=4)
    cfg = lib.PRESETS["llama-2-7b"]
    assert m["positions"] == list(range(1, 101))
    assert m["kv_bytes"] == [lib.kv_cache_bytes(cfg, t, 4, torch.bfloat16) for t in m["positions"]]
    assert m["kv_bytes"][-1] == 100 * 4 * 2 * 32 * 4096 * 2  # 2 (K, V) x layers x d_model x 2 bytes
    assert m["weight_bytes"] == costs.weight_bytes(cfg, torch.bfloat16)
    assert m["memory_crossover_context"] == round(costs.kv_memory_crossover_tokens(cfg, torch.bfloat16) / 4, 1)
    assert cc.memory_curves("chat")["positions"][-1] == CHAT.max_seq_len  # default: the whole window
    assert (m["dtype"], m["batch_size"]) == ("bf16", 4)


def test_resolve_is_lib_costs_resolver_plus_larger():
    assert cc.resolve("chat") == ("chat", CHAT) == costs.resolve_model("chat")
    assert cc.resolve(CHAT) == ("chat", CHAT)
    assert cc.resolve("larger") == ("larger", larger_config())
    assert cc.resolve(larger_config()) == ("larger", larger_config())
    assert cc.resolve(lib.PRESETS["gpt2"]) == ("gpt2", lib.PRESETS["gpt2"])
    assert cc.resolve("tiny") == costs.resolve_model("tiny")  # every name lib.costs knows
    assert cc.resolve(CHAT.replace(n_layers=1))[0] == "custom"
    assert set(cc.MODEL_CHOICES) == {"chat", "lm", "larger", *lib.PRESETS}


@pytest.mark.parametrize("call, message", [
    (lambda: cc.resolve("gpt-5"), "unknown model 'gpt-5'; allowed: a lib.ModelConfig or one of: larger, chat, draft, "
                                  "tiny, chat-gqa, lm, lm-draft, gpt2"),
    (lambda: cc.analytic_curves("chat", 0), "n (tokens to generate) must be an integer >= 1, got 0"),
    (lambda: cc.analytic_curves("chat", 65), "a prompt of 1 tokens leaves room for at most 64 new token(s) in "
                                             "the context window (max_seq_len=64), but n (tokens to generate)=65"),
    (lambda: cc.analytic_curves("chat", 10, prompt_len=0), "prompt_len must be an integer >= 1, got 0"),
    (lambda: cc.memory_curves("chat", 0), "n (tokens to generate) must be an integer >= 1, got 0"),
    (lambda: cc.memory_curves("chat", batch_size=0), "batch_size must be an integer >= 1, got 0"),
    (lambda: cc.plot_kv_counts(0), "n (tokens to generate) must be an integer >= 1, got 0"),
    (lambda: cc.plot_measured({"positions": [1]}), "measurements must be the dict returned by "
                                                  "lib.measure.measure_generation or measure_positions"),
    (lambda: cc.plot_measured({**FAKE, "positions": [1, 2, 4]}), "mismatched lengths: 3 positions but 4 times "
                                                                 "for mode 'no cache'"),
    (lambda: cc.plot_measured({**FAKE, "cumulative": {"static": [1]}}), "mismatched lengths: 4 positions but 1 "
                                                                        "cumulative times for mode 'static'"),
    (lambda: cc.plot_measured({**FAKE, "modes": ["no cache", "concat"]}), "measurements list modes ['concat'] "
                                                                          "without times or slopes"),
    (lambda: cc.plot_measured({k: v for k, v in FAKE.items() if k != "cumulative"}, cumulative=True),
     "these measurements have no cumulative times"),
])
def test_errors(call, message):
    with pytest.raises(ValueError) as e:
        call()
    assert message in str(e.value)


def test_model_type_error():
    with pytest.raises(TypeError, match=r"model must be a lib.ModelConfig or a name \(larger, chat, .*\), got int"):
        cc.resolve(7)


# ------------------------------------------------------------------------------------------- tier 1

def _draw_without_glyph_warnings(fig):
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        fig.canvas.draw()
    assert not [w for w in caught if "Glyph" in str(w.message)]


def test_plot_kv_counts():
    use_cjk_font()
    fig = cc.plot_kv_counts(n=16)
    a, b = fig.axes
    ys = {line.get_label().split(":")[0]: list(line.get_ydata()) for line in b.lines}
    assert ys["with cache"] == cumulative(costs.kv_computations(1, 16, True))
    assert ys["without cache"][-1] == 16 * 17 // 2
    assert [list(line.get_ydata()) for line in a.lines] == [costs.kv_computations(1, 16, u) for u in (True, False)]
    _draw_without_glyph_warnings(fig)


@pytest.mark.parametrize("cumulative_view", [False, True])
def test_plot_flops_draws_lib_costs_numbers(cumulative_view):
    fig = cc.plot_flops("chat", 32, cumulative=cumulative_view, loglog=True)
    c = cc.analytic_curves("chat", 32)
    src = c["flops_cumulative"] if cumulative_view else c["flops"]
    view = "cumulative" if cumulative_view else "per_step"
    ax = fig.axes[0]
    assert ax.get_xscale() == ax.get_yscale() == "log"
    lines = {line.get_label(): line for line in ax.lines}
    label = f"attention, without cache (slope {c['slopes'][view]['no cache']['attention']:.2f})"
    assert list(lines[label].get_ydata()) == src["no cache"]["attention"]
    assert list(lines[label].get_xdata()) == c["positions"]
    assert len(lines) == 4
    _draw_without_glyph_warnings(fig)


def test_plot_measured_and_memory_and_all_panels():
    fig = cc.plot_measured(FAKE, loglog=True)
    lines = {line.get_label(): list(line.get_ydata()) for line in fig.axes[0].lines}
    assert lines["static cache (in place) (slope 0.00)"] == [1.0, 1.0, 1.0, 1.2346]  # ms, rounded
    fig = cc.plot_measured(FAKE, cumulative=True)
    assert [list(line.get_ydata()) for line in fig.axes[0].lines][0] == [1.0, 3.0, 7.0, 15.0]
    fig = cc.plot_memory("llama-2-7b", 256)
    kv = fig.axes[0].lines[0]
    assert list(kv.get_ydata()) == [lib.kv_cache_bytes(lib.PRESETS["llama-2-7b"], t) for t in range(1, 257)]
    assert fig.axes[0].lines[1].get_ydata()[0] == costs.weight_bytes(lib.PRESETS["llama-2-7b"])
    fig = cc.plot_cost_curves("chat", 64, measurements=FAKE, loglog=True)
    assert len([ax for ax in fig.axes if ax.lines]) == 5
    _draw_without_glyph_warnings(fig)
    assert len(cc.plot_cost_curves("chat", 16).axes) == 4


def test_plot_memory_names_the_crossover_only_on_an_axis_that_reaches_it():
    lm = costs.resolve_model("lm")[1]
    cross = costs.kv_memory_crossover_tokens(lm)  # ~2,547 tokens: past the 512-token window at batch 1
    assert cross > lm.max_seq_len
    title = cc.plot_memory("lm").axes[0].get_title(loc="left")
    share = costs.kv_cache_bytes(lm, lm.max_seq_len) / costs.weight_bytes(lm)
    assert title == f"lm: at 512 tokens per sequence the KV cache\nis {share:.0%} of the weights' memory"
    fig = cc.plot_cost_curves("lm", 512, batch_size=8)  # 8 sequences: the crossover falls inside the window
    title = fig.axes[3].get_title(loc="left")
    assert title == f"lm: KV cache memory = weight memory\nat {cross / 8:,.0f} tokens per sequence"
    assert fig.axes[3].lines[0].get_label().startswith("KV cache, batch 8: ")


# ------------------------------------------------------------------------------------------- tier 2

def test_plotly_cost_curves():
    fig = cc.plotly_cost_curves("chat", 40)
    c = cc.analytic_curves("chat", 40)
    by_name = {t.name.split(" (slope")[0]: t for t in fig.data}
    assert list(by_name["attention, without cache"].y) == c["flops"]["no cache"]["attention"]
    assert list(by_name["projections + FFN, with cache"].y) == c["flops"]["cache"]["linear"]
    assert list(by_name["K/V, without cache"].y) == c["kv"]["no cache"]
    assert list(by_name["KV cache bytes"].y) == cc.memory_curves("chat", 40)["kv_bytes"]
    assert list(by_name["weights in memory"].y) == [costs.weight_bytes("chat")] * 2  # stored, not read per step
    view_menu, scale_menu = fig.layout.updatemenus
    per_step, cum = view_menu.buttons
    assert (per_step.label, cum.label) == ("per step", "cumulative")
    ys = cum.args[0]["y"]
    assert ys[1] == c["kv_cumulative"]["no cache"]
    assert ys[5] == c["flops_cumulative"]["no cache"]["attention"]
    assert list(cum.args[1]) == list(range(6))  # memory traces are left alone
    assert f"(slope {c['slopes']['cumulative']['no cache']['attention']:.2f})" in cum.args[0]["name"][5]
    linear, log = scale_menu.buttons
    assert log.args[0]["xaxis3.type"] == log.args[0]["yaxis.type"] == "log"
    assert linear.args[0]["xaxis2.type"] == "linear"
    assert len(fig.to_json()) < 60_000  # survives export, small
    # colours by concept, as the player counts: with a cache each K/V is "computed" once, without most are
    # "computed again"; weights their own; lines darkened to 3:1 where the concept's colour is lighter
    assert by_name["K/V, with cache"].line.color == style.graphic_colour("computed")
    assert by_name["K/V, without cache"].line.color == style.graphic_colour("recomputed")
    assert by_name["weights in memory"].line.color == style.graphic_colour("weights")
    # and a second cue: with / without differ in dash and marker, and carry a direct label at their ends
    w, wo = by_name["K/V, with cache"], by_name["K/V, without cache"]
    assert (w.line.dash, w.marker.symbol) != (wo.line.dash, wo.marker.symbol)
    assert (w.text[-1], wo.text[-1]) == ("with cache", "without cache")
    assert by_name["attention, with cache"].line.dash == "dash" != by_name["projections + FFN, with cache"].line.dash


def test_plotly_cost_curves_layout_never_overlaps():
    """The panels are named by their y axes (no titles over the panels to run together), the legend sits above
    the plots below the buttons, and the figure has no fixed width."""
    for fig in (cc.plotly_cost_curves("chat", 40), cc.CostCurvesExplorer("chat", n=40).figure):
        assert not fig.layout.annotations
        assert [fig.layout[f"yaxis{s}"].title.text for s in ("", "2", "3")] == [
            "K/V computed (per layer)", "FLOPs (solid: proj. + FFN, dashed: attention)", "memory, bytes (fp16)"]
        assert fig.layout.width is None and fig.layout.legend.y > 1 and fig.layout.legend.yanchor == "bottom"
        assert all(m.y > fig.layout.legend.y for m in fig.layout.updatemenus)
        assert fig.layout.legend.font.size is None and fig.layout.font.size is None  # the template's sizes


def test_plotly_measured_rounds_and_switches():
    fig = cc.plotly_measured(FAKE)
    assert list(fig.data[1].y) == [1.0, 1.0, 1.0, 1.2346]
    scale, view = fig.layout.updatemenus
    assert view.buttons[1].args[0]["y"][0] == [1.0, 3.0, 7.0, 15.0]
    assert view.buttons[1].args[0]["name"][0] == "no cache (slope 1.10)"
    # each mode: its concept's colour, and a marker and a dash of its own (the legend names it too)
    cues = {t.name.split(" (")[0]: (t.line.color, t.marker.symbol, t.line.dash) for t in fig.data}
    assert cues["no cache"] == (style.colour("recomputed"), "x", "dot")
    assert len({c[1:] for c in cues.values()}) == len(cues)
    only_steps = cc.plotly_measured({k: v for k, v in FAKE.items() if k != "cumulative"})
    assert len(only_steps.layout.updatemenus) == 1
    json.loads(fig.to_json())


def test_real_measurements_plot():
    """lib.measure's result goes straight into the plots (shapes only; the times are not checked)."""
    model = random_model(lib.ModelConfig(vocab_size=20, n_layers=1, d_model=16, n_heads=2, max_seq_len=16))
    m = measure_positions(model, [1, 2, 4, 8, 16], repeats=1, warmup=0)
    fig = cc.plot_measured(m, loglog=True)
    assert len(fig.axes[0].lines) == 3
    assert len(cc.plotly_measured(m).data) == 3


# ------------------------------------------------------------------------------------------- tier 3

@pytest.fixture(scope="module")
def explorer():
    return cc.CostCurvesExplorer(model="chat", n=64)


def test_explorer_draws_lib_costs_numbers(explorer):
    explorer.set(model="chat", n=20, show="both", view="per step", loglog=False)
    c = cc.analytic_curves("chat", 20)
    d = explorer.drawn
    assert d["axes"] == ("linear", "linear")
    xs, ys = d["traces"]["attention, without cache"]
    assert xs == c["positions"] and ys == c["flops"]["no cache"]["attention"]
    assert d["traces"]["K/V, with cache"][1] == c["kv"]["cache"]
    assert d["traces"]["KV cache bytes"][1] == cc.memory_curves("chat", 20)["kv_bytes"]
    assert d["traces"]["weights in memory"][1] == [costs.weight_bytes("chat")] * 2
    assert d["labels"]["attention, without cache"] == "attention, without cache"
    assert explorer.state == {"model": "chat", "n": 20, "show": "both", "view": "per step", "loglog": False}
    assert "K/V computed 20 with cache vs 210 without (10.5x)" in explorer.summary
    assert "K/V computed 20 with cache" in explorer.text.value
    assert explorer.last_update_seconds > 0


def test_explorer_views_and_overlay(explorer):
    explorer.set(model="chat", n=64, view="cumulative", loglog=True, show="without cache")
    c = cc.analytic_curves("chat", 64)
    d = explorer.drawn
    assert d["axes"] == ("log", "log")
    assert not any("with cache" in name for name in d["traces"])  # overlay off
    assert d["traces"]["attention, without cache"][1] == c["flops_cumulative"]["no cache"]["attention"]
    slope = c["slopes"]["cumulative"]["no cache"]["attention"]
    assert d["labels"]["attention, without cache"] == f"attention, without cache (slope {slope:.2f})"
    explorer.set(show="with cache", view="per step")
    d = explorer.drawn
    assert not any("without cache" in name for name in d["traces"])
    slope = c["slopes"]["per_step"]["cache"]["attention"]
    assert d["labels"]["attention, with cache"] == f"attention, with cache (slope {slope:.2f})"
    explorer.set(show="both", loglog=False)


def test_explorer_model_switch_resizes_slider(explorer):
    explorer.set(model="larger", n=512)
    assert explorer.n.max == 512
    explorer.set(model="llama-2-7b", n=4096)
    assert explorer.n.max == cc.N_MAX
    xs, ys = explorer.drawn["traces"]["attention, with cache"]
    assert len(xs) < 4096 and xs[0] == 1 and xs[-1] == 4096  # thinned for drawing ...
    full = cc.analytic_curves("llama-2-7b", 4096)["flops"]["cache"]["attention"]
    assert ys == [full[x - 1] for x in xs]  # ... every drawn point is still exact
    explorer.set(model="chat")
    assert (explorer.n.max, explorer.n.value) == (64, 64)  # n clamped into the chat window


@pytest.mark.parametrize("kw, message", [
    ({"n": 1}, "n=1 is outside the slider for chat: allowed 2..64"),
    ({"n": 65}, "allowed 2..64"),
    ({"model": "gpt-5"}, "unknown model 'gpt-5'"),
    ({"show": "neither"}, "show='neither' is not known; allowed: 'both', 'with cache', 'without cache'"),
    ({"view": "total"}, "view='total' is not known; allowed: 'per step', 'cumulative'"),
    ({"loglog": "yes"}, "loglog must be True or False, got 'yes'"),
])
def test_explorer_errors(explorer, kw, message):
    explorer.set(model="chat")
    with pytest.raises(ValueError) as e:
        explorer.set(**kw)
    assert message in str(e.value)


def test_display_index():
    assert cc._display_index(10) == list(range(10))
    idx = cc._display_index(4096)
    assert idx[0] == 0 and idx[-1] == 4095 and idx == sorted(set(idx))
    assert len(idx) <= cc.MAX_POINTS * 3 // 2 + 2


def test_static_lines_carry_a_second_cue_and_explorer_labels_are_whole():
    fig = cc.plot_kv_counts(8)
    with_c, without = fig.axes[0].lines
    assert (with_c.get_color(), without.get_color()) == (style.graphic_colour("computed"),
                                                         style.graphic_colour("recomputed"))
    assert with_c.get_marker() != without.get_marker() and with_c.get_linestyle() != without.get_linestyle()
    ex = cc.CostCurvesExplorer("chat", n=16)
    for control in (ex.model, ex.n, ex.show, ex.loglog):
        assert control.style.description_width == "initial", control.description
    assert ex.controls.children == (ex.model, ex.n, ex.loglog, ex.show, ex.view)


def test_explorer_output_holds_exactly_the_figure(explorer):
    """The live figure is drawn into a core Output widget (no FigureWidget): one plotly output, the figure as
    plotly's plotly_mimetype renderer makes it, redrawn on every change."""
    import plotly.io as pio

    explorer.set(model="chat", n=24, loglog=True, show="both", view="per step")
    (out,) = explorer.output.outputs
    shown = out["data"]["application/vnd.plotly.v1+json"]
    want = pio.renderers["plotly_mimetype"].to_mimebundle(explorer.figure.to_dict())["application/vnd.plotly.v1+json"]
    assert shown["data"] == want["data"] and shown["layout"] == want["layout"]
    assert shown["config"]["displaylogo"] is False
    assert [_array(d["x"])[-1] for d in shown["data"][:2]] == [24, 24] and shown["layout"]["xaxis"]["type"] == "log"
    assert out["data"]["text/plain"] == explorer.summary
    assert explorer.widget.children[-2] is explorer.output and explorer.output.layout.min_height == "470px"
    json.dumps(out)  # plain JSON all the way down: what the comm sends
    explorer.set(n=30, loglog=False)
    again = explorer.output.outputs[0]["data"]["application/vnd.plotly.v1+json"]
    assert _array(again["data"][0]["x"])[-1] == 30


def _array(v) -> list:
    """A plotly JSON array: a list, or a typed array {"dtype": "i8", "bdata": base64} as plotly sends numpy."""
    import base64

    import numpy as np

    return np.frombuffer(base64.b64decode(v["bdata"]), dtype=v["dtype"]).tolist() if isinstance(v, dict) else list(v)


def test_plotly_cost_curves_can_draw_fewer_points_with_the_same_slopes():
    full, thin = cc.plotly_cost_curves("lm", 512), cc.plotly_cost_curves("lm", 512, points=48)
    idx = cc._display_index(512, 48)
    assert len(idx) < 100 and idx[0] == 0 and idx[-1] == 511
    for a, b in zip(full.data, thin.data):
        assert a.name == b.name  # the legend's slopes: fitted over every step either way
        if len(a.x) == 512:
            assert list(b.x) == [a.x[i] for i in idx] and list(b.y) == [a.y[i] for i in idx]
    for a, b in zip(full.layout.updatemenus[0].buttons, thin.layout.updatemenus[0].buttons):  # per step / cumulative
        assert [list(y) for y in b.args[0]["y"]] == [[y[i] for i in idx] for y in a.args[0]["y"]]
    assert list(thin.data[-1].x) == [1, 512]  # the weights' flat line
    with pytest.raises(ValueError, match="points must be an integer >= 4, got 2"):
        cc.plotly_cost_curves("lm", 512, points=2)

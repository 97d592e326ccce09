"""Every figure reads in grey-scale, on a projector, in either theme (lib/widgets/style.py's promises, measured).

Each figure factory of lib/widgets is rendered on small inputs (the demo models, a few steps) and measured with
``style.legibility`` / ``style.text_sizes``:

- every pair of series of a legend (or of a panel's lines) stays apart in grey-scale: a lightness difference of
  ``style.MIN_LIGHTNESS_STEP`` L* or more, or a second cue (hatch, line dash, marker, glyph);
- every series has a graphics contrast of ``style.MIN_GRAPHIC_CONTRAST`` (3:1, WCAG 1.4.11) against the figure's
  background in the light and the dark theme (``style.BACKGROUNDS``: the white card in both);
- no text is under the type floor: ``style.SMALL_SIZE`` pt in matplotlib, ``style.PLOTLY_SMALL`` px in plotly;
- plotly figures are shown without their toolbar (``style.PLOTLY_CONFIG``).

The measured minima are printed (``pytest -s``) and written to ``test-artifacts/figure-legibility.txt``.
"""
from __future__ import annotations

import os
from pathlib import Path

import matplotlib
import pytest
import torch

matplotlib.use("Agg")

import lib  # noqa: E402
from lib.widgets import attention, blocks, cost_curves, memory, player, roofline, sampling, speculative, style, worked  # noqa: E402
from lib.widgets import capacity, ring, rope, tiles, timeline  # noqa: E402
from lib.widgets import decoder_diagram  # noqa: E402  -- nb01 --
from lib import serving  # noqa: E402

MEASURED: dict[str, dict] = {}


@pytest.fixture(scope="module")
def runs(chat, target_and_draft):
    model, tok = chat
    target, draft, _ = target_and_draft
    cached, uncached = player.generate_pair(model, tok, "<s>人工", max_new_tokens=4)
    att = lib.generate(model, tok.encode("<s>人工"), 4, trace=True)
    spec = lib.speculative.speculative_generate(target, draft, tok.encode("<s>the"), 12, k=3, eos_id=tok.eos_id)
    logits = sampling.next_token_logits(model, tok, "<s>人")
    tiny, tiny_tok = lib.load_demo("tiny")
    lm, lm_tok = lib.load_demo("lm")
    text = lib.lm.windows(lm_tok, lib.corpus.heldout_text("en"), lm.config.max_seq_len, 4)[0, :24]
    q, k, v, _ = tiles.layer_qkv(lm, text[None], 0)
    reqs = serving.demo_requests(tok, n=6, seed=3)
    served = {p: serving.serve(model, reqs, p, max_batch=3, eos_id=tok.eos_id) for p in ("static", "continuous")}
    return dict(served=served, tiles=tiles.tile_frames(q, k, v, block_size=8),
                ring=ring.ring_frames(lm, lm_tok, text, window=8, sinks=1),
                caps=capacity.sweep("llama-3-8b", "H100 SXM"),model=model, tok=tok, cached=cached, uncached=uncached, att=att.trace, spec=spec, logits=logits,
                frames=blocks.record_story(model, tok), worked=worked.run_worked_case(tiny, tiny_tok, "<s>", 4))


GPU = roofline.REFERENCE_MACHINES["H100 SXM"]
FACTORIES = {
    # matplotlib (tier 1)
    "player.plot_step": lambda r: player.plot_step(r["cached"], r["tok"], 2, r["uncached"]),
    "player.plot_strip": lambda r: player.plot_strip(r["cached"], r["tok"], r["uncached"]),
    "attention.plot_attention": lambda r: attention.plot_attention(r["att"], r["tok"]).figure,
    "attention.plot_attention_heads": lambda r: attention.plot_attention_heads(r["att"], r["tok"], layer=0),
    "sampling.plot_sampling": lambda r: sampling.plot_sampling(r["logits"], r["tok"], 0.8, top_k=5, top_p=0.9),
    "cost_curves.plot_kv_counts": lambda r: cost_curves.plot_kv_counts(n=12),
    "cost_curves.plot_flops": lambda r: cost_curves.plot_flops("gpt2", n=256, loglog=True).figure,
    "cost_curves.plot_cost_curves": lambda r: cost_curves.plot_cost_curves("chat", n=32),
    "cost_curves.plot_memory": lambda r: cost_curves.plot_memory("chat").figure,
    "memory.plot_kv_per_token": lambda r: memory.plot_kv_per_token("fp16"),
    "memory.plot_memory": lambda r: memory.plot_memory("llama-2-7b", "fp16", batches=(1, 8, 32)),
    "blocks.plot_story": lambda r: blocks.plot_story(r["frames"]),
    "speculative.plot_rounds": lambda r: speculative.plot_rounds(r["spec"], r["tok"]).figure,
    "roofline.plot_roofline": lambda r: roofline.plot_roofline(
        roofline.roofline_points(batches=(1, 64)), GPU).figure,
    "roofline.plot_operator_roofline": lambda r: roofline.plot_operator_roofline("llama-2-7b", GPU).figure,
    "roofline.plot_bytes_split": lambda r: roofline.plot_bytes_split("llama-2-7b", "bf16").figure,
    "timeline.timeline_figure": lambda r: timeline.timeline_figure(r["served"]),
    "rope.rope_figure": lambda r: rope.rope_figure(head_dim=16, positions=range(4), pairs=(0, 2)),
    "tiles.plot_tiles": lambda r: tiles.plot_tiles(r["tiles"]),
    "ring.plot_ring": lambda r: ring.plot_ring(r["ring"], every=6),
    "capacity.plot_capacity": lambda r: capacity.plot_capacity(r["caps"]),
    # -- nb01 -- the decoder block as a diagram (notebook 01), for the toy and for a GQA/RoPE/SwiGLU shape
    "decoder_diagram.decoder_diagram": lambda r: decoder_diagram.decoder_diagram(r["model"].config),
    "decoder_diagram.decoder_diagram (llama-3-8b)": lambda r: decoder_diagram.decoder_diagram(lib.PRESETS["llama-3-8b"]),
    # plotly (tier 2): from here on, PLOTLY_FACTORIES
    "player.player_figure": lambda r: player.player_figure(r["cached"], r["tok"], r["uncached"]),
    "attention.attention_figure": lambda r: attention.attention_figure(r["att"], r["tok"]),
    "sampling.sampling_figure": lambda r: sampling.sampling_figure(r["logits"], r["tok"], n_bars=8),
    "cost_curves.plotly_cost_curves": lambda r: cost_curves.plotly_cost_curves("chat", n=32),
    "memory.memory_figure": lambda r: memory.memory_figure("llama-2-7b", "fp16"),
    "blocks.story_figure": lambda r: blocks.story_figure(r["frames"]),
    "speculative.rounds_figure": lambda r: speculative.rounds_figure(r["spec"], r["tok"]),
    "roofline.plotly_batch_roofline": lambda r: roofline.plotly_batch_roofline(("chat", "llama-2-7b"), GPU, "bf16"),
    "worked.worked_figure": lambda r: worked.worked_figure(r["worked"]),
    "tiles.tile_figure": lambda r: tiles.tile_figure(r["tiles"]),
    "ring.ring_figure": lambda r: ring.ring_figure(r["ring"]),
    # -- nb0506 -- where the KV cache sits in GPU memory while serving (notebook 05)
    "gpu_memory.plot_serving_memory": lambda r: __import__("lib.widgets.gpu_memory", fromlist=["gpu_memory"])
    .plot_serving_memory("llama-3-8b", "H100 SXM", batches=(1, 16, 64), context=8192),
}

PLOTLY_FACTORIES = set(list(FACTORIES)[list(FACTORIES).index("player.player_figure"):]) | {
    "cache_tensor.cache_tensor_figure"}

# -- nb03 -- the cache tensor (lib/widgets/cache_tensor.py): the chat model's cache after a prefill and one decode step
from lib.widgets import cache_tensor  # noqa: E402


def _prefilled_and_one_decode_step(r):
    cache = lib.KVCache(r["model"].config, batch_size=1, max_len=12)
    with torch.no_grad():
        r["model"](torch.tensor([r["tok"].encode("<s>人工")]), cache=cache)
        r["model"](torch.tensor([r["tok"].encode("智")]), cache=cache)
    return cache


FACTORIES["cache_tensor.cache_tensor_figure"] = lambda r: cache_tensor.cache_tensor_figure(
    _prefilled_and_one_decode_step(r))
# -- end nb03 --


def _figure(obj):
    """A factory's result as a matplotlib Figure or a plotly figure dict."""
    if hasattr(obj, "to_dict"):
        return obj.to_dict()
    return obj


@pytest.fixture(autouse=True, scope="module")
def _course_style():
    import matplotlib as mpl
    import plotly.io as pio

    template = pio.templates.default
    with mpl.rc_context():
        style.apply()
        yield
    pio.templates.default = template


@pytest.mark.parametrize("name", list(FACTORIES))
def test_series_stay_apart_in_grey_scale_and_stand_out_in_both_themes(name, runs):
    fig = _figure(FACTORIES[name](runs))
    found = style.legibility(fig)
    small = style.text_sizes(fig)
    MEASURED[name] = {**found, "n_sets": len(style.series_of(fig)),
                      "min_text": min((s for _, s in small), default=None)}
    assert not found["merged"], f"{name}: series grey-scale cannot tell apart: {found['merged']}"
    assert not found["faint"], f"{name}: series under {style.MIN_GRAPHIC_CONTRAST}:1: {found['faint']}"
    assert not small, f"{name}: text under the floor ({style.SMALL_SIZE} pt / {style.PLOTLY_SMALL} px): {small[:8]}"


@pytest.mark.parametrize("name", [n for n in FACTORIES if n not in PLOTLY_FACTORIES])
def test_no_two_texts_of_a_figure_are_drawn_over_each_other(name, runs):
    """Tick labels, titles, keys and texts in the panels each stand clear of the others (style.text_collisions):
    what the checks above cannot see (a key wider than its figure squeezing the panels, x labels run together)."""
    fig = _figure(FACTORIES[name](runs))
    clashes = style.text_collisions(fig)
    assert not clashes, f"{name}: texts drawn over each other (text, text, px): {clashes[:6]}"


@pytest.mark.parametrize("name", [n for n in FACTORIES if n not in PLOTLY_FACTORIES])
def test_no_legend_is_drawn_over_a_line(name, runs):
    """A key never sits on the curves (style.legend_collisions samples every line along its segments): where the
    curves fill a panel, style.place_legend grows room above them."""
    fig = _figure(FACTORIES[name](runs))
    covered = style.legend_collisions(fig)
    assert not covered, f"{name}: legends over lines (legend, line, points under it): {covered[:6]}"


def test_plotly_figures_show_no_toolbar():
    import plotly.graph_objects as go
    import plotly.io as pio

    from lib.notebook import setup
    from lib.widgets import live

    renderer = pio.renderers["plotly_mimetype"].config
    try:
        setup(verbose=False)
        bundle = go.Figure()._repr_mimebundle_({}, {})
        assert bundle[live.PLOTLY_MIME]["config"]["displayModeBar"] is False
        assert live.figure_bundle(go.Figure(), "x")[live.PLOTLY_MIME]["config"]["displayModeBar"] is False
    finally:
        pio.renderers["plotly_mimetype"].config = renderer
        torch.set_num_threads(1)


def test_stored_pngs_are_cropped_and_in_a_palette():
    import io

    import matplotlib.pyplot as plt
    from PIL import Image

    from lib.notebook import figure_png

    fig = plt.figure(figsize=(4, 2), layout="none")
    ax = fig.add_axes([0.4, 0.4, 0.2, 0.2])  # a small plot in the middle of an empty canvas
    ax.plot([0, 1], [0, 1], color=style.colour("cached"), lw=4)
    full = io.BytesIO()
    fig.savefig(full, format="png")
    png = figure_png(fig)
    image = Image.open(io.BytesIO(png))
    assert image.mode == "P" and len(png) < len(full.getvalue())
    assert image.size[0] < 300  # cropped to the content: narrower than the 4-inch (400 px) canvas
    assert style.colour("cached").lower() in {"#%02x%02x%02x" % c for _, c in image.convert("RGB").getcolors(4096)}
    rgba = image.convert("RGBA")
    assert rgba.getpixel((0, 0))[3] == 0 and rgba.getpixel((image.size[0] - 1, image.size[1] - 1))[3] == 0  # corners
    assert rgba.getpixel((image.size[0] // 2, 2)) == (255, 255, 255, 255)  # the card's white margin at the edge


def test_the_measure_tells_a_merged_pair_from_one_with_a_second_cue():
    a = style.Series("a", style.colour("cached"))
    b = style.Series("b", style.colour("recomputed"))  # blue vs vermillion: 8 L* apart, one grey in print
    assert not style.told_apart(a, b)[0]
    assert style.told_apart(a, style.Series("b", b.colour, hatch="xx"))[0]
    assert style.told_apart(a, style.Series("b", b.colour, dash="--"))[0]
    assert style.told_apart(style.Series("w", style.PAPER), style.Series("k", style.INK))[0]
    assert style.Series("yellow", style.colour("newest")).contrast(style.PAPER) < 3  # a yellow line is invisible
    assert style.Series("yellow", style.colour("newest"), ink=(style.MUTED,)).contrast(style.PAPER) >= 3


def test_zz_report_the_measured_minima():
    """The figures for the note: the smallest contrast and lightness step over every figure measured above."""
    if not MEASURED:
        pytest.skip("run with the figure tests")
    lines = [f"{'figure':36s} sets  min contrast  min ΔL* (no 2nd cue)  min text"]
    for name, m in MEASURED.items():
        step = "-" if m["min_step"] is None else f"{m['min_step']:.1f}"
        con = "-" if m["min_contrast"] is None else f"{m['min_contrast']:.2f}:1"
        lines.append(f"{name:36s} {m['n_sets']:4d}  {con:>12s}  {step:>20s}  {m['min_text'] or 'ok'}")
    contrasts = [m["min_contrast"] for m in MEASURED.values() if m["min_contrast"] is not None]
    steps = [m["min_step"] for m in MEASURED.values() if m["min_step"] is not None]
    lines.append(f"overall: min contrast {min(contrasts):.2f}:1 (floor {style.MIN_GRAPHIC_CONTRAST}:1), "
                 f"min lightness step without a second cue {min(steps) if steps else float('nan'):.1f} L* "
                 f"(floor {style.MIN_LIGHTNESS_STEP}), text floor {style.SMALL_SIZE} pt / {style.PLOTLY_SMALL} px")
    report = "\n".join(lines)
    print("\n" + report)
    out = Path(os.environ.get("KVLAB_ARTIFACTS", Path(__file__).resolve().parent.parent / "test-artifacts"))
    try:
        out.mkdir(parents=True, exist_ok=True)
        (out / "figure-legibility.txt").write_text(report + "\n", encoding="utf-8")
    except OSError:  # a read-only checkout still runs the test
        pass

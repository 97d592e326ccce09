"""lib.roofline (the roofline, reference machines, measurement) and its widgets (lib.widgets.roofline).
What a pass costs (FLOPs, bytes, crossovers, batching) is lib.costs's, tested in test_costs.py."""

import matplotlib.pyplot as plt
import pytest
import torch

from helpers import drawn_without_missing_glyphs
import lib
from lib import costs
from lib import roofline as rl
from lib.widgets import roofline as wr

# 1 layer, d_model 4, 1 head, d_ff 8, vocab 10, 16 learned positions (counted by hand in test_costs.py):
# a pass reads 880 weight bytes in fp32, and the KV cache holds 32 bytes per token.
TINY = lib.ModelConfig(vocab_size=10, n_layers=1, d_model=4, n_heads=1, d_ff=8, max_seq_len=16)


# ------------------------------------------------------------------------------------------ the roofline

def test_roofline_min_logic():
    assert rl.attainable_gflops(1, 100, 10) == 10  # memory slope: 1 FLOP/B × 10 GB/s
    assert rl.attainable_gflops(5, 100, 10) == 50
    assert rl.attainable_gflops(10, 100, 10) == 100  # the ridge
    assert rl.attainable_gflops(1000, 100, 10) == 100  # flat roof
    assert rl.bound(9.99, 100, 10) == "memory-bound"
    assert rl.bound(10, 100, 10) == "compute-bound"
    m = rl.Machine("toy", 100, 10, "fp32")
    assert m.ridge == 10 and m.attainable(2.5) == 25 and m.bound(20) == "compute-bound"


def test_machine_time_bounds():
    m = rl.Machine("toy", 100, 10, "fp32")  # 100 GFLOP/s, 10 GB/s
    c = costs.decode_cost(TINY, 4, 1, "fp32")  # 400 FLOPs, 1040 bytes: memory-bound
    assert m.seconds(c) == pytest.approx(1040 / 10e9)
    assert m.tokens_per_second(c) == pytest.approx(10e9 / 1040)
    p = costs.prefill_cost("llama-2-7b", 2048, 1, "bf16")
    gpu = rl.DEFAULT_GPU
    assert gpu.bound(p.intensity) == "compute-bound" and gpu.seconds(p) == pytest.approx(p.flops / 989.4e12)
    d = costs.decode_cost("llama-2-7b", 2048, 1, "bf16")  # ~14.29 GB at 3.35 TB/s: ~4.27 ms
    assert gpu.bound(d.intensity) == "memory-bound" and gpu.seconds(d) == pytest.approx(d.bytes / 3.35e12)
    with pytest.raises(TypeError, match="Machine.seconds needs a lib.costs.StepCost"):
        m.seconds(400)


def test_reference_machines_are_the_datasheet_numbers():
    h100, h200 = rl.REFERENCE_MACHINES["H100 SXM"], rl.REFERENCE_MACHINES["H200 SXM"]
    assert (h100.peak_gflops, h100.bandwidth_gbs, h100.dtype) == (989_400.0, 3_350.0, "bf16")
    assert (h200.peak_gflops, h200.bandwidth_gbs, h200.dtype) == (989_400.0, 4_800.0, "bf16")
    assert h200.ridge == pytest.approx(206.125) and "nvidia.com" in h200.source
    assert rl.DEFAULT_GPU is h100 and h100.ridge == pytest.approx(295.343, abs=1e-3)  # "a GPU" in the course


def test_roofline_errors():
    with pytest.raises(ValueError, match=r"intensity \(FLOP/byte\) must be a finite number > 0, got -1"):
        rl.attainable_gflops(-1, 100, 10)
    with pytest.raises(ValueError, match="peak_gflops must be a finite number > 0, got inf"):
        rl.attainable_gflops(1, float("inf"), 10)
    with pytest.raises(ValueError, match="bandwidth_gbs must be a finite number > 0, got None"):
        rl.bound(1, 100, None)
    with pytest.raises(ValueError, match="Machine.bandwidth_gbs must be a finite number > 0, got 0"):
        rl.Machine("x", 100, 0)
    with pytest.raises(ValueError, match="Machine.name must be a non-empty string"):
        rl.Machine("", 100, 10)
    with pytest.raises(ValueError, match="unknown dtype 'fp7'"):
        rl.Machine("x", 100, 10, "fp7")
    assert rl.Machine("x", 100, 10, torch.float32).dtype == "fp32"


# ------------------------------------------------------------------------------------------- measurement

def test_measurements_return_positive_floats_and_restore_threads():
    before = torch.get_num_threads()
    peak = rl.measure_peak_gflops("cpu", n=64, repeats=2, threads=1)
    bw = rl.measure_bandwidth_gbs("cpu", nbytes=1 << 20, repeats=2, threads=1)
    assert isinstance(peak, float) and peak > 0
    assert isinstance(bw, float) and bw > 0
    assert torch.get_num_threads() == before
    m = rl.measure_machine("cpu", threads=1, repeats=1, n=64, nbytes=1 << 20)
    assert isinstance(m, rl.Machine) and m.dtype == "fp32" and m.peak_gflops > 0 and m.bandwidth_gbs > 0
    assert m.name == "this machine (cpu)" and "cpu (1 threads)" in m.source and "measured" in m.source
    assert torch.get_num_threads() == before


def test_measurement_on_each_device(device):
    assert rl.measure_peak_gflops(device, n=128, repeats=1) > 0
    assert rl.measure_bandwidth_gbs(device, nbytes=1 << 22, repeats=1) > 0


def test_fixed_threads_restores_after_an_error():
    before = torch.get_num_threads()
    with pytest.raises(RuntimeError, match="boom"):
        with rl.fixed_threads(1) as n:
            assert n == 1 and torch.get_num_threads() == 1
            raise RuntimeError("boom")
    assert torch.get_num_threads() == before


def test_measurement_errors():
    with pytest.raises(ValueError, match="threads must be a positive integer"):
        rl.measure_peak_gflops("cpu", n=8, threads=0)
    with pytest.raises(ValueError, match=r"n \(matrix size\) must be an integer >= 1, got 0"):
        rl.measure_peak_gflops("cpu", n=0)
    with pytest.raises(ValueError, match="unsupported dtype 'int8'; allowed: torch.float32"):
        rl.measure_peak_gflops("cpu", n=8, dtype="int8")
    assert rl.measure_peak_gflops("cpu", n=32, repeats=1, dtype="bf16") > 0
    with pytest.raises(ValueError, match="nbytes must be an integer >= 4"):
        rl.measure_bandwidth_gbs("cpu", nbytes=2)
    with pytest.raises(ValueError, match="repeats must be an integer >= 1, got 0"):
        rl.measure_bandwidth_gbs("cpu", nbytes=1024, repeats=0)
    with pytest.raises(ValueError, match="is not a device name|is not available here"):
        rl.measure_machine("tpu")


# ------------------------------------------------------------------------------------------------ widgets

GPU = rl.DEFAULT_GPU


def test_sig_fmt_and_bytes():
    assert wr.sig(1234.5678) == 1235.0 and wr.sig(0.000123456) == 0.0001235
    assert wr.fmt(13480000000.0 / 1e6) == "13480" and wr.fmt(0.00009539) == "0.00009539" and wr.fmt(7) == "7"
    assert wr.human_bytes(13_476_831_232) == "13.48 GB" and wr.human_bytes(512) == "512 B"


def test_points_and_tables_come_from_lib_costs():
    points = wr.roofline_points(("chat", "llama-2-7b"), "bf16", batches=(1, 8))
    assert [(p["model"], p["phase"], p["batch"], p["context"]) for p in points[:4]] == [
        ("chat", "prefill", 1, 32), ("chat", "decode", 1, 32), ("chat", "prefill", 8, 32), ("chat", "decode", 8, 32)]
    assert points[-1]["cost"] == costs.decode_cost("llama-2-7b", 2048, 8, "bf16")
    rows = wr.cost_rows(points, GPU)
    assert rows[-1]["FLOP/byte"] == wr.sig(points[-1]["cost"].intensity)
    assert rows[-1]["weights read MB"] == wr.sig(costs.streamed_weight_bytes("llama-2-7b", "bf16") / 1e6) == 13210
    assert rows[-1]["bound"] == "memory-bound" and rows[-2]["bound"] == "compute-bound"
    table = wr.cost_table(points, GPU)
    assert table.splitlines()[0].split()[:4] == ["model", "phase", "batch", "context"] and len(table.splitlines()) == 10
    cross = wr.crossover_rows(("tiny", "llama-2-7b"), "bf16", batches=(1, 64))
    assert cross[1]["KV read = weights read at batch×ctx"] == 25205 == round(costs.kv_read_crossover_tokens("llama-2-7b"))
    assert cross[1]["ctx @B=1"] == "25205 >max" and cross[1]["ctx @B=64"] == "394"  # 25,205 / 64 = 393.8
    assert cross[0]["ctx @B=1"] == f"{round(costs.kv_read_crossover_tokens('tiny', 'bf16'))} >max"
    ridge = wr.ridge_rows(("llama-3-8b",), GPU, contexts=(128, 2048))
    assert [r["batch to ridge"] for r in ridge] == [440, "never"]
    assert "never" in wr.ridge_table(("llama-3-8b",), contexts=(2048,))
    with pytest.raises(ValueError, match="at least one model and one batch size"):
        wr.roofline_points((), "bf16")
    with pytest.raises(ValueError, match="cost_rows needs at least one point"):
        wr.cost_table([])
    cpu = rl.Machine("cpu", 50.0, 20.0, "fp32")
    assert wr.cost_rows(points[:1], cpu)[0]["GFLOP/s"] == wr.sig(cpu.attainable(points[0]["cost"].intensity))


def test_operator_table_lists_every_operator_and_the_total():
    c = costs.decode_cost("tiny", 4, 1, "fp32")
    rows = wr.operator_rows(c)
    assert [r["operator"] for r in rows] == [*costs.OPERATORS, "total"]
    for key in ("FLOPs", "weights read B", "KV read B", "KV write B"):
        assert rows[-1][key] == sum(r[key] for r in rows[:-1])
    assert (rows[-1]["FLOPs"], rows[-1]["weights read B"], rows[-1]["KV read B"], rows[-1]["KV write B"]) == \
        (1944, 4080, 256, 64)
    text = wr.operator_table(c)
    assert text.splitlines()[-1].split() == ["total", "1944", "4080", "256", "64"]
    with pytest.raises(TypeError, match="operator_rows needs a lib.costs.StepCost"):
        wr.operator_rows(rows)
    p = wr.step_point(costs.model_config("tiny"), c, label="step 3")
    assert (p["model"], p["phase"], p["context"], p["label"]) == ("tiny", "decode", 4, "step 3")
    with pytest.raises(TypeError, match="step_point needs a lib.costs.StepCost"):
        wr.step_point("tiny", rows)


def test_roof_line_is_exact():
    h200 = rl.REFERENCE_MACHINES["H200 SXM"]
    xs, ys = wr.roof_line(h200, 0.5, 1000)
    assert xs == [0.5, h200.ridge, 1000] and ys == [0.5 * 4800, 989_400, 989_400]
    assert wr.roof_line(h200, 300, 1000) == ([300, 1000], [989_400, 989_400])


def test_static_figures_draw_without_missing_glyphs():
    fig = drawn_without_missing_glyphs(
        lambda: wr.plot_roofline(wr.roofline_points(batches=(1, 64)), GPU, title="人工智能 roofline"))
    assert len(fig.axes[0].collections) == 12  # 3 models × 2 phases × 2 batches
    fig = drawn_without_missing_glyphs(lambda: wr.plot_bytes_split("llama-2-7b", "bf16", batches=(1, 8, 64)))
    dots = [c.get_offsets()[0] for c in fig.axes[0].collections]
    # KV reads equal the weights read at 25,205 / batch tokens per sequence; batch 1's is past the plot
    assert [round(x, 2) for x, _ in dots] == [3150.63, 393.83]
    assert all(y == costs.streamed_weight_bytes("llama-2-7b", "bf16") / 1e9 for _, y in dots)
    with pytest.raises(ValueError, match="at least one point"):
        wr.plot_roofline([], GPU)


def _all_numbers(obj):
    if isinstance(obj, float):
        yield obj
    elif isinstance(obj, dict):
        for v in obj.values():
            yield from _all_numbers(v)
    elif isinstance(obj, (list, tuple)):
        for v in obj:
            yield from _all_numbers(v)


def test_plotly_batch_slider_moves_decode_toward_the_roof():
    batches = (1, 4, 64, 1024)
    fig = wr.plotly_batch_roofline(("chat", "llama-3-8b"), GPU, "bf16",
                                   contexts={"chat": [32], "llama-3-8b": [128, 2048]}, batches=batches)
    assert [f.name for f in fig.frames] == ["1", "4", "64", "1024"]
    assert [s["label"] for s in fig.layout.sliders[0].steps] == ["1", "4", "64", "1024"]
    for frame, b in zip(fig.frames, batches):
        llama = frame.data[1]
        assert list(llama.x) == [wr.sig(costs.decode_cost("llama-3-8b", t, b, "bf16").intensity) for t in (128, 2048)]
        assert frame.traces == (0, 1)
    xs = [fr.data[1].x[0] for fr in fig.frames]
    assert xs == sorted(xs)  # the batch pushes the context-128 point right...
    limit = next(t for t in fig.data if t.name == "llama-3-8b batch→∞")
    assert xs[-1] < limit.x[0]  # ...toward its batch → ∞ limit
    assert "H100 SXM roofline" in wr.plotly_batch_roofline(("chat",), batches=(1,)).layout.title.text  # the default
    d = fig.to_plotly_json()
    assert all(x == wr.sig(x) for x in _all_numbers(d["data"]))
    with pytest.raises(ValueError, match=r"start=3 is not one of the batch sizes \[1, 4, 64, 1024\]"):
        wr.plotly_batch_roofline(("chat",), GPU, batches=batches, start=3)
    with pytest.raises(ValueError, match=r"contexts has no entry for \['llama-3-8b'\]"):
        wr.plotly_batch_roofline(("chat", "llama-3-8b"), GPU, contexts={"chat": [32]})


def test_explorer_is_driven_from_python():
    e = wr.RooflineExplorer(model="llama-3-8b", dtype="bf16", batch=1, context=2048)
    s = e.state
    assert (s["model"], s["dtype"], s["batch"], s["context"]) == ("llama-3-8b", "bf16", 1, 2048)
    assert s["machine"] == "H100 SXM" and s["ridge"] == wr.sig(GPU.ridge)
    assert s["decode_intensity"] == wr.sig(costs.decode_cost("llama-3-8b", 2048, 1, "bf16").intensity)
    assert s["decode_bound"] == "memory-bound" and s["prefill_bound"] == "compute-bound"
    assert s["batch_to_ridge"] is None and "never reaches the ridge" in e.summary
    assert s["read_crossover_context"] == round(costs.kv_read_crossover_tokens("llama-3-8b", "bf16"))
    assert f"KV reads equal the weights read at context {s['read_crossover_context']:,} per sequence" in e.summary
    assert e.drawn["decode"] == ([s["decode_intensity"]], [wr.sig(GPU.attainable(s["decode_intensity"]) / 1e3)])
    assert e.last_update_seconds > 0
    e.set(batch=512, context=128)
    assert e.state["batch_to_ridge"] == 440 and e.state["decode_bound"] == "compute-bound"
    assert e.drawn["decode"][0] == [wr.sig(costs.decode_cost("llama-3-8b", 128, 512, "bf16").intensity)]
    e.controls["batch"].value = 2  # what a user's drag does: the observe callback redraws
    assert e.state["batch"] == 2 and e.state["decode_bound"] == "memory-bound"
    e.set(model="chat", dtype="fp32", context=128)
    assert "context 128 is longer than this model's max_seq_len 64" in e.summary
    assert "bf16 peak, not a fp32 one" in e.summary
    assert "<br>" in e.summary_box.value
    assert e.controls["dtype"].options == tuple(lib.device.DTYPES) and e.controls["model"].options == lib.presets.MODEL_NAMES


def test_explorer_with_a_measured_machine_and_errors():
    mine = rl.Machine("my laptop", 50.0, 20.0, "fp32", "made up")
    e = wr.RooflineExplorer(model="chat", dtype="fp32", context=32, machine="my laptop", machines=[mine])
    assert e.state["ridge"] == 2.5 and e.drawn["roof"] == ([0.1, 2.5, 1e6], [2.0, 50.0, 50.0])
    assert e.figure.layout.yaxis.title.text == "attainable GFLOP/s"
    with pytest.raises(ValueError, match=r"batch=3 is not one of the explorer's choices: 1, 2, 4"):
        e.set(batch=3)
    with pytest.raises(TypeError, match="batch must be an integer, got bool True"):
        e.set(batch=True)
    with pytest.raises(ValueError, match="model='llama-9b' is not one of the explorer's choices"):
        e.set(model="llama-9b")
    with pytest.raises(ValueError, match=r"unknown control\(s\) \['temperature'\]; allowed: model, dtype"):
        e.set(temperature=1.0)
    with pytest.raises(TypeError, match="machines must hold lib.roofline.Machine objects"):
        wr.RooflineExplorer(machines=["H300"])
    assert e.state["batch"] == 1  # a refused set() changes nothing


def test_trace_points_follow_a_real_run():
    model, tok = lib.load_demo("tiny")
    out = lib.generate(model, tok.encode("<s>"), 8, eos_id=tok.eos_id, trace=True)
    assert tok.decode(out.sequences[0].tolist()) == "<s>深度学习<eos>"
    points = wr.trace_points(out.trace, "tiny", "fp32")
    # context = the positions each step's query attended to = the cache length after the step
    assert [(p["phase"], p["context"], p["cost"].n_new, p["cost"].n_past) for p in points] == [
        ("prefill", 1, 1, 0), ("decode", 2, 1, 1), ("decode", 3, 1, 2), ("decode", 4, 1, 3), ("decode", 5, 1, 4)]
    assert [p["context"] for p in points] == [s.cache_len for s in out.trace]
    assert [p["label"] for p in points] == [f"step {i}" for i in range(5)]
    assert points[3]["cost"] == costs.decode_cost("tiny", 4, 1, "fp32")
    # tiny at context 4 by hand: per layer 2·4·3·4 + 2·(2·4·4) + 2·4·4 + 2·4·16·2 = 448,
    # × 2 layers, + lm_head 2·4·131; weights (1608 − 16·4 − 131·4) × 4 B = 4080 B; KV 4 tokens read, 1 written
    assert points[3]["cost"].flops == 2 * 448 + 2 * 4 * 131 == 1944
    rows = wr.cost_rows(points, raw=True)
    assert rows[3] == {"model": "tiny", "phase": "decode", "batch": 1, "context": 4, "FLOPs": 1944,
                       "weights read B": 4080, "KV read B": 256, "KV write B": 64, "FLOP/byte": wr.sig(1944 / 4400)}
    no_cache = lib.generate(model, tok.encode("<s>"), 3, use_cache=False, trace=True)
    with pytest.raises(ValueError, match="trace_points needs a run with the KV cache"):
        wr.trace_points(no_cache.trace, "tiny")
    with pytest.raises(TypeError, match="trace must be a lib.Trace"):
        wr.trace_points(out, "tiny")


# ---------------------------------------------------------------------------------- per operator group

@pytest.mark.parametrize("model", ["llama-2-7b", "llama-3-8b", "chat", "gpt2"])
@pytest.mark.parametrize("context,batch", [(1, 1), (128, 64), (4096, 256)])
def test_operator_groups_add_up_to_the_step(model, context, batch):
    cost = costs.decode_cost(model, context, batch, "bf16")
    groups = rl.operator_groups(cost)
    assert set(groups) == set(rl.OPERATOR_GROUPS) and \
        sorted(n for names in rl.OPERATOR_GROUPS.values() for n in names) == sorted(costs.OPERATORS)
    for what in ("flops", "streamed_weight_bytes", "kv_read_bytes", "kv_write_bytes", "bytes"):
        assert sum(getattr(g, what) for g in groups.values()) == getattr(cost, what)
    w, a = groups["weight products"], groups["attention"]
    assert w.kv_read_bytes == w.kv_write_bytes == 0 and a.streamed_weight_bytes == 0
    got = rl.operator_intensity(cost)
    assert got == {"weight products": w.flops / w.bytes, "attention": a.flops / a.bytes, "step": cost.intensity}


def test_weight_products_scale_with_the_batch_and_attention_does_not():
    """Decode in bf16: the weight products do ≈ B FLOP/byte at any context; attention ≈ n_heads / n_kv_heads
    FLOP/byte at any batch (1 for MHA, 4 for Llama-3-8B's GQA), a little less at short context (the K/V write)."""
    for model, n_rep in (("llama-2-7b", 1), ("llama-3-8b", 4)):
        for t in (128, 2048, 32768):
            for b in (1, 16, 256):
                x = rl.operator_intensity(costs.decode_cost(model, t, b, "bf16"))
                assert x["weight products"] == pytest.approx(b, rel=2e-4)  # norms: read, never multiplied
                assert x["attention"] == pytest.approx(n_rep * t / (t + 1), rel=1e-9)
                assert min(x["weight products"], x["attention"]) <= x["step"] <= max(x["weight products"], x["attention"])


def test_weight_products_ridge_batch():
    h100 = rl.DEFAULT_GPU
    for model in ("llama-2-7b", "llama-3-8b", "qwen2.5-7b", "chat"):
        b = rl.weight_products_ridge_batch(model, h100, "bf16")
        for t in (2, 4096):
            at = lambda n: rl.operator_intensity(costs.decode_cost(model, t, n, "bf16"))["weight products"]
            assert h100.bound(at(b)) == "compute-bound" and h100.bound(at(b - 1)) == "memory-bound"
    assert rl.weight_products_ridge_batch("llama-2-7b", h100, "bf16") == 296  # ridge 295.3, a hair under B
    with pytest.raises(TypeError, match=r"machine must be a lib.roofline.Machine .*got str"):
        rl.weight_products_ridge_batch("llama-2-7b", "H100 SXM")
    with pytest.raises(TypeError, match=r"operator_groups needs a lib.costs.StepCost .*got int"):
        rl.operator_groups(3)


def test_operator_group_table_and_figure():
    h100 = rl.DEFAULT_GPU
    rows = wr.operator_group_rows("llama-2-7b", h100, batches=(1, 512), contexts=(128, 32768))
    assert [(r["context"], r["batch"]) for r in rows] == [(128, 1), (128, 512), (32768, 1), (32768, 512)]
    assert [r["weights"] for r in rows] == ["memory", "compute", "memory", "compute"]  # whatever the context
    assert all(r["attention"] == "memory" for r in rows)  # whatever the batch
    assert [r["step"] for r in rows] == ["memory"] * 4
    assert rows[3]["step FLOP/B"] == wr.sig(costs.decode_cost("llama-2-7b", 32768, 512, "bf16").intensity)
    assert wr.operator_group_table("llama-2-7b", h100, (1,), (128,)).splitlines()[0].split()[:3] == \
        ["model", "context", "batch"]
    with pytest.raises(ValueError, match="needs at least one context"):
        wr.operator_group_rows("llama-2-7b", contexts=())
    fits = wr.operator_group_rows("llama-2-7b", h100, batches=(30, 31), contexts=(4096,))
    assert [r["fits?"] for r in fits] == ["yes", "no"]  # vLLM's pool on the H100 holds 30 sequences of 4,096
    assert "fits?" not in wr.operator_group_rows("llama-2-7b", rl.Machine("cpu", 50.0, 20.0, "fp32"), (1,), (128,))[0]
    fig = wr.plot_operator_roofline("llama-3-8b", h100, batches=(1, 64, 1024), contexts=(128, 8192))
    ax = fig.axes[0]
    blue, red = [c.get_offsets() for c in ax.collections]
    x = lambda t, b, g: rl.operator_intensity(costs.decode_cost("llama-3-8b", t, b, "bf16"))[g]
    assert list(blue[:, 0]) == pytest.approx([x(128, b, "weight products") for b in (1, 64, 1024)])
    assert list(red[:, 0]) == pytest.approx([x(t, 1, "attention") for t in (128, 8192)])
    assert list(blue[:, 1]) == pytest.approx([h100.attainable(v) / 1e3 for v in blue[:, 0]])
    assert "compute-bound from batch 296" in ax.get_title()
    plt.close(fig)


def test_roofline_colours_and_markers_come_from_the_style():
    from lib.widgets import style

    assert not hasattr(wr, "MODEL_COLOURS")  # models are not concepts: labelled, never given a concept's hue
    assert wr.PHASE_COLOURS == {"prefill": style.colour("computed"), "decode": style.colour("cached")}
    assert wr.PHASE_MARKERS == {"prefill": style.concept("prefill").marker, "decode": style.concept("decode").marker}
    assert wr.GROUP_COLOURS == {"weight products": style.colour("weights"), "attention": style.colour("cached")}
    assert wr.GROUP_MARKERS["weight products"] != wr.GROUP_MARKERS["attention"]  # shape tells them apart too
    assert wr.ROOF_COLOUR == style.MUTED
    fig = wr.plot_operator_roofline("llama-3-8b", GPU, batches=(1, 64), contexts=(128,))
    ax = fig.axes[0]
    import matplotlib.colors as mc
    weights, attention = ax.collections
    assert mc.to_hex(weights.get_facecolor()[0]) == style.colour("weights").lower()
    assert mc.to_hex(attention.get_facecolor()[0]) == style.colour("cached").lower()
    legend = {t.get_text(): h for t, h in zip(ax.get_legend().get_texts(), ax.get_legend().legend_handles)}
    assert set(legend) >= {"weight products (any context)", "attention (any batch)"}
    for a in (ax, wr.plot_roofline(wr.roofline_points(batches=(1,)), GPU).axes[0]):  # the shared axes set-up
        assert a.get_xscale() == a.get_yscale() == "log"
        assert a.get_xlabel() == "arithmetic intensity (FLOP / byte)" and a.get_ylabel().startswith("attainable ")
        assert a.lines[0].get_color() == wr.ROOF_COLOUR and a.lines[1].get_linestyle() == ":"
    plt.close("all")


def test_plotly_rooflines_take_the_template_and_the_cell_width():
    fig = wr.plotly_batch_roofline(("llama-2-7b",), GPU, batches=(1, 8))
    assert fig.layout.width is None and fig.layout.title.font.size is None and fig.layout.legend.font.size is None
    names = [t.name for t in fig.data]
    prefill = fig.data[names.index("llama-2-7b prefill")]
    decode = fig.data[names.index("llama-2-7b decode")]
    assert prefill.marker.symbol == "square" and decode.marker.symbol == "circle"  # shape, not only colour
    e = wr.RooflineExplorer()
    assert all(c.style.description_width == "initial" for c in e.controls.values())  # labels never cut
    assert e.figure.data[1].marker.color == wr.PHASE_COLOURS["prefill"]


def test_explorer_output_holds_exactly_the_figure():
    """The live figure is drawn into a core Output widget (no FigureWidget), redrawn on every change."""
    import json

    e = wr.RooflineExplorer(model="llama-3-8b", dtype="bf16", batch=1, context=2048)
    e.set(batch=64)
    (out,) = e.output.outputs
    shown = out["data"]["application/vnd.plotly.v1+json"]
    assert [d["name"] for d in shown["data"]] == [d.name for d in e.figure.data]
    assert shown["data"][2]["x"] == [e.state["decode_intensity"]] and shown["config"]["displaylogo"] is False
    assert out["data"]["text/plain"] == e.summary and e.widget.children[1] is e.output
    assert "kvlab-themed" in e.widget._dom_classes and "<style>" in e.widget.children[-1].value  # style.themed
    json.dumps(out)
    e.controls["context"].value = 128  # a user's drag: the observe callback redraws into the output
    assert e.output.outputs[0]["data"]["application/vnd.plotly.v1+json"]["data"][2]["x"] == [e.state["decode_intensity"]]


# ------------------------------------------------------------- when attention is not memory-bound

def test_mla_absorbed_decode_intensity_by_hand():
    from lib.presets import MLA_PRESETS
    v3 = MLA_PRESETS["deepseek-v3"]
    # 128 heads score 512 + 64 latent and rotary values and mix 512 per cached token; the token is 576 bf16 values
    assert rl.mla_decode_intensity(v3) == pytest.approx(2 * 128 * (512 + 64 + 512) / (576 * 2))
    assert round(rl.mla_decode_intensity(v3), 1) == 241.8
    assert rl.mla_decode_intensity(v3, "fp8") == pytest.approx(2 * rl.mla_decode_intensity(v3))
    assert rl.mla_decode_intensity(v3, n_new=3) == pytest.approx(3 * rl.mla_decode_intensity(v3))
    with pytest.raises(TypeError, match="mla must be a lib.presets.MLAConfig"):
        rl.mla_decode_intensity("llama-3-8b")


def test_what_breaks_the_rule_that_decode_attention_is_memory_bound():
    mha, gqa = rl.attention_intensity("llama-2-7b", 4096), rl.attention_intensity("llama-3-8b", 4096, batch=64)
    assert mha == pytest.approx(1.0, rel=1e-3) and gqa == pytest.approx(4.0, rel=1e-3)  # n_heads / n_kv_heads
    verify = rl.attention_intensity("llama-3-8b", 4096, n_new=5, batch=64)  # k = 4 drafts + the last token
    assert verify == pytest.approx(5 * gqa, rel=2e-3)  # the 5 new keys are written too
    # 64 sequences, 3,840 shared positions read once instead of 64 times
    att = rl.operator_groups(costs.step_cost("llama-3-8b", 4096, 1, 64, "bf16"))["attention"]
    saved = 63 * costs.kv_cache_bytes("llama-3-8b", 3840, 1, "bf16")
    shared = rl.attention_intensity("llama-3-8b", 4096, batch=64, shared_prefix=3840, dtype="bf16")
    assert shared == pytest.approx(att.flops / (att.bytes - saved)) and shared > 10 * gqa
    rows = rl.attention_regimes(rl.REFERENCE_MACHINES["H100 SXM"])
    assert [r["bound"] for r in rows] == ["memory-bound"] * 5 + ["compute-bound"]
    with pytest.raises(ValueError, match="shared_prefix=5000 must be at most the cached positions"):
        rl.attention_intensity("llama-3-8b", 4096, shared_prefix=5000)


def test_points_on_one_spot_share_one_label_and_models_get_no_concept_colour():
    """Five 7B-class decode points at batch 1 sit on one spot: one label names them all (not five "B=1")."""
    import matplotlib.colors as mc

    from lib.widgets import style

    models = ("chat", "llama-2-7b", "mistral-7b", "llama-3-8b", "qwen2.5-7b")
    fig = wr.plot_roofline(wr.roofline_points(models, "bf16", batches=(1, 64)), GPU)
    ax = fig.axes[0]
    labels = [a.get_text() for a in ax.texts if a.get_text().startswith("B=")]
    assert sum(lab.startswith("B=1:") for lab in labels) < sum(1 for _ in models)  # merged where they coincide
    named = " ".join(labels).replace("\n", " ")
    assert all(m in named for m in models)  # and every model is still named
    anchors = [a.xy for a in ax.texts if a.get_text().startswith("B=")]
    assert len(anchors) == len(set(anchors))
    fills = {mc.to_hex(c.get_facecolor()[0]).upper() for c in ax.collections}
    hollow = {mc.to_hex(c.get_edgecolor()[0]).upper() for c in ax.collections
              if mc.to_hex(c.get_facecolor()[0]).upper() == style.PAPER.upper()}
    phases = {style.colour("prefill"), style.colour("decode")}
    assert fills - {style.PAPER.upper()} == phases and hollow <= phases  # colour = phase (a concept), never the model
    assert hollow  # llama-2-7b's 64 sequences of 4,096 tokens do not fit on the H100: drawn open, in their phase's colour
    plt.close(fig)


def test_capacity_caps_the_batch_before_the_compute_roof():
    """capacity_rows: the largest batch vLLM's pool holds (lib.vllm_bridge.max_sequences), the step's intensity
    there, against the batch the ridge needs. Llama-2-7B on an H100 at 4,096 tokens: 30 sequences, about 6
    FLOP/byte, 50 times below the ridge; Qwen2.5-7B (GQA, 7 query heads per KV head) at 512 tokens holds more
    sequences than the ridge needs, the one compute-bound row (issue 38's N1)."""
    from lib.vllm_bridge import max_sequences

    h100 = rl.DEFAULT_GPU
    rows = wr.capacity_rows(("llama-2-7b", "qwen2.5-7b"), h100, contexts=(512, 4096))
    assert [(r["model"], r["context"], r["sequences that fit"]) for r in rows] == [
        ("llama-2-7b", 512, max_sequences("llama-2-7b", 512)), ("llama-2-7b", 4096, 30),
        ("qwen2.5-7b", 512, max_sequences("qwen2.5-7b", 512)), ("qwen2.5-7b", 4096, max_sequences("qwen2.5-7b", 4096))]
    x = costs.decode_cost("llama-2-7b", 4096, 30, "bf16").intensity
    assert rows[1]["step FLOP/B at that batch"] == wr.sig(x) and 5 < x < 7 and rows[1]["bound"] == "memory"
    assert rows[1]["batch to ridge"] == "never"
    assert rows[2]["batch to ridge"] <= rows[2]["sequences that fit"] and rows[2]["bound"] == "compute"
    assert [r["bound"] for r in rows].count("compute") == 1
    small = rl.Machine("12 GiB card", 100e3, 1e3, "bf16", memory_gib=12)  # the weights alone fill it
    assert wr.capacity_rows(("llama-2-7b",), small, (512,))[0]["bound"] == "does not start"
    assert wr.capacity_table(("llama-2-7b",), h100, (4096,)).splitlines()[0].split()[:5] == \
        ["model", "context", "sequences", "that", "fit"]
    with pytest.raises(ValueError, match="needs a machine whose memory is known"):
        wr.capacity_rows(("llama-2-7b",), rl.Machine("cpu", 50.0, 20.0, "fp32"))
    assert wr.batch_that_fits("llama-2-7b", 4096, h100) == 30 and wr.batch_that_fits("llama-2-7b", 4096, small) == 0


def test_quantized_weights_move_decode_right_and_cut_its_time():
    rows = wr.quantized_weight_rows("llama-2-7b", rl.DEFAULT_GPU, 2048, 1)
    assert [r["weights"] for r in rows] == ["bf16", "int8", "int4"] and {r["KV cache"] for r in rows} == {"bf16"}
    steps = [costs.decode_cost("llama-2-7b", 2048, 1, w, kv_dtype="bf16") for w in ("bf16", "int8", "int4")]
    times = [rl.DEFAULT_GPU.seconds(c) for c in steps]
    for r, c, s in zip(rows, steps, times):
        assert r["bound"] == "memory-bound"  # still on the slope: the time is bytes / bandwidth
        assert s == c.bytes / (rl.DEFAULT_GPU.bandwidth_gbs * 1e9)
        assert r["time ms"] == wr.sig(s * 1e3) and r["FLOP/byte"] == wr.sig(c.intensity)
        assert r["speedup"] == wr.sig(times[0] / s)
    assert 1.8 < times[0] / times[1] < 2 and 3 < times[0] / times[2] < 4  # the KV bytes stay: under 2x and 4x
    assert "int4" in wr.quantized_weight_table() and wr.quantized_weight_rows()[0]["time ms"] == rows[0]["time ms"]
    with pytest.raises(ValueError, match="weight_dtypes needs at least one number format"):
        wr.quantized_weight_rows(weight_dtypes=())

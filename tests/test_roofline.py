"""lib.roofline (arithmetic intensity, KV/weights crossover, the roofline, measurement) and its widgets."""
import warnings
from fractions import Fraction

import matplotlib

matplotlib.use("Agg")

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

import lib
from lib import costs
from lib import roofline as rl
from lib.widgets import roofline as wr

# A config small enough to count by hand: 1 layer, d_model 4, 1 head, d_ff 8, vocab 10, learned positions 16.
TINY = lib.ModelConfig(vocab_size=10, n_layers=1, d_model=4, n_heads=1, d_ff=8, max_seq_len=16)
# parameters: embeddings 10·4 + positions 16·4 = 104; layer: 2 LayerNorms 2·8 = 16, q/k/v/o 4·(4·4 + 4) = 80,
# FFN (4·8 + 8) + (8·4 + 4) = 76 -> 172; final norm 8; lm_head tied. Total 284 (1136 bytes in fp32).
# A pass streams all of them but the position table (16·4 = 64, only gathered): 220 -> 880 bytes in fp32.
TINY_PARAMS, TINY_W32 = 284, 880
TINY_KV32 = 2 * 1 * 1 * 4 * 4  # K and V, 1 layer, 1 KV head, head_dim 4, 4 bytes = 32 bytes per token


def test_hand_counted_tiny_config():
    assert costs.param_count(TINY) == TINY_PARAMS
    assert costs.weight_bytes(TINY, "fp32") == 1136
    assert rl.streamed_weight_bytes(TINY, "fp32") == TINY_W32
    assert costs.kv_bytes_per_token(TINY, "fp32") == TINY_KV32


def test_decode_intensity_by_hand():
    # decode at context 3: the new token sees 4 keys.
    # qkv 2·4·(1+2)·4 = 96, scores 2·4·4 = 32, values 32, out 2·4·4 = 32, FFN 2·4·8·2 = 128,
    # lm_head 2·4·10 = 80
    c = rl.decode_cost(TINY, context=3, batch=1, dtype="fp32")
    assert (c.phase, c.batch, c.n_new, c.n_past, c.dtype) == ("decode", 1, 1, 3, "fp32")
    assert c.flops == 96 + 32 + 32 + 32 + 128 + 80 == 400
    assert (c.weight_bytes, c.kv_read_bytes, c.kv_write_bytes) == (880, 3 * 32, 32)
    assert c.bytes == 1008
    assert c.intensity == pytest.approx(400 / 1008, rel=1e-15)
    assert c.kv_read_share == pytest.approx(96 / 1008)
    assert c.tokens == 1


def test_prefill_intensity_by_hand_with_a_batch():
    # prompt of 4 tokens: causal keys 1+2+3+4 = 10. Per sequence: qkv 2·4·4·3·4 = 384, scores 2·4·10 = 80,
    # values 80, out 2·4·4·4 = 128, FFN 2·4·4·8·2 = 512, lm_head 2·4·4·10 = 320 -> 1504; batch 2 -> 3008
    c = rl.prefill_cost(TINY, prompt_len=4, batch=2, dtype="fp32")
    assert (c.phase, c.n_new, c.n_past) == ("prefill", 4, 0)
    assert c.flops == 2 * (384 + 80 + 80 + 128 + 512 + 320) == 3008
    assert (c.weight_bytes, c.kv_read_bytes, c.kv_write_bytes) == (880, 0, 2 * 4 * 32)
    assert c.intensity == pytest.approx(3008 / 1136)
    assert c.kv_read_share == 0 and c.tokens == 8


def test_dtype_halves_the_bytes_not_the_flops():
    c32 = rl.decode_cost(TINY, 3, 1, "fp32")
    c16 = rl.decode_cost(TINY, 3, 1, torch.bfloat16)
    assert c16.flops == c32.flops and c16.bytes * 2 == c32.bytes and c16.dtype == "bf16"
    assert c16.intensity == pytest.approx(2 * c32.intensity)


def test_pass_cost_reuses_lib_costs():
    for name in ("llama-2-7b", "llama-3-8b", "qwen2.5-7b"):
        cfg = lib.PRESETS[name]
        c = rl.pass_cost(name, n_new=5, n_past=100, batch=3, dtype="bf16")
        assert c.flops == 3 * costs.forward_flops(cfg, 5, 100)["total"]
        # untied embedding (vocab × d) only gathered; RoPE, so no position table
        assert c.weight_bytes == costs.weight_bytes(cfg, "bf16") - 2 * cfg.vocab_size * cfg.d_model
        assert c.kv_read_bytes == lib.kv_cache_bytes(cfg, 100, 3, "bf16")
        assert c.kv_write_bytes == lib.kv_cache_bytes(cfg, 5, 3, "bf16")
        assert c.phase == "prefill"  # several tokens fed: a chunk of prefill on top of a cached prefix


def test_batch_one_decode_is_about_one_flop_per_byte_in_16_bit():
    # 2 FLOPs per weight (one multiply-add) over 2 bytes per weight: C11's "memory-bound" at batch 1
    for name in ("llama-2-7b", "llama-3-8b", "mistral-7b", "qwen2.5-7b"):
        c = rl.decode_cost(name, 512, 1, "fp16")
        assert 0.9 < c.intensity < 1.1
        assert c.kv_read_share < 0.05  # ... and mostly reading the weights, not the KV cache


def test_streamed_weights_leave_out_only_the_lookup_tables():
    chat = rl.model_config("chat")  # tied embedding (read whole by lm_head), learned positions
    assert rl.streamed_weight_bytes(chat, "fp32") == 4 * (costs.param_count(chat) - chat.max_seq_len * chat.d_model)
    tiny = rl.model_config("tiny")  # untied: the token embedding is a lookup table too
    assert not tiny.tie_embeddings
    assert rl.streamed_weight_bytes(tiny, "fp32") == 4 * (1608 - 16 * 4 - 131 * 4) == 4080
    gpt2 = lib.PRESETS["gpt2"]
    assert rl.streamed_weight_bytes(gpt2, "int4") == -(-(costs.param_count(gpt2) - 1024 * 768) // 2)
    with pytest.raises(ValueError, match="unknown dtype 'fp5'"):
        rl.streamed_weight_bytes(gpt2, "fp5")


def test_model_names_and_configs():
    assert rl.model_config("llama-2-7b") is lib.PRESETS["llama-2-7b"]
    assert rl.model_config("chat") == lib.load_demo("chat")[0].config
    assert rl.model_config(TINY) is TINY
    assert set(rl.MODEL_CHOICES) >= {"chat", "tiny", "llama-2-7b"}
    with pytest.raises(ValueError, match=r"unknown model 'llama-9b'; allowed: .*chat.*llama-2-7b"):
        rl.decode_cost("llama-9b", 10)
    with pytest.raises(TypeError, match="model must be a lib.ModelConfig or a name"):
        rl.decode_cost(7, 10)


def test_bad_counts_and_dtypes_say_what_is_allowed():
    with pytest.raises(ValueError, match=r"context \(tokens already cached\) must be a positive integer"):
        rl.decode_cost(TINY, 0)
    with pytest.raises(ValueError, match="prompt_len must be a positive integer"):
        rl.prefill_cost(TINY, 0)
    with pytest.raises(ValueError, match="batch must be a positive integer"):
        rl.decode_cost(TINY, 3, batch=0)
    with pytest.raises(TypeError, match="batch must be an integer, got float 2.0"):
        rl.decode_cost(TINY, 3, batch=2.0)
    with pytest.raises(ValueError, match=r"n_past .* must be an integer >= 0, got -1"):
        rl.pass_cost(TINY, 1, -1)
    with pytest.raises(ValueError, match="unknown dtype 'fp12'; allowed"):
        rl.decode_cost(TINY, 3, dtype="fp12")


# ------------------------------------------------------------------------------ KV reads vs weight reads

def test_crossover_by_hand():
    # weights 880 B, KV 32 B per token: 27 tokens read 864 B (< 880), 28 read 896 B (>)
    assert rl.kv_read_crossover_tokens(TINY, "fp32") == 28
    read = lambda t: rl.decode_cost(TINY, t, 1, "fp32").kv_read_bytes
    assert read(27) < TINY_W32 < read(28)
    assert rl.crossover_context(TINY, batch=1, dtype="fp32") == 28
    assert rl.crossover_context(TINY, batch=4, dtype="fp32") == 7  # 4 × 7 = 28
    assert rl.crossover_context(TINY, batch=5, dtype="fp32") == 6  # 5 × 5 = 25 is not enough
    assert rl.crossover_batch(TINY, context=10, dtype="fp32") == 3
    assert rl.crossover_context(TINY, batch=100, dtype="fp32") == 1
    # the bytes per value cancel: the same crossover in every dtype (int4 rounds the weights up to whole bytes)
    for dtype in ("fp16", "bf16", "fp8", "int8", "int4"):
        assert rl.kv_read_crossover_tokens(TINY, dtype) == 28


def test_crossover_for_the_presets():
    for name, cfg in lib.PRESETS.items():
        n = rl.kv_read_crossover_tokens(cfg, "fp16")
        ratio = rl.streamed_weight_bytes(cfg, "fp16") / costs.kv_bytes_per_token(cfg, "fp16")
        assert n - 1 <= ratio < n, name
        # the lookup tables are stored but not streamed: an earlier crossover than the memory one (C13)
        assert n <= costs.kv_equals_weights_tokens(cfg, "fp16") + 1
    # llama-2-7b: (6,738,415,616 − 32,000·4,096) params × 2 B / 524,288 B per token = 25,205.0...
    assert rl.crossover_context("llama-2-7b", 1, "fp16") == 25206 > lib.PRESETS["llama-2-7b"].max_seq_len
    assert rl.crossover_context("llama-2-7b", 64, "fp16") == 394


@settings(max_examples=60, deadline=None)
@given(layers=st.integers(1, 4), heads=st.sampled_from([(4, 4), (4, 2), (4, 1), (2, 1)]),
       head_dim=st.sampled_from([2, 4, 8]), vocab=st.integers(5, 300), batch=st.integers(1, 40),
       dtype=st.sampled_from(["fp32", "fp16", "fp8", "int4"]))
def test_crossover_is_exact(layers, heads, head_dim, vocab, batch, dtype):
    n_heads, n_kv = heads
    cfg = lib.ModelConfig(vocab_size=vocab, n_layers=layers, d_model=n_heads * head_dim, n_heads=n_heads,
                          n_kv_heads=n_kv, max_seq_len=32)
    t = rl.crossover_context(cfg, batch, dtype)
    w = rl.streamed_weight_bytes(cfg, dtype)
    assert rl.decode_cost(cfg, t, batch, dtype).kv_read_bytes > w
    if t > 1:
        assert rl.decode_cost(cfg, t - 1, batch, dtype).kv_read_bytes <= w
    b = rl.crossover_batch(cfg, t, dtype)
    assert b <= batch and rl.decode_cost(cfg, t, b, dtype).kv_read_bytes > w
    if b > 1:
        assert rl.decode_cost(cfg, t, b - 1, dtype).kv_read_bytes <= w


# ---------------------------------------------------------------------------- decode and the batch size

def test_decode_limit_and_batch_for_intensity_by_hand():
    # context 3: F = 400 FLOPs per sequence, W = 880 B, k = 4 tokens × 32 B = 128 B per sequence
    assert rl.decode_intensity_limit(TINY, 3, "fp32") == 400 / 128
    # B·400 / (880 + 128·B) >= 2  <=>  144·B >= 1760  <=>  B >= 12.2
    assert rl.decode_batch_for_intensity(TINY, 3, 2, "fp32") == 13
    assert rl.decode_cost(TINY, 3, 13, "fp32").intensity >= 2 > rl.decode_cost(TINY, 3, 12, "fp32").intensity
    assert rl.decode_batch_for_intensity(TINY, 3, 0.1, "fp32") == 1
    assert rl.decode_batch_for_intensity(TINY, 3, 400 / 128, "fp32") is None  # the limit itself is never reached
    assert rl.decode_batch_for_intensity(TINY, 3, 4, "fp32") is None


@settings(max_examples=40, deadline=None)
@given(name=st.sampled_from(["llama-2-7b", "llama-3-8b", "qwen2.5-7b", "gpt2"]), context=st.integers(1, 4096),
       target=st.floats(1.5, 400))
def test_batch_for_intensity_is_the_smallest(name, context, target):
    b = rl.decode_batch_for_intensity(name, context, target, "bf16")
    exact = lambda batch: Fraction(rl.decode_cost(name, context, batch, "bf16").flops,
                                   rl.decode_cost(name, context, batch, "bf16").bytes)
    if b is None:
        assert rl.decode_intensity_limit(name, context, "bf16") <= target * (1 + 1e-12)
    else:
        assert exact(b) >= Fraction(target)
        assert b == 1 or exact(b - 1) < Fraction(target)


def test_batching_raises_decode_intensity_toward_the_limit():
    xs = [rl.decode_cost("llama-3-8b", 2048, b, "bf16").intensity for b in (1, 4, 16, 64, 256, 1024)]
    assert xs == sorted(xs)
    assert xs[-1] < rl.decode_intensity_limit("llama-3-8b", 2048, "bf16")
    # MHA (llama-2-7b) reads 4× the KV bytes of GQA with 8 KV heads (llama-3-8b): a far lower ceiling
    assert rl.decode_intensity_limit("llama-2-7b", 2048) < rl.decode_intensity_limit("llama-3-8b", 2048) / 3
    h200 = rl.REFERENCE_MACHINES["H200 SXM"]
    assert rl.decode_batch_for_intensity("llama-3-8b", 2048, h200.ridge, "bf16") is None
    assert rl.decode_batch_for_intensity("llama-3-8b", 128, h200.ridge, "bf16") == 267


def test_target_intensity_errors():
    with pytest.raises(ValueError, match="target intensity .* must be a positive, finite number, got 0"):
        rl.decode_batch_for_intensity(TINY, 3, 0)
    with pytest.raises(TypeError, match="target intensity .* must be a positive number, got str"):
        rl.decode_batch_for_intensity(TINY, 3, "200")


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
    c = rl.decode_cost(TINY, 3, 1, "fp32")  # 400 FLOPs, 1008 bytes: memory-bound
    assert m.seconds(c) == pytest.approx(1008 / 10e9)
    assert m.tokens_per_second(c) == pytest.approx(10e9 / 1008)
    p = rl.prefill_cost("llama-2-7b", 2048, 1, "bf16")
    h200 = rl.REFERENCE_MACHINES["H200 SXM"]
    assert h200.bound(p.intensity) == "compute-bound" and h200.seconds(p) == pytest.approx(p.flops / 989.4e12)
    d = rl.decode_cost("llama-2-7b", 2048, 1, "bf16")  # ~14.29 GB at 4.8 TB/s: ~2.98 ms
    assert h200.bound(d.intensity) == "memory-bound" and h200.seconds(d) == pytest.approx(d.bytes / 4.8e12)
    with pytest.raises(TypeError, match="Machine.seconds needs a PassCost"):
        m.seconds(400)


def test_reference_machines_are_the_datasheet_numbers():
    h100, h200 = rl.REFERENCE_MACHINES["H100 SXM"], rl.REFERENCE_MACHINES["H200 SXM"]
    assert (h100.peak_gflops, h100.bandwidth_gbs, h100.dtype) == (989_400.0, 3_350.0, "bf16")
    assert (h200.peak_gflops, h200.bandwidth_gbs, h200.dtype) == (989_400.0, 4_800.0, "bf16")
    assert h200.ridge == pytest.approx(206.125) and "nvidia.com" in h200.source


def test_roofline_errors():
    with pytest.raises(ValueError, match=r"intensity \(FLOP/byte\) must be a positive, finite number, got -1"):
        rl.attainable_gflops(-1, 100, 10)
    with pytest.raises(ValueError, match="peak_gflops must be a positive, finite number, got inf"):
        rl.attainable_gflops(1, float("inf"), 10)
    with pytest.raises(TypeError, match="bandwidth_gbs must be a positive number, got NoneType"):
        rl.bound(1, 100, None)
    with pytest.raises(ValueError, match="Machine.bandwidth_gbs must be a positive, finite number, got 0"):
        rl.Machine("x", 100, 0)
    with pytest.raises(ValueError, match="Machine.name must be a non-empty string"):
        rl.Machine("", 100, 10)
    with pytest.raises(ValueError, match="unknown dtype 'fp7'"):
        rl.Machine("x", 100, 10, "fp7")


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
    with pytest.raises(ValueError, match=r"n \(matrix size\) must be a positive integer"):
        rl.measure_peak_gflops("cpu", n=0)
    with pytest.raises(ValueError, match="unsupported dtype 'int8'; allowed: torch.float32"):
        rl.measure_peak_gflops("cpu", n=8, dtype="int8")
    assert rl.measure_peak_gflops("cpu", n=32, repeats=1, dtype="bf16") > 0
    with pytest.raises(ValueError, match="nbytes must be an integer >= 4"):
        rl.measure_bandwidth_gbs("cpu", nbytes=2)
    with pytest.raises(ValueError, match="repeats must be a positive integer"):
        rl.measure_bandwidth_gbs("cpu", nbytes=1024, repeats=0)
    with pytest.raises(ValueError, match="is not a device name|is not available here"):
        rl.measure_machine("tpu")


# ------------------------------------------------------------------------------------------------ widgets

H200 = rl.REFERENCE_MACHINES["H200 SXM"]


def test_sig_fmt_and_bytes():
    assert wr.sig(1234.5678) == 1235.0 and wr.sig(0.000123456) == 0.0001235
    assert wr.fmt(13480000000.0 / 1e6) == "13480" and wr.fmt(0.00009539) == "0.00009539" and wr.fmt(7) == "7"
    assert wr.human_bytes(13_476_831_232) == "13.48 GB" and wr.human_bytes(512) == "512 B"


def test_points_and_tables_come_from_lib_roofline():
    points = wr.roofline_points(("chat", "llama-2-7b"), "bf16", batches=(1, 8))
    assert [(p["model"], p["phase"], p["batch"], p["length"]) for p in points[:4]] == [
        ("chat", "prefill", 1, 32), ("chat", "decode", 1, 32), ("chat", "prefill", 8, 32), ("chat", "decode", 8, 32)]
    assert points[-1]["cost"] == rl.decode_cost("llama-2-7b", 2048, 8, "bf16")
    rows = wr.cost_rows(points, H200)
    assert rows[-1]["FLOP/byte"] == wr.sig(points[-1]["cost"].intensity)
    assert rows[-1]["bound"] == "memory-bound" and rows[-2]["bound"] == "compute-bound"
    table = wr.cost_table(points, H200)
    assert table.splitlines()[0].split()[:3] == ["model", "phase", "batch"] and len(table.splitlines()) == 2 + 8
    cross = wr.crossover_rows(("tiny", "llama-2-7b"), "bf16", batches=(1, 64))
    assert cross[1]["batch×ctx"] == 25206 and cross[1]["ctx @B=1"] == "25206 >max" and cross[1]["ctx @B=64"] == "394"
    assert cross[0]["ctx @B=1"] == f"{rl.crossover_context('tiny', 1, 'bf16')} >max"
    ridge = wr.ridge_rows(("llama-3-8b",), H200, contexts=(128, 2048))
    assert [r["batch to ridge"] for r in ridge] == [267, "never"]
    assert "never" in wr.ridge_table(("llama-3-8b",), H200, contexts=(2048,))
    with pytest.raises(ValueError, match="at least one model and one batch size"):
        wr.roofline_points((), "bf16")
    with pytest.raises(ValueError, match="cost_rows needs at least one point"):
        wr.cost_table([])
    cpu = rl.Machine("cpu", 50.0, 20.0, "fp32")
    assert wr.cost_rows(points[:1], cpu)[0]["GFLOP/s"] == wr.sig(cpu.attainable(points[0]["cost"].intensity))


def test_roof_line_is_exact():
    xs, ys = wr.roof_line(H200, 0.5, 1000)
    assert xs == [0.5, H200.ridge, 1000] and ys == [0.5 * 4800, 989_400, 989_400]
    assert wr.roof_line(H200, 300, 1000) == ([300, 1000], [989_400, 989_400])


def test_static_figures_draw_without_missing_glyphs():
    import matplotlib.pyplot as plt

    from lib.fonts import use_cjk_font
    use_cjk_font()
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        fig = wr.plot_roofline(wr.roofline_points(batches=(1, 64)), H200, title="人工智能 roofline")
        fig.canvas.draw()
        assert len(fig.axes[0].collections) == 12  # 3 models × 2 phases × 2 batches
        plt.close(fig)
        fig = wr.plot_bytes_split("llama-2-7b", "bf16", batches=(1, 8, 64))
        fig.canvas.draw()
        dots = [c.get_offsets()[0] for c in fig.axes[0].collections]
        assert [int(x) for x, _ in dots] == [3151, 394]  # batch 1's crossover is past the plotted range
        plt.close(fig)
    with pytest.raises(ValueError, match="at least one point"):
        wr.plot_roofline([], H200)


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
    fig = wr.plotly_batch_roofline(("chat", "llama-3-8b"), H200, "bf16",
                                   contexts={"chat": [32], "llama-3-8b": [128, 2048]}, batches=batches)
    assert [f.name for f in fig.frames] == ["1", "4", "64", "1024"]
    assert [s["label"] for s in fig.layout.sliders[0].steps] == ["1", "4", "64", "1024"]
    for frame, b in zip(fig.frames, batches):
        llama = frame.data[1]
        assert list(llama.x) == [wr.sig(rl.decode_cost("llama-3-8b", t, b, "bf16").intensity) for t in (128, 2048)]
        assert frame.traces == (0, 1)
    xs = [fr.data[1].x[0] for fr in fig.frames]
    assert xs == sorted(xs)  # the batch pushes the context-128 point right...
    limit = next(t for t in fig.data if t.name == "llama-3-8b batch→∞")
    assert xs[-1] < limit.x[0]  # ...toward its batch → ∞ limit
    d = fig.to_plotly_json()
    assert all(x == wr.sig(x) for x in _all_numbers(d["data"]))
    with pytest.raises(ValueError, match=r"start=3 is not one of the batch sizes \[1, 4, 64, 1024\]"):
        wr.plotly_batch_roofline(("chat",), H200, batches=batches, start=3)
    with pytest.raises(ValueError, match=r"contexts has no entry for \['llama-3-8b'\]"):
        wr.plotly_batch_roofline(("chat", "llama-3-8b"), H200, contexts={"chat": [32]})


def test_explorer_is_driven_from_python():
    e = wr.RooflineExplorer(model="llama-3-8b", dtype="bf16", batch=1, context=2048)
    s = e.state
    assert (s["model"], s["dtype"], s["batch"], s["context"]) == ("llama-3-8b", "bf16", 1, 2048)
    assert s["machine"] == "H200 SXM"
    assert s["decode_intensity"] == wr.sig(rl.decode_cost("llama-3-8b", 2048, 1, "bf16").intensity)
    assert s["decode_bound"] == "memory-bound" and s["prefill_bound"] == "compute-bound"
    assert s["batch_to_ridge"] is None and "never reaches the ridge" in e.summary
    assert e.drawn["decode"] == ([s["decode_intensity"]], [wr.sig(H200.attainable(s["decode_intensity"]) / 1e3)])
    assert e.last_update_seconds > 0
    e.set(batch=512, context=128)
    assert e.state["batch_to_ridge"] == 267 and e.state["decode_bound"] == "compute-bound"
    assert e.drawn["decode"][0] == [wr.sig(rl.decode_cost("llama-3-8b", 128, 512, "bf16").intensity)]
    e.controls["batch"].value = 2  # what a user's drag does: the observe callback redraws
    assert e.state["batch"] == 2 and e.state["decode_bound"] == "memory-bound"
    e.set(model="chat", dtype="fp32", context=64)
    assert "max_seq_len 64" in e.summary and "bf16 peak, not a fp32 one" in e.summary
    assert "<br>" in e.summary_box.value


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
    with pytest.raises(TypeError, match=r"unknown control\(s\) \['temperature'\]"):
        e.set(temperature=1.0)
    with pytest.raises(TypeError, match="machines must hold lib.roofline.Machine objects"):
        wr.RooflineExplorer(machines=["H300"])
    assert e.state["batch"] == 1  # a refused set() changes nothing


def test_one_token_on_an_empty_cache_is_a_prefill():
    assert rl.pass_cost(TINY, 1, 0).phase == "prefill"  # the prompt "<s>": nothing cached yet
    assert rl.pass_cost(TINY, 1, 1).phase == "decode"


def test_trace_points_follow_a_real_run():
    model, tok = lib.load_demo("tiny")
    out = lib.generate(model, tok.encode("<s>"), 8, eos_id=tok.eos_id, trace=True)
    assert tok.decode(out.sequences[0].tolist()) == "<s>深度学习<eos>"
    points = wr.trace_points(out.trace, "tiny", "fp32")
    assert [(p["phase"], p["length"], p["cost"].n_new, p["cost"].n_past) for p in points] == [
        ("prefill", 1, 1, 0), ("decode", 1, 1, 1), ("decode", 2, 1, 2), ("decode", 3, 1, 3), ("decode", 4, 1, 4)]
    assert [p["label"] for p in points] == [f"step {i}" for i in range(5)]
    assert points[3]["cost"] == rl.decode_cost("tiny", 3, 1, "fp32")
    # tiny at context 3 by hand: per layer 2·4·3·4 + 2·(2·4·4) + 2·4·4 + 2·4·16·2 = 448,
    # × 2 layers, + lm_head 2·4·131; weights (1608 − 16·4 − 131·4) × 4 B = 4080 B
    assert points[3]["cost"].flops == 2 * 448 + 2 * 4 * 131 == 1944
    rows = wr.cost_rows(points, raw=True)
    assert rows[3] == {"model": "tiny", "phase": "decode", "batch": 1, "tokens": 3, "FLOPs": 1944, "weights B": 4080,
                       "KV read B": 192, "KV write B": 64, "FLOP/byte": wr.sig(1944 / 4336)}
    no_cache = lib.generate(model, tok.encode("<s>"), 3, use_cache=False, trace=True)
    with pytest.raises(ValueError, match="trace_points needs a run with the KV cache"):
        wr.trace_points(no_cache.trace, "tiny")
    with pytest.raises(TypeError, match="trace_points needs a lib.Trace"):
        wr.trace_points(out, "tiny")

"""The memory explorer (C10, C13): every number is lib.costs's (weights in memory, KV cache, the memory
crossover), views and errors. What a decode step reads is lib.costs.step_cost (test_costs.py, test_roofline.py)."""
import math
import re

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

import lib
from lib.text import fmt_bytes
from lib.costs import (kv_bytes_per_token, kv_cache_bytes, kv_memory_crossover_tokens, kv_read_crossover_tokens,
                       param_count, weight_bytes)
from lib.presets import MLA_PRESETS, PRESETS
from lib.device import DTYPES
from lib.widgets import memory as M

GIB = 2 ** 30


@pytest.mark.parametrize("name", list(PRESETS))
@pytest.mark.parametrize("dtype", list(DTYPES))
def test_budget_numbers_are_lib_costs(name, dtype):
    c = PRESETS[name]
    ctx = min(4096, c.max_seq_len)
    b = M.memory_budget(name, dtype, ctx, 8)
    assert b.config is c and b.params == param_count(c)
    assert b.weight_bytes == weight_bytes(c, dtype)
    assert b.kv_bytes_per_token == kv_bytes_per_token(c, dtype)
    assert b.kv_bytes == kv_cache_bytes(c, ctx, 8, dtype)
    assert b.total_bytes == b.weight_bytes + b.kv_bytes
    assert b.memory_crossover_tokens == kv_memory_crossover_tokens(c, dtype)
    assert b.memory_crossover_context == b.memory_crossover_tokens / 8


@pytest.mark.parametrize("name, kib", [("llama-2-7b", 512), ("llama-3-8b", 128), ("gpt2", 36)])
def test_published_per_token_figures(name, kib):
    """Published fp16 figures: Llama-2-7B 512 KiB, Llama-3-8B 128 KiB, GPT-2 36 KiB per token."""
    row = next(r for r in M.kv_per_token_rows("fp16") if r["model"] == name)
    assert row["bytes"] == kib * 1024
    assert M.memory_budget(name, "fp16", 1, 1).kv_bytes_per_token == kib * 1024
    line = next(l for l in M.kv_per_token_table("fp16").splitlines() if l.startswith(name + " "))
    assert f"{kib * 1024:,}" in line and f"{kib:.2f} KiB" in line
    assert re.search(rf"KV cache per token +{kib:.2f} KiB\n", M.memory_table(M.memory_budget(name, "fp16", 1, 1)))


def test_per_token_rows_kinds_and_mla():
    rows = {r["model"]: r for r in M.kv_per_token_rows("fp16")}
    assert rows["llama-2-7b"]["kind"] == "MHA" and rows["llama-3-8b"]["kind"] == "GQA"
    assert rows["llama-2-7b as MQA (hypothetical)"]["kind"] == "MQA"
    assert rows["llama-2-7b as MQA (hypothetical)"]["bytes"] == 512 * 1024 // 32
    assert rows["llama-2-7b as GQA-8 (hypothetical)"]["bytes"] == 128 * 1024
    for name, m in MLA_PRESETS.items():
        assert rows[name]["kind"] == "MLA" and rows[name]["bytes"] == kv_bytes_per_token(m, "fp16")
    assert rows["deepseek-v3"]["bytes"] == 61 * 576 * 2
    assert rows["llama-3-8b"]["vs MHA"] == 4.0
    only_presets = M.kv_per_token_rows("bf16", variants=False, mla=False)
    assert [r["model"] for r in only_presets] == list(PRESETS)


def test_seven_b_is_about_14_gb_in_fp16():
    """The source's '7B model ≈ 14 GB in FP16': Llama-2-7B has 6.74e9 parameters -> 13.48e9 bytes."""
    b = M.memory_budget("llama-2-7b", "fp16", 1, 1)
    assert b.params == 6_738_415_616 and b.weight_bytes == 2 * b.params
    assert 13.4e9 < b.weight_bytes < 14.0e9 and fmt_bytes(b.weight_bytes) == "12.55 GiB"


@pytest.mark.parametrize("gpu", M.GPU_GIB)
@pytest.mark.parametrize("name, dtype, ctx", [("llama-2-7b", "fp16", 4096), ("llama-3-8b", "bf16", 8192),
                                              ("llama-3-70b", "fp8", 2048), ("llama-2-70b", "int4", 1000)])
def test_max_requests_is_the_largest_that_fits(gpu, name, dtype, ctx):
    b = M.memory_budget(name, dtype, ctx, 1)
    n = b.max_requests(gpu)
    per_request = kv_cache_bytes(PRESETS[name], ctx, 1, dtype)
    if b.weight_bytes > gpu * GIB:
        assert n == 0
    else:
        assert b.weight_bytes + n * per_request <= gpu * GIB < b.weight_bytes + (n + 1) * per_request
        assert M.memory_budget(name, dtype, ctx, max(n, 1)).total_bytes <= gpu * GIB or n == 0


def test_weights_that_do_not_fit():
    b = M.memory_budget("llama-3-70b", "fp16", 1024, 1)
    rows = {r["gpu"]: r for r in b.gpu_rows()}
    assert rows["24 GiB"]["requests that fit"] == 0 and not rows["24 GiB"]["fits"]
    assert rows["141 GiB"]["fits"] and rows["141 GiB"]["requests that fit"] > 0
    assert "weights do not fit" in M.memory_table(b)


@settings(max_examples=40, deadline=None)
@given(st.sampled_from(list(PRESETS)), st.sampled_from(list(DTYPES)), st.integers(1, 1024), st.integers(1, 512))
def test_gpu_rows_consistent(name, dtype, ctx, batch):
    b = M.memory_budget(name, dtype, ctx, batch)
    for r, g in zip(b.gpu_rows(), M.GPU_GIB):
        assert r["fits"] == (b.total_bytes <= g * GIB)
        assert r["free after weights"] == g * GIB - b.weight_bytes
        assert r["fits"] <= (r["requests that fit"] >= batch)  # fitting implies that many requests fit


def test_memory_crossover_is_where_kv_memory_reaches_the_weights():
    b = M.memory_budget("llama-2-7b", "fp16", 4096, 8)
    assert b.memory_crossover_tokens == pytest.approx(6_738_415_616 * 2 / 524_288)
    # what a step reads crosses earlier: the 32,000 x 4,096 token table is stored, not read (500 tokens' worth)
    assert b.memory_crossover_tokens - kv_read_crossover_tokens("llama-2-7b", "fp16") == 500
    ctx = b.memory_crossover_context  # ~3.2k tokens per request at batch 8
    assert M.memory_budget("llama-2-7b", "fp16", math.floor(ctx), 8).kv_bytes < b.weight_bytes
    assert M.memory_budget("llama-2-7b", "fp16", math.ceil(ctx), 8).kv_bytes >= b.weight_bytes


def test_memory_table_text():
    text = M.memory_table(M.memory_budget("llama-2-7b", "fp16", 4096, 1))
    assert "llama-2-7b in fp16: 6,738,415,616 parameters; 1 request(s) x 4,096 tokens" in text
    assert "KV cache                   2.00 GiB   (13.7% of the total)" in text
    assert "  weights in memory         12.55 GiB" in text
    assert "KV cache memory = weight memory at batch x context = 25,705 tokens" in text
    assert " 80 GiB  yes             67.45 GiB" in text


@pytest.mark.parametrize("kw, exc, msg", [
    (dict(model="llama-9"), ValueError, r"unknown model 'llama-9'; allowed: a lib.ModelConfig or one of: chat, draft, "
                                        r"tiny, chat-gqa, lm, lm-draft, gpt2, gpt2-medium"),
    (dict(model="deepseek-v3"), ValueError, r"'deepseek-v3' is an MLA preset: lib.costs models only its KV cache"),
    (dict(model=7), TypeError, r"model must be a lib.ModelConfig or a name \(chat, .*\), got int"),
    (dict(context=-1), ValueError, r"context \(tokens per request\) must be an integer >= 1, got -1"),
    (dict(context=0), ValueError, r"must be an integer >= 1, got 0"),
    (dict(context=4096.0), ValueError, r"context \(tokens per request\) must be an integer >= 1, got 4096.0"),
    (dict(context=5000), ValueError, r"context=5000 is longer than llama-2-7b's context window "
                                     r"\(max_seq_len=4096\); choose 1..4096"),
    (dict(batch=0), ValueError, r"batch \(concurrent requests\) must be an integer >= 1, got 0"),
    (dict(dtype="fp7"), ValueError, r"unknown dtype 'fp7'; allowed: fp64 \(float64/double\), fp32"),
    (dict(dtype=torch.int32), ValueError, r"unknown dtype torch.int32; allowed: fp64"),
])
def test_budget_errors(kw, exc, msg):
    with pytest.raises(exc, match=msg):
        M.memory_budget(**kw)


def test_dtype_aliases():
    """The budget takes any name or torch dtype of lib.device.DTYPES and keeps the canonical name."""
    assert [M.memory_budget("gpt2", d, 1, 1).dtype for d in ("FP16", "float16", "half", torch.bfloat16,
                                                            torch.float32, "int4", torch.int8)] == \
        ["fp16", "fp16", "fp16", "bf16", "fp32", "int4", "int8"]


def test_config_instead_of_name():
    b = M.memory_budget(PRESETS["mistral-7b"], "fp16", 1000, 2)
    assert b.model == "mistral-7b"
    tiny = lib.load_demo("tiny")[0].config
    assert M.memory_budget(tiny, "fp32", 5, 1).model == "tiny" == M.memory_budget("tiny", "fp32", 5, 1).model
    assert M.memory_budget(tiny.replace(n_layers=3), "fp32", 5, 1).model == "custom"


def test_kvcache_nbytes_matches_the_formula():
    """The formula on the page against real tensors: KVCache(...).nbytes == kv_cache_bytes."""
    model, _ = lib.load_demo("chat")
    c = model.config
    for dtype in (torch.float32, torch.float16, torch.bfloat16):
        cache = lib.KVCache(c, 3, c.max_seq_len, dtype=dtype)
        by_hand = 2 * c.n_layers * c.n_kv_heads * c.head_dim * dtype.itemsize * c.max_seq_len * 3
        assert cache.nbytes == kv_cache_bytes(c, c.max_seq_len, 3, dtype) == by_hand


# ------------------------------------------------------------------------------------- figures


def test_memory_frames_and_figure():
    frames = M.memory_frames("llama-2-7b", "fp16", batches=(1, 8, 64))
    assert [f["batch"] for f in frames] == [1, 8, 64]
    xs = frames[0]["contexts"]
    assert xs[0] == 128 and xs[-1] == 4096 and all(b == 2 * a for a, b in zip(xs, xs[1:]))
    for f in frames:
        for x, kv, tot in zip(xs, f["kv_gib"], f["total_gib"]):
            b = M.memory_budget("llama-2-7b", "fp16", x, f["batch"])
            assert kv == float(f"{b.kv_bytes / GIB:.5g}") and tot == float(f"{b.total_bytes / GIB:.5g}")
        assert f["memory_crossover_context"] == float(
            f"{kv_memory_crossover_tokens(PRESETS['llama-2-7b']) / f['batch']:.5g}")
    fig = M.memory_figure("llama-2-7b", "fp16", batches=(1, 8, 64))
    assert [fr.name for fr in fig.frames] == ["1", "8", "64"]
    assert [s["label"] for s in fig.layout.sliders[0].steps] == ["1", "8", "64"]
    assert list(fig.frames[1].data[0].y) == frames[1]["kv_gib"] and list(fig.frames[1].traces) == [0, 1, 2]
    assert len(fig.data) == 3 + 1 + len(M.GPU_GIB)
    assert len(fig.frames[0].data[2].x) == 0  # crossover at batch 1 (25.7k tokens) is past the 4k window
    assert list(fig.frames[1].data[2].x) == [frames[1]["memory_crossover_context"]] * 2
    assert "KV cache memory = weight memory at 3,213 tokens per request" in fig.frames[1].layout.title.text
    assert [t.name for t in fig.data[:4]] == ["KV cache", "weights + KV", "KV memory = weight memory",
                                               "weights in memory"]


def test_context_grid_includes_a_window_that_is_not_a_power_of_two():
    cfg = PRESETS["gpt2"].replace(max_seq_len=1000)
    assert M._contexts(cfg) == [128, 256, 512, 1000]


def test_static_plots_render_chinese_free_and_warning_free(recwarn):
    import matplotlib.pyplot as plt
    fig = M.plot_memory("llama-3-8b", "bf16", batches=(1, 16))
    assert len(fig.axes[0].lines) == 1 + 2 + len(M.GPU_GIB)
    fig2 = M.plot_kv_per_token("fp16")
    assert len(fig2.axes[0].patches) == len(M.kv_per_token_rows("fp16"))
    fig.canvas.draw(), fig2.canvas.draw()
    plt.close("all")
    assert not [w for w in recwarn if "Glyph" in str(w.message)]


# ------------------------------------------------------------------------------------- live widget


def test_explorer_python_api():
    e = M.MemoryExplorer("llama-2-7b", "fp16", 4096, 1)
    assert e.budget == M.memory_budget("llama-2-7b", "fp16", 4096, 1)
    assert _row(e.html, "weights in memory") == "12.55 GiB" and e.view.value == e.html
    assert _row(e.html, "KV cache memory = weight memory at") == "25,705 tokens = 25,705 per request at batch 1"
    assert e.dtype_box.options == tuple(DTYPES)
    e.set(batch=32)
    assert e.budget.kv_bytes == kv_cache_bytes(PRESETS["llama-2-7b"], 4096, 32) and e.batch_box.value == 32
    assert "64.00 GiB" in e.html and "does not fit" in e.html  # 12.55 + 64 GiB > 24, 40 GiB
    e.set(model="gpt2")  # window 1024: the context is clamped
    assert e.budget.context == 1024 and e.context_box.value == 1024 and e.context_box.max == 1024
    e.dtype_box.value = "int4"  # as if picked in the browser
    assert e.budget.dtype == "int4" and e.budget.weight_bytes == weight_bytes(PRESETS["gpt2"], "int4")
    e.model_box.value = "llama-3-8b"
    e.context_box.value = 8192
    assert (e.budget.model, e.budget.context, e.budget.batch) == ("llama-3-8b", 8192, 32)
    before = e.budget
    with pytest.raises(ValueError, match=r"unknown model 'nope'; allowed"):
        e.set(model="nope")
    with pytest.raises(ValueError, match=r"context \(tokens per request\) must be an integer >= 1, got -5"):
        e.set(context=-5)
    assert e.budget == before and e.model_box.value == "llama-3-8b"
    assert e.last_update_ms >= 0


def _pieces(h: str) -> list[str]:
    """The text of an HTML string, one piece per element (what a browser shows, cell by cell)."""
    return [t.strip() for t in re.split(r"<[^>]+>", h) if t.strip()]


def _row(h: str, label: str) -> str:
    """The value next to ``label`` in the budget's table."""
    pieces = _pieces(h)
    return pieces[pieces.index(label) + 1]


def test_budget_html_bars():
    b = M.memory_budget("llama-2-7b", "fp16", 4096, 8)
    h = M.budget_html(b)
    weights, kv = lib.widgets.style.colour("weights"), lib.widgets.style.colour("cached")
    striped = f"{weights};{lib.widgets.style.hatch_css('--')}"  # the weights' level strokes, as the static bars'
    assert lib.widgets.style.concept("weights").hatch == "--"
    assert h.count(f"background:{striped}") == len(M.GPU_GIB) + 1  # a bar per GPU, and the legend's swatch
    assert h.count(f"background:{kv}'") == len(M.GPU_GIB) + 1
    w24 = b.weight_bytes / (24 * GIB) * 100
    kv24 = min(b.kv_bytes / (24 * GIB), 1 - w24 / 100) * 100  # 64 GiB of cache: the bar stops at the GPU's end
    assert f"width:{w24:.1f}%;background:{striped}" in h and f"width:{kv24:.1f}%;background:{kv}" in h
    # 28.55 GiB on a 24 GiB GPU: its box is 24 / 28.55 of the bar, the 4.55 GiB that do not fit run on, dashed
    box, past = 100 * 24 * GIB / b.total_bytes, 100 * (b.total_bytes - 24 * GIB) / b.total_bytes
    assert f"width:{box:.1f}%;box-sizing:border-box;border:1px solid" in h
    assert h.count("border-left:none") == 1 and f"width:{past:.1f}%;box-sizing:border-box" in h  # the 40+ fit
    assert "model weights (striped)" in _pieces(h) and "KV cache (solid)" in _pieces(h)  # a text legend
    assert "past the GPU's memory (dashed)" in _pieces(h)
    assert f"{b.max_requests(80):,} requests of 4,096 tokens fit next to the weights" in _pieces(h)


def test_budget_html_is_one_look_that_follows_the_theme():
    b = M.memory_budget("llama-2-7b", "fp16", 4096, 9)
    h = M.budget_html(b)
    assert "monospace" not in h and "<pre" not in h  # one font family: the page's
    assert f"color:{lib.widgets.style.css('ink')}" in h and lib.widgets.style.css("muted") in h and lib.widgets.style.css("border") in h
    # the browser test reads these strings in the widget's last HTML output, each within one table cell
    assert _row(h, f"KV cache (9 x 4,096 tokens)") == f"{fmt_bytes(b.kv_bytes)} ({b.kv_share:.1%} of total)"
    assert _row(h, "total") == fmt_bytes(b.total_bytes) and _row(h, "weights in memory") == fmt_bytes(b.weight_bytes)
    values = re.findall(r"<td style='([^']*)'>([^<]*)</td>", h)
    assert all("text-align:right" in css for css, text in values if re.match(r"[\d,.]+ (GiB|MiB|KiB|B)\b", text))
    palette = {c.upper() for c in (*lib.widgets.style.OKABE_ITO.values(), lib.widgets.style.PAPER, lib.widgets.style.INK, lib.widgets.style.MUTED,
                                   lib.widgets.style.GRID, lib.widgets.style.FREE)}
    assert {c.upper() for c in re.findall(r"#[0-9A-Fa-f]{6}", h)} <= palette  # every colour is lib.widgets.style's


# ----------------------------------------------------------------------------- the KV cache's own format

@pytest.mark.parametrize("kv_dtype", M.KV_DTYPES)
def test_the_cache_format_is_chosen_apart_from_the_weights(kv_dtype):
    c = PRESETS["llama-3-8b"]
    b = M.memory_budget("llama-3-8b", "bf16", 8192, 4, kv_dtype=kv_dtype)
    assert b.dtype == "bf16" and b.kv_dtype == kv_dtype
    assert b.weight_bytes == weight_bytes(c, "bf16")  # the weights do not move
    assert b.kv_bytes_per_token == kv_bytes_per_token(c, kv_dtype) == 32 * 2 * 8 * 128 * DTYPES[kv_dtype].bytes
    assert b.kv_bytes == kv_cache_bytes(c, 8192, 4, kv_dtype)
    assert b.memory_crossover_tokens == kv_memory_crossover_tokens(c, "bf16", kv_dtype)
    assert b.max_requests(80) == int((80 * GIB - b.weight_bytes) // kv_cache_bytes(c, 8192, 1, kv_dtype))
    assert M.memory_budget("llama-3-8b", "bf16", 8192, 4) == M.memory_budget("llama-3-8b", "bf16", 8192, 4, "bf16")


def test_int8_and_int4_caches_in_the_table_and_their_bytes_per_number():
    b16 = M.memory_budget("llama-2-7b", "fp16", 4096, 8)
    b8 = M.memory_budget("llama-2-7b", "fp16", 4096, 8, kv_dtype="int8")
    b4 = M.memory_budget("llama-2-7b", "fp16", 4096, 8, kv_dtype="int4")
    assert b16.kv_bytes == 2 * b8.kv_bytes == 4 * b4.kv_bytes  # int4: half a byte per number
    assert b8.memory_crossover_tokens == 2 * b16.memory_crossover_tokens
    text = M.memory_table(b4)
    assert "llama-2-7b in fp16 (KV cache in int4): 6,738,415,616 parameters" in text
    assert "KV cache per token       128.00 KiB" in text and "KV cache                   4.00 GiB" in text
    assert "in fp16 (KV cache in int8)" in M.budget_html(b8)
    with pytest.raises(ValueError, match=r"unknown dtype 'int3'; allowed: fp64"):
        M.memory_budget("llama-2-7b", "fp16", 4096, 8, kv_dtype="int3")


def test_the_analytic_cache_leaves_out_the_scales_that_quantized_kv_cache_counts():
    """lib.costs counts K and V numbers at the format's bytes; lib.QuantizedKVCache.nbytes adds its fp32 scales."""
    c = lib.load_demo("chat")[0].config
    q = lib.QuantizedKVCache(c, 2, 30)
    assert q.data_bytes == kv_cache_bytes(c, 30, 2, "int8")
    assert q.nbytes == kv_cache_bytes(c, 30, 2, "int8") + 2 * c.n_layers * 2 * c.n_kv_heads * 30 * 4


def test_explorer_kv_dtype_control():
    e = M.MemoryExplorer("llama-2-7b", "fp16", 4096, 8)
    assert e.budget.kv_dtype == "fp16" and e.kv_dtype_box.value == "fp16"
    assert e.kv_dtype_box.options == M.KV_DTYPES == ("fp32", "bf16", "fp16", "fp8", "int8", "int4")
    e.kv_dtype_box.value = "int8"  # as if picked in the browser
    assert e.budget == M.memory_budget("llama-2-7b", "fp16", 4096, 8, kv_dtype="int8")
    assert "8.00 GiB" in e.html and "in fp16 (KV cache in int8)" in e.html
    e.set(dtype="int4")  # the weights change, the cache keeps its format
    assert (e.budget.dtype, e.budget.kv_dtype) == ("int4", "int8")
    before = e.budget
    with pytest.raises(ValueError, match=r"kv_dtype \(the KV cache's format\)='fp64' is not supported; allowed: "
                                         r"fp32, bf16, fp16, fp8, int8, int4"):
        e.set(kv_dtype="fp64")
    assert e.budget == before and e.kv_dtype_box.value == "int8"
    assert M.MemoryExplorer("gpt2", "fp32", kv_dtype="int4").budget.kv_dtype == "int4"


def test_kv_per_token_bars_use_a_linear_axis():
    fig = M.plot_kv_per_token("fp16")
    ax = fig.axes[0]
    assert ax.get_xscale() == "linear" and ax.get_xlim()[0] == 0
    widths = sorted(p.get_width() for p in ax.patches)
    assert widths[-1] == 800.0  # llama-2-13b: 800 KiB per token, the longest bar


def test_kv_per_token_bars_are_the_cache_colour_hatched_by_kind():
    import matplotlib.colors as mc

    rows = M.kv_per_token_rows("fp16")[::-1]
    fig = M.plot_kv_per_token("fp16")
    bars = fig.axes[0].patches[:len(rows)]
    assert {mc.to_hex(b.get_facecolor()) for b in bars} == {lib.widgets.style.colour("cached").lower()}
    assert [b.get_hatch() or "" for b in bars] == [M.KIND_HATCHES[r["kind"]] for r in rows]
    assert len(set(M.KIND_HATCHES.values())) == len(M.KIND_HATCHES)  # every kind its own hatch
    legend = fig.axes[0].get_legend()
    assert [t.get_text() for t in legend.get_texts()] == ["MHA", "GQA", "MQA", "MLA"]


def test_memory_plot_uses_the_concepts_and_no_red():
    import matplotlib.colors as mc

    fig = M.plot_memory("llama-2-7b", "fp16", batches=(1, 8, 32))
    ax = fig.axes[0]
    weights = next(l for l in ax.lines if l.get_label().startswith("weights in memory"))
    assert mc.to_hex(weights.get_color()) == lib.widgets.style.colour("weights").lower()
    gpu = [l for l in ax.lines if not l.get_label() or l.get_label().startswith("_")]
    assert len(gpu) == len(M.GPU_GIB)
    assert {mc.to_hex(l.get_color()) for l in gpu} == {lib.widgets.style.concept("reference").colour.lower()}
    batches = [l for l in ax.lines if "batch" in l.get_label()]
    assert len({l.get_marker() for l in batches}) == 3  # a marker each, not only a shade
    plt_close(fig)


def plt_close(fig):
    import matplotlib.pyplot as plt
    plt.close(fig)


def test_memory_plot_labels_its_lines_where_they_are_and_hides_no_gpu_label():
    fig = M.plot_memory("llama-2-7b", "fp16", batches=(1, 8, 32))
    fig.canvas.draw()
    ax = fig.axes[0]
    renderer = fig.canvas.get_renderer()
    assert not fig.legends and ax.get_legend() is None  # direct labels instead of a legend to look up
    ends = [t for t in ax.texts if t.get_text().startswith("batch ")]
    assert [t.get_text() for t in ends] == ["batch 1", "batch 8", "batch 32"]
    labels = [t for t in ax.texts if t.get_text().endswith("GiB GPU")]
    assert [t.get_text() for t in labels] == [f"{g} GiB GPU" for g in M.GPU_GIB]
    for t in labels + ends:
        assert ax.get_ylim()[0] <= (t.xy if hasattr(t, "xy") else t.get_position())[1] <= ax.get_ylim()[1]
    boxes = [t.get_window_extent(renderer) for t in ends]
    assert not any(a.overlaps(b) for i, a in enumerate(boxes) for b in boxes[i + 1:])
    from lib.widgets import style
    assert all(l.get_color() not in style.CATEGORICAL for l in ax.lines if "batch" in l.get_label())  # no concept hue
    plt_close(fig)

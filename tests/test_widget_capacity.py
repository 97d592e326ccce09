"""The capacity explorer (lib.widgets.capacity): every number is lib.kv_capacity's; the memory bar adds up to the
GPU; the live widget through its Python API (set values as the controls do) without a browser."""
import pytest

import lib
from lib.costs import GiB
from lib.widgets import capacity as cw
from lib.i18n import speaking


def test_memory_parts_add_up_and_come_from_kv_capacity():
    cap = lib.kv_capacity("llama-3-8b", "H100 SXM", 0.9, 16, "fp8", activation_peak=2 * GiB)
    parts = cw.memory_parts(cap)
    assert sum(parts.values()) == cap.total_memory
    assert parts["KV blocks"] == cap.num_blocks * cap.block_bytes and parts["weights"] == cap.weights
    assert 0 <= cap.requested - cap.weights - 2 * GiB - parts["KV blocks"] < cap.block_bytes  # < one block left over
    big = lib.kv_capacity("llama-2-70b", "H100 SXM")  # the weights alone exceed the GPU
    assert cw.memory_parts(big)["KV blocks"] == 0 and sum(cw.memory_parts(big).values()) == big.total_memory


def test_the_live_explorer_shows_lib_numbers():
    w = cw.CapacityExplorer()
    cap = lib.kv_capacity("llama-3-8b", "H100 SXM", 0.92, 16, "auto", activation_peak=2 * GiB)
    assert w.capacity == cap and f"{cap.num_blocks:,}" in w.html and f"{cap.max_concurrency:.2f}" in w.html
    w.boxes["gpu_memory_utilization"].value = 0.8  # as a person moves the slider
    assert w.capacity == lib.kv_capacity("llama-3-8b", "H100 SXM", 0.8, 16, activation_peak=2 * GiB)
    w.set(model="gpt2")  # a new model: max_model_len becomes its window
    assert w.values["max_model_len"] == 1024 and w.boxes["max_model_len"].max == 1024
    w.set(max_model_len=512, block_size=32, kv_cache_dtype="fp8", gpu="H200 SXM")
    want = lib.kv_capacity("gpt2", "H200 SXM", 0.8, 32, "fp8", activation_peak=2 * GiB, max_model_len=512)
    assert w.capacity == want and w.state()["summary"]["tokens"] == want.tokens
    with pytest.raises(ValueError, match=r"max_model_len must be an integer from 1 to 1,024"):
        w.set(max_model_len=2048)
    with pytest.raises(ValueError, match=r"unknown control"):
        w.set(utilization=0.5)
    assert w.capacity == want  # refused values change nothing
    w.set(model="llama-2-70b", gpu="H100 SXM")
    assert w.capacity.num_blocks == 0 and "no KV block fits" in w.html


def test_static_and_plotly_tiers():
    caps = cw.sweep("llama-3-8b", "H100 SXM", activation_peak=2 * GiB)
    fig = cw.capacity_figure(caps)
    assert len(fig.frames) == len(cw.UTILIZATIONS) == len(fig.layout.sliders[0].steps)
    assert cw.plot_capacity(caps).axes and "KV blocks" in cw.capacity_table(caps)
    with speaking("zh"):
        assert "激活预留" in cw.capacity_html(caps[0]) and "块数" in cw.capacity_table(caps)

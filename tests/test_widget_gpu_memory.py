"""Where the KV cache sits in GPU memory while serving (lib.widgets.gpu_memory): every number is lib.kv_capacity's,
the five parts add up to the GPU's CUDA-reported memory, requests beyond the pool wait, and the labels speak
Chinese in the Chinese edition."""
import matplotlib
import pytest

matplotlib.use("Agg")

import lib  # noqa: E402
from lib.costs import GiB  # noqa: E402
from lib.widgets import gpu_memory as gm  # noqa: E402
from lib.i18n import speaking  # noqa: E402


def test_parts_add_up_to_the_cuda_total_and_come_from_kv_capacity():
    cap = lib.kv_capacity("llama-3-8b", "H100 SXM", 0.92, 16, activation_peak=2 * GiB)
    assert cap.total_memory == int(79.22 * GiB)  # what CUDA reports, not 80 GiB
    for batch in (1, 16, 64):
        m = gm.serving_memory("llama-3-8b", "H100 SXM", batch, 8192)
        assert m.capacity == cap and sum(m.parts.values()) == cap.total_memory
        assert m.parts["KV blocks holding tokens"] + m.parts["empty KV blocks"] == cap.kv_bytes
        assert m.parts["weights"] == cap.weights and m.parts["activations reserve"] == 2 * GiB
    small, full = gm.serving_memory(batch=16, context=8192), gm.serving_memory(batch=64, context=8192)
    assert small.blocks_used == 16 * 512 and small.waiting == 0 and small.tokens_held == 16 * 8192
    assert full.running == cap.usable_blocks // 512 == 55 and full.waiting == 9  # the null block is not usable


def test_a_model_that_barely_fits_holds_no_request_and_bad_input_says_what_is_allowed():
    m = gm.serving_memory("llama-2-70b", "H200 SXM", batch=1, context=4096, activation_gib=0)
    assert m.capacity.num_blocks == 28 and m.running == 0 and m.waiting == 1  # ≈ 0.14 GiB: not one 4096-token request
    with pytest.raises(ValueError, match="context must be tokens per request, from 1 to the window, 8,192"):
        gm.serving_memory(context=9000)
    with pytest.raises(ValueError, match="batch must be"):
        gm.serving_memory(batch=0)
    with pytest.raises(ValueError, match="batches must name at least one"):
        gm.plot_serving_memory(batches=())


def test_table_and_figure_in_both_languages():
    import matplotlib.pyplot as plt

    ms = [gm.serving_memory(batch=b) for b in (1, 64)]
    table = gm.serving_memory_table(ms)
    assert "55.00 GiB" in table and "empty KV blocks" in table
    fig = gm.plot_serving_memory(batches=(1, 64))
    texts = [x.get_text() for x in fig.findobj(matplotlib.text.Text)]
    assert any("28,633 blocks × 16 tokens = 458,128 tokens" in x for x in texts)
    plt.close(fig)
    with speaking("zh"):
        assert "未用的 KV 块" in gm.serving_memory_table(ms)
        fig = gm.plot_serving_memory(batches=(1, 64))
        texts = " ".join(x.get_text() for x in fig.findobj(matplotlib.text.Text))
        plt.close(fig)
    assert "KV 块池" in texts and "requested" not in texts and "where the memory goes" not in texts

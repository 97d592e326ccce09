"""The cache tensor as a picture (lib/widgets/cache_tensor.py): it draws what lib.KVCache holds, with lib.costs' bytes."""
import matplotlib.pyplot as plt
import pytest
import torch

import lib
from helpers import drawn_without_missing_glyphs
from lib import i18n
from lib.widgets.cache_tensor import _states, cache_layout, cache_tensor_figure, cache_tensor_html, layout_for


def _cache(chat, prompt="<s>人工", decode="智", max_len=12, dtype=None):
    model, tok = chat
    cache = lib.KVCache(model.config, batch_size=1, max_len=max_len, dtype=dtype)
    with torch.no_grad():
        model(torch.tensor([tok.encode(prompt)]), cache=cache)  # prefill
        if decode:
            model(torch.tensor([tok.encode(decode)]), cache=cache)  # one decode step
    return cache


def test_the_layout_is_the_cache_s_own_sizes_and_lib_costs_bytes(chat):
    c = chat[0].config
    lay = cache_layout(_cache(chat))
    assert lay.shape == (1, c.n_kv_heads, 12, c.head_dim) == tuple(_cache(chat).k[0].shape)
    assert lay.slice_shape == (1, c.n_kv_heads, 1, c.head_dim) and lay.filled == 4
    assert lay.held_bytes == 4 * lay.bytes_per_token
    assert _states(lay) == ["cached"] * 3 + ["new"] + ["none"] * 8  # the prefill's 3, the appended 1, 8 reserved
    for dtype, size in ((torch.float32, 4), (torch.float16, 2)):  # an empty cache of each dtype
        lay = cache_layout(lib.KVCache(c, batch_size=2, max_len=12, dtype=dtype))
        assert lay.bytes_per_token == lib.costs.kv_bytes_per_token(c, dtype=dtype) == 2 * c.n_layers * c.n_kv_heads \
            * c.head_dim * size
        assert lay.reserved_bytes == lib.kv_cache_bytes(c, 12, batch_size=2, dtype=dtype)
        assert lay.step_bytes == 2 * lay.bytes_per_token and lay.held_bytes == 0 and set(_states(lay)) == {"none"}


def test_the_figure_in_both_languages(chat):
    for lang in ("en", "zh"):
        with i18n.speaking(lang):
            fig = drawn_without_missing_glyphs(lambda: cache_tensor_figure(_cache(chat)))
            words = " ".join(tx.get_text() for tx in fig.findobj(plt.Text))
            assert f"{lib.costs.kv_bytes_per_token(chat[0].config, torch.float32):,}" in words
            assert ("追加" in words) == (lang == "zh")
            plt.close(fig)
    plt.close(cache_tensor_figure(_cache(chat, decode=None, prompt="<s>")))  # a prefill of one token only


def test_errors_say_what_is_allowed(chat):
    with pytest.raises(TypeError, match="cache must be a lib.KVCache"):
        cache_layout(lib.ConcatKVCache(chat[0].config, 1, 8))
    with pytest.raises(ValueError, match="at most 64"):
        cache_tensor_figure(lib.KVCache(lib.load_demo("lm")[0].config, 1, 65))
    with pytest.raises(ValueError, match="ring buffer"):
        cache_layout(lib.KVCache(chat[0].config, 1, 16, window=4))
    with pytest.raises(ValueError, match="batch must be a sequence of the cache, 0..0"):
        cache_tensor_figure(_cache(chat), batch=1)


def test_the_layout_from_sizes_alone_is_the_cache_s(chat):
    cache = _cache(chat)
    assert layout_for(chat[0].config, 12, 4, dtype=torch.float32) == cache_layout(cache)


def test_the_html_slab_draws_each_position_in_its_state(chat):
    c = chat[0].config
    lay = layout_for(c, 6, 3)
    states = ["cached", "cached", "new", "none", "none", "none"]
    page = cache_tensor_html(lay, states, layer=2)
    assert page.count("title=") == 2 * c.n_kv_heads * 6 and "K of layer 2" in page and "V of layer 2" in page
    assert page.count("3px solid") == 2 * c.n_kv_heads  # the appended position: a heavy edge, in K and in V
    assert page.count("dashed") == 2 * c.n_kv_heads * 3  # reserved, not written yet
    assert f"{lay.shape}" in page and "3 of 6 positions written" in page
    with pytest.raises(ValueError, match="one K/V state per position of the cache \\(6\\), got 2"):
        cache_tensor_html(lay, states[:2])

"""The decoder block as a picture (lib/widgets/decoder_diagram.py): the real model's diagram, its shapes taken
from the config it is given, its words in the notebook's language."""
from __future__ import annotations

import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt  # noqa: E402
import pytest  # noqa: E402
from matplotlib.text import Text  # noqa: E402

import lib  # noqa: E402
from lib import i18n  # noqa: E402
from lib.widgets.decoder_diagram import block_parts, decoder_diagram  # noqa: E402


def texts(fig) -> str:
    return "\n".join(tx.get_text() for tx in fig.findobj(Text) if tx.get_visible())


def test_every_shape_and_module_of_the_chat_model_is_drawn(chat):
    model, _ = chat
    c = model.config
    fig = decoder_diagram(c)
    try:
        shown = texts(fig)
        for piece in (f"(B, T, {c.d_model})", f"Q (B, {c.n_heads}, T, {c.head_dim})",
                      f"K, V (B, {c.n_kv_heads}, T, {c.head_dim})", f"(B, {c.n_kv_heads}, S, {c.head_dim})",
                      f"(B, T, {c.d_ff})", f"(B, T, {c.vocab_size})", "LayerNorm (norm1)", "LayerNorm (norm2)",
                      "LayerNorm (norm_f)", f"q_proj\n{c.d_model}→{c.d_model}", f"o_proj {c.d_model}→{c.d_model}",
                      f"up_proj {c.d_model}→{c.d_ff}", "GELU", f"lm_head {c.d_model}→{c.vocab_size}",
                      f"× {c.n_layers} layers", "KV cache, layer ℓ", "pos_emb"):
            assert piece in shown, piece
    finally:
        plt.close(fig)


def test_the_parts_follow_the_config_gqa_rope_rmsnorm_swiglu():
    c = lib.ModelConfig(vocab_size=50, n_layers=3, d_model=96, n_heads=6, n_kv_heads=2, d_ff=200,
                        norm="rmsnorm", activation="swiglu", positions="rope")
    p = block_parts(c)
    assert p["q"] == "Q (B, 6, T, 16)" and p["kv"] == "K, V (B, 2, T, 16)" and p["cache"] == "K, V (B, 2, S, 16)"
    assert p["qkv"] == ("q_proj 96→96", "k_proj 96→32", "v_proj 96→32")
    assert p["norm1"] == "RMSNorm (norm1)" and "SiLU(gate) × up" in p["ffn"] and "gate_proj" in p["ffn"]
    assert p["rope"] and "pos_emb" not in p["embed"] and p["n_layers"] == 3
    fig = decoder_diagram(c)
    try:
        assert "RoPE turns Q and K by position" in texts(fig)
    finally:
        plt.close(fig)


def test_the_chinese_edition_draws_chinese(chat):
    model, _ = chat
    with i18n.speaking("zh"):
        fig = decoder_diagram(model.config)
    try:
        shown = texts(fig)
        assert "KV 缓存，第 ℓ 层" in shown and "整个模型" in shown and "KV cache" not in shown
    finally:
        plt.close(fig)


def test_anything_but_a_config_is_refused_with_what_to_pass(chat):
    model, _ = chat
    with pytest.raises(TypeError, match=r"ModelConfig \(model.config\), got MiniTransformer"):
        decoder_diagram(model)

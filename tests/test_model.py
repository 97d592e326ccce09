"""ModelConfig validation, MiniTransformer shapes and errors, devices and dtypes."""
import pytest
import torch

from lib import ForwardRecord, MiniTransformer, ModelConfig, pick_device, resolve_device
from lib.costs import param_count
from lib.device import resolve_dtype


def test_defaults_and_attention_kinds():
    c = ModelConfig(vocab_size=10, n_layers=1, d_model=8, n_heads=4)
    assert (c.n_kv_heads, c.head_dim, c.d_ff, c.attention_kind) == (4, 2, 32, "MHA")
    assert ModelConfig(vocab_size=10, n_layers=1, d_model=8, n_heads=4, n_kv_heads=2).attention_kind == "GQA"
    assert ModelConfig(vocab_size=10, n_layers=1, d_model=8, n_heads=4, n_kv_heads=1).attention_kind == "MQA"


@pytest.mark.parametrize("kw,msg", [
    (dict(d_model=10, n_heads=4), r"d_model=10 is not divisible by n_heads=4"),
    (dict(n_heads=4, n_kv_heads=3), r"n_heads=4 is not a multiple of n_kv_heads=3.*allowed n_kv_heads: \[1, 2, 4\]"),
    (dict(norm="batchnorm"), r"ModelConfig.norm='batchnorm' is not supported; allowed: layernorm, rmsnorm"),
    (dict(activation="relu"), r"allowed: gelu, gelu_tanh, silu, swiglu"),
    (dict(positions="alibi"), r"allowed: learned, rope"),
    (dict(n_layers=0), r"ModelConfig.n_layers must be a positive integer, got 0"),
    (dict(positions="rope", d_model=12, n_heads=4), r"rotary positions need an even head_dim, got head_dim=3"),
])
def test_config_errors(kw, msg):
    base = dict(vocab_size=10, n_layers=1, d_model=8, n_heads=2)
    base.update(kw)
    with pytest.raises(ValueError, match=msg):
        ModelConfig(**base)


def test_config_is_frozen_and_replace_makes_a_validated_copy():
    import dataclasses
    from lib import PRESETS
    gpt2 = PRESETS["gpt2"]
    with pytest.raises(dataclasses.FrozenInstanceError, match=r"cannot change 'n_layers'; .*config.replace\(n_layers=...\)"):
        gpt2.n_layers = 2  # would have changed the preset for every later user in the process
    with pytest.raises(dataclasses.FrozenInstanceError, match=r"cannot change 'd_model'"):
        del gpt2.d_model
    assert gpt2.n_layers == 12
    small = gpt2.replace(n_layers=2)
    assert (small.n_layers, gpt2.n_layers) == (2, 12) and small.d_ff == gpt2.d_ff
    with pytest.raises(ValueError, match=r"n_heads=5 is not a multiple of n_kv_heads"):
        gpt2.replace(n_heads=5, n_kv_heads=2, head_dim=64)  # validated again, as a new config is
    assert len({gpt2, gpt2.replace(), small}) == 2  # hashable, equal by value


def test_replace_derives_again_what_was_derived_and_keeps_what_was_set():
    base = ModelConfig(vocab_size=10, n_layers=1, d_model=64, n_heads=8)  # MHA, head_dim 8, d_ff 256
    c = base.replace(n_heads=4)
    assert (c.n_kv_heads, c.head_dim, c.d_ff) == (4, 16, 256)  # still MHA; head_dim follows
    c = base.replace(d_model=32)
    assert (c.head_dim, c.d_ff) == (4, 128)
    gqa = base.replace(n_kv_heads=2)
    assert gqa.replace(n_heads=4).n_kv_heads == 2  # set by hand: kept (and validated)
    wide = ModelConfig(vocab_size=10, n_layers=1, d_model=64, n_heads=8, head_dim=16, d_ff=100)
    assert (wide.replace(n_heads=4).head_dim, wide.replace(d_model=32).d_ff) == (16, 100)
    assert base.replace(bias=False).qkv_bias is False
    qwen = base.replace(bias=False, qkv_bias=True)
    assert qwen.replace(n_layers=2).qkv_bias is True and qwen.replace(bias=True).qkv_bias is True
    assert base.replace(n_heads=4, n_kv_heads=1).attention_kind == "MQA"  # what is given wins


def test_shapes_parameters_and_state_dict():
    c = ModelConfig(vocab_size=20, n_layers=2, d_model=16, n_heads=4, n_kv_heads=2, positions="rope",
                    activation="swiglu", norm="rmsnorm", bias=False, tie_embeddings=False)
    m = MiniTransformer(c)
    assert m(torch.randint(0, 20, (3, 7))).shape == (3, 7, 20)
    assert m.num_parameters() == param_count(c)
    assert m.blocks[0].attn.k_proj.weight.shape == (2 * 4, 16)  # n_kv_heads * head_dim rows
    assert len(list(m.buffers())) == 0  # rope angles are computed, not stored; no cache anywhere
    tied = MiniTransformer(c.replace(tie_embeddings=True))
    assert tied.lm_head.weight is tied.tok_emb.weight


def test_forward_record_captures_every_intermediate():
    m = MiniTransformer(ModelConfig(vocab_size=20, n_layers=2, d_model=8, n_heads=2)).eval()
    rec = ForwardRecord(capture=True)
    m(torch.randint(0, 20, (1, 5)), record=rec)
    t = rec.tensors[1]
    assert t["q"].shape == (1, 2, 5, 4) and t["attn_weights"].shape == (1, 2, 5, 5)
    assert torch.all(t["attn_weights"].triu(1) == 0)  # causal: no weight on future keys
    assert t["ffn_out"].shape == t["hidden"].shape == rec.tensors["embedding"].shape == (1, 5, 8)
    assert rec.kv_computed == {0: 5, 1: 5} and rec.kv_read == {0: 0, 1: 0}


def test_input_errors():
    m = MiniTransformer(ModelConfig(vocab_size=20, n_layers=1, d_model=8, n_heads=2, max_seq_len=6))
    with pytest.raises(ValueError, match=r"shape \(batch, seq_len\), got shape \(3,\) \(for one sequence use"):
        m(torch.tensor([1, 2, 3]))
    with pytest.raises(ValueError, match=r"token id 20 is out of range: this model's ids run from 0 to 19"):
        m(torch.tensor([[1, 20]]))
    with pytest.raises(ValueError, match=r"token id -1 is out of range"):
        m(torch.tensor([[1, -1]]))
    with pytest.raises(TypeError, match=r"integer token ids, got dtype torch.float32"):
        m(torch.tensor([[1.0, 2.0]]))
    with pytest.raises(ValueError, match=r"positions 0..6 were asked for, but this model has max_seq_len=6"):
        m(torch.ones(1, 7, dtype=torch.long))
    with pytest.raises(ValueError, match=r"input_ids is empty"):
        m(torch.ones(1, 0, dtype=torch.long))
    with pytest.raises(TypeError, match=r"needs a lib.ModelConfig"):
        MiniTransformer({"vocab_size": 3})


def test_device_helpers(capsys):
    dev = pick_device()
    assert "Using device:" in capsys.readouterr().out
    assert dev.type in ("cuda", "mps", "cpu")
    assert resolve_device("cpu") == torch.device("cpu")
    with pytest.raises(ValueError, match=r"is not a device name|is not available here"):
        resolve_device("tpu")
    if not torch.cuda.is_available():
        with pytest.raises(ValueError, match=r"device 'cuda:0' is not available here \(torch .* build"):
            pick_device("cuda:0")
    with pytest.raises(ValueError, match=r"unsupported dtype 'fp8'"):
        resolve_dtype("fp8")


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.float16])
def test_runs_in_every_dtype_on_every_device(device, dtype):
    c = ModelConfig(vocab_size=20, n_layers=2, d_model=16, n_heads=4, n_kv_heads=2, positions="rope")
    torch.manual_seed(0)
    ref = MiniTransformer(c).eval()
    m = MiniTransformer(c).to(device=device, dtype=dtype).eval()
    m.load_state_dict(ref.state_dict())
    x = torch.randint(0, 20, (2, 9))
    with torch.no_grad():
        out = m(x.to(device))
        assert out.dtype == dtype and torch.isfinite(out).all()
        torch.testing.assert_close(out.float().cpu(), ref(x), atol=0.05, rtol=0.05)


def test_last_only_returns_the_last_positions_logits():
    from helpers import randomized_model
    model = randomized_model(n_kv_heads=2, positions="rope")
    ids = torch.randint(0, 50, (2, 7))
    full = model(ids)
    last = model(ids, last_only=True)
    assert last.shape == (2, 1, 50)
    torch.testing.assert_close(last, full[:, -1:], atol=1e-6, rtol=0)

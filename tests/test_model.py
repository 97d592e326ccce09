"""MiniTransformer: shapes, the forward record, input errors, devices and dtypes."""
import pytest
import torch

import lib
from lib import ForwardRecord, MiniTransformer, ModelConfig, pick_device, resolve_device
from lib.costs import param_count
from lib.device import resolve_dtype


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
    with pytest.raises(TypeError, match=r"signed integer token ids \(torch.long, torch.int\), got dtype torch.float32"):
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


@pytest.mark.parametrize("config", [dict(), dict(attn_impl="sdpa"), dict(sliding_window=4), dict(n_kv_heads=2)])
def test_the_mask_is_built_once_per_pass_and_handed_to_every_layer(config):
    """One mask per pass, the same object in every layer; a decode step (one query after every key) needs none."""
    from helpers import randomized_model
    from lib import KVCache
    model = randomized_model(n_layers=3, **config)
    seen = []
    hooks = [b.attn.register_forward_pre_hook(lambda mod, args: seen.append(args[2])) for b in model.blocks]
    cache = KVCache(model.config, 2, 12)
    model(torch.randint(0, 50, (2, 6)), cache=cache)  # a prefill: 6 queries
    assert len(seen) == 3 and seen[0] is not None and all(m is seen[0] for m in seen)
    assert seen[0].shape[-2:] == (6, 6)
    seen.clear()
    model(torch.randint(0, 50, (2, 1)), cache=cache)  # a decode step
    assert len(seen) == 3 and all(m is seen[0] for m in seen)
    assert (seen[0] is None) == ("sliding_window" not in config)  # a window still hides the oldest keys
    for h in hooks:
        h.remove()


def test_a_recorded_pass_of_an_sdpa_model_runs_written_out_with_the_same_numbers():
    """A record needs the attention weights, which the fused kernel never forms: an sdpa model records on the
    written-out path (ForwardRecord says so), and its logits, cached or not, traced or not, agree."""
    from helpers import ATOL, randomized_model
    from lib import KVCache, generate
    fused = randomized_model(n_kv_heads=2, positions="rope", attn_impl="sdpa")
    ids = torch.randint(0, 50, (2, 9))
    rec = ForwardRecord()
    recorded, plain = fused(ids, record=rec), fused(ids)
    torch.testing.assert_close(recorded, plain, atol=ATOL, rtol=0)
    assert rec.attention[0].shape == (2, 4, 9)  # weights of the written-out path
    cache = KVCache(fused.config, 2, 9)
    steps = [fused(ids[:, :5], cache=cache)] + [fused(ids[:, i:i + 1], cache=cache) for i in range(5, 9)]
    torch.testing.assert_close(torch.cat(steps, dim=1), plain, atol=ATOL, rtol=0)
    traced, untraced = generate(fused, ids[:, :3], 8, trace=True), generate(fused, ids[:, :3], 8)
    assert torch.equal(traced.sequences, untraced.sequences)
    manual = randomized_model(n_kv_heads=2, positions="rope")  # the same weights, written out, no record
    torch.testing.assert_close(manual(ids), plain, atol=ATOL, rtol=0)
    for step, row in zip(traced.trace, torch.stack([manual(traced.sequences[:, :n])[:, -1] for n in
                                                    range(3, 11)])):
        torch.testing.assert_close(step.logits, row, atol=ATOL, rtol=0)


def test_checked_skips_only_the_ids_read():
    """``checked=True`` (what generate passes after checking the prompt) skips reading the ids back from the
    device; the positions are still checked at every pass."""
    m = MiniTransformer(ModelConfig(vocab_size=20, n_layers=1, d_model=8, n_heads=2, max_seq_len=6)).eval()
    ids = torch.tensor([[1, 2, 3]])
    torch.testing.assert_close(m(ids, checked=True), m(ids))
    with pytest.raises(ValueError, match=r"positions 0..6 were asked for, but this model has max_seq_len=6"):
        m(torch.ones(1, 7, dtype=torch.long), checked=True)


def test_in_step_the_causal_mask_goes_by_order_not_by_reported_positions():
    """Sequences in step, nothing windowed: query i of T sees the first S - T + i + 1 keys, whatever positions
    the cache reports (notebook 03's ShiftedCache shifts them all by +10: RoPE then gives the same logits)."""
    from helpers import ATOL, randomized_model
    from lib import KVCache
    model = randomized_model(positions="rope")

    class Shifted(KVCache):
        def begin(self, *args, **kwargs):
            feed = super().begin(*args, **kwargs)
            feed.positions = feed.positions + 10
            return feed
    ids = torch.randint(0, 50, (1, 6))
    for cache in (KVCache(model.config, 1, 8), Shifted(model.config, 1, 8)):
        model(ids[:, :4], cache=cache)
        torch.testing.assert_close(model(ids[:, 4:], cache=cache), model(ids)[:, 4:], atol=ATOL, rtol=0)


def test_a_block_called_on_its_own_is_causal_as_in_the_pass():
    """Notebook 01 runs ``model.blocks[0](h0)`` by hand: with no pass to build the mask, the block still masks the
    future (the mask is built once per pass for the layers of a pass, and here by the block itself)."""
    model, tok = lib.load_demo("chat")
    ids = torch.tensor([tok.encode("<s>人工智能")])
    rec = lib.ForwardRecord(capture=True)
    model(ids, record=rec)
    alone = model.blocks[0](rec.tensors["embedding"])
    assert torch.allclose(alone, rec.tensors[0]["hidden"], atol=1e-5)
    changed = rec.tensors["embedding"].clone()
    changed[:, -1] += 1.0  # the last position changes: no earlier position may notice
    assert torch.allclose(model.blocks[0](changed)[:, :-1], alone[:, :-1], atol=1e-6)


def test_eval_mode_runs_in_eval_and_puts_back_every_module_s_mode():
    """``lib.model.eval_mode``: inside, every module is in eval mode, also a child left training under a root in
    eval mode (the switch is skipped only when no module trains); after, the model is back in the mode it was in,
    every module with it (``model.train(mode)``)."""
    from lib.model import eval_mode
    model = MiniTransformer(ModelConfig(vocab_size=11, n_layers=2, d_model=16, n_heads=2, d_ff=32, max_seq_len=8))
    for setup in ("train", "eval", "eval, one block training"):
        model.train(setup == "train")
        if setup.endswith("training"):
            model.blocks[1].train()
        was = model.training
        with eval_mode(model) as inside:
            assert inside is model and not any(m.training for m in model.modules()), setup
        assert all(m.training == was for m in model.modules()), setup
    with pytest.raises(RuntimeError, match="boom"):
        with eval_mode(model.train()):
            raise RuntimeError("boom")
    assert all(m.training for m in model.modules())

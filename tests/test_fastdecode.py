"""FastDecoder (lib.fastdecode): the packed, split decode step computes what the plain model computes."""
import pytest
import torch
import torch.nn.functional as F

from helpers import ATOL, VARIANTS, randomized_model
from lib import FastDecoder, KVCache, generate
from lib.fastdecode import PackedLinear, StaleWeightsError


# ----------------------------------------------------------------------------------------- PackedLinear

@pytest.mark.parametrize("split", ["cols", "rows"])
@pytest.mark.parametrize("shards", [1, 2, 3, 4])
@pytest.mark.parametrize("bias", [True, False])
@pytest.mark.parametrize("out_in", [(12, 8), (13, 7), (5, 9)])
def test_packed_linear_equals_f_linear(split, shards, bias, out_in):
    out_f, in_f = out_in
    w = torch.randn(out_f, in_f)
    b = torch.randn(out_f) if bias else None
    packed = PackedLinear([w], [b], shards, split)
    for batch in (1, 3):
        x = torch.randn(batch, in_f)
        torch.testing.assert_close(packed(x), F.linear(x, w, b), atol=ATOL, rtol=0)


def test_packed_linear_fuses_layers_along_the_output():
    ws = [torch.randn(6, 8), torch.randn(4, 8), torch.randn(4, 8)]
    bs = [torch.randn(6), None, torch.randn(4)]  # a layer without bias contributes zeros
    packed = PackedLinear(ws, bs, 2)
    x = torch.randn(2, 8)
    expected = torch.cat([F.linear(x, ws[0], bs[0]), F.linear(x, ws[1]), F.linear(x, ws[2], bs[2])], dim=1)
    torch.testing.assert_close(packed(x), expected, atol=ATOL, rtol=0)


def test_packed_linear_layouts():
    w = torch.arange(24.0).view(4, 6)  # (out 4, in 6)
    cols = PackedLinear([w], [None], 2, "cols")
    assert cols.weight.shape == (2, 6, 2) and torch.equal(cols.weight[1], w[2:].t())
    rows = PackedLinear([w], [None], 2, "rows")
    assert rows.weight.shape == (2, 3, 4) and torch.equal(rows.weight[1], w[:, 3:].t())
    assert cols.nbytes == rows.nbytes == 24 * 4
    with pytest.raises(ValueError, match="split must be 'cols' or 'rows'"):
        PackedLinear([w], [None], 2, "diagonal")


# ------------------------------------------------------------------------------------------ one step

@pytest.mark.parametrize("variant", VARIANTS)
@pytest.mark.parametrize("shards", [1, 2, 3])
@pytest.mark.parametrize("batch", [1, 3])
def test_every_decode_step_matches_the_plain_model(variant, shards, batch):
    """Logits and cached K/V of the packed path equal the plain model's at every position of the context."""
    model = randomized_model(**VARIANTS[variant])
    fast = FastDecoder(model, shards)
    L = model.config.max_seq_len
    ids = torch.randint(0, model.config.vocab_size, (batch, L))
    plain_cache, fast_cache = KVCache(model.config, batch, L), KVCache(model.config, batch, L)
    with torch.no_grad():
        model(ids[:, :2], cache=plain_cache)
        fast(ids[:, :2], cache=fast_cache)  # prefill: handed to the plain model
        for t in range(2, L):
            a = model(ids[:, t:t + 1], cache=plain_cache)
            b = fast(ids[:, t:t + 1], cache=fast_cache)
            assert b.shape == a.shape == (batch, 1, model.config.vocab_size)
            torch.testing.assert_close(b, a, atol=ATOL, rtol=0)
    assert fast_cache.seq_len == plain_cache.seq_len == L
    for layer in range(model.config.n_layers):
        torch.testing.assert_close(fast_cache.keys(layer), plain_cache.keys(layer), atol=ATOL, rtol=0)
        torch.testing.assert_close(fast_cache.values(layer), plain_cache.values(layer), atol=ATOL, rtol=0)


@pytest.mark.parametrize("variant", VARIANTS)
@pytest.mark.parametrize("shards", [1, 2])
def test_whole_sequences_and_chunks_match_the_plain_model(variant, shards):
    """Several tokens per pass (a prefill, chunks after cached positions, no cache): the causal mask is right."""
    model = randomized_model(**VARIANTS[variant])
    fast = FastDecoder(model, shards)
    L = model.config.max_seq_len
    ids = torch.randint(0, model.config.vocab_size, (2, L))
    with torch.no_grad():
        torch.testing.assert_close(fast(ids), model(ids), atol=ATOL, rtol=0)  # no cache, the whole window
        plain_cache, fast_cache = KVCache(model.config, 2, L), KVCache(model.config, 2, L)
        for a, b in ((0, 5), (5, 6), (6, 13), (13, L)):
            torch.testing.assert_close(fast(ids[:, a:b], cache=fast_cache), model(ids[:, a:b], cache=plain_cache),
                                       atol=ATOL, rtol=0)
    assert fast_cache.seq_len == L
    torch.testing.assert_close(fast_cache.values(1), plain_cache.values(1), atol=ATOL, rtol=0)


def test_which_passes_take_the_packed_weights(monkeypatch):
    model = randomized_model()
    fast = FastDecoder(model, 2)
    calls = {"packed": 0, "plain": 0}
    forward = model.forward  # the one forward pass: FastDecoder only hands it its packed weights

    def counting(*a, **k):
        calls["plain" if k.get("packed") is None else "packed"] += 1
        return forward(*a, **k)

    monkeypatch.setattr(model, "forward", counting)
    generate(fast, [1, 2, 3], 6)
    assert calls == {"packed": 6, "plain": 0}  # the prefill and five one-token steps
    generate(fast, [1, 2, 3], 6, use_cache=False)
    assert calls == {"packed": 12, "plain": 0}
    traced = generate(fast, [1, 2, 3], 3, trace=True)  # recording attention: the plain model's job
    assert calls == {"packed": 12, "plain": 3} and traced.trace[-1].attention.shape == (2, 1, 4, 5)
    model.train()
    fast(torch.tensor([[1, 2]]))  # training mode: the plain model (gradients flow through its weights)
    assert calls == {"packed": 12, "plain": 4}


# ----------------------------------------------------------------------------------------- generation

@pytest.mark.parametrize("variant", VARIANTS)
def test_generate_gives_the_same_tokens(variant):
    model = randomized_model(**VARIANTS[variant])
    fast = FastDecoder(model, 2)
    prompt = torch.randint(0, model.config.vocab_size, (3, 4))
    n = model.config.max_seq_len - 4 + 1  # to the end of the context window
    assert torch.equal(generate(fast, prompt, n).sequences, generate(model, prompt, n).sequences)
    sampled = dict(temperature=0.8, top_k=20, top_p=0.95, seed=7)
    assert torch.equal(generate(fast, prompt, n, **sampled).sequences, generate(model, prompt, n, **sampled).sequences)


def test_demo_chat_model(chat):
    model, tok = chat
    fast = FastDecoder(model)
    for prompt in ("<s>", "<s>深", "<s>hello"):
        ids = tok.encode(prompt)
        a = generate(model, ids, 12, eos_id=tok.eos_id, trace=True)
        b = generate(fast, ids, 12, eos_id=tok.eos_id)
        assert torch.equal(a.sequences, b.sequences)
    assert tok.decode(generate(fast, tok.encode("<s>"), 8, eos_id=tok.eos_id).new_tokens[0].tolist()) \
        .startswith("人工智能")


def test_on_the_device(device):
    model = randomized_model(**VARIANTS["gqa-rope-rmsnorm-swiglu"]).to(device)
    fast = FastDecoder(model, 2)
    prompt = torch.randint(0, 50, (2, 3), device=device)
    assert torch.equal(generate(fast, prompt, 10).sequences, generate(model, prompt, 10).sequences)


def test_bf16_model():
    model = randomized_model(**VARIANTS["mha-learned-layernorm-gelu"]).to(torch.bfloat16)
    fast = FastDecoder(model, 2)
    cache_a, cache_b = KVCache(model.config, 1, 8, dtype=torch.bfloat16), KVCache(model.config, 1, 8, dtype=torch.bfloat16)
    ids = torch.randint(0, 50, (1, 8))
    with torch.no_grad():
        model(ids[:, :4], cache=cache_a)
        fast(ids[:, :4], cache=cache_b)
        a, b = model(ids[:, 4:5], cache=cache_a), fast(ids[:, 4:5], cache=cache_b)
    assert b.dtype == torch.bfloat16
    torch.testing.assert_close(b.float(), a.float(), atol=0.1, rtol=0.05)  # bf16 keeps ~3 significant digits


def test_from_hf_gpt2_twin():
    """The benchmark's set-up in small: a transformers GPT-2, converted, packed: same greedy tokens."""
    transformers = pytest.importorskip("transformers")
    from lib import from_hf
    torch.manual_seed(0)
    cfg = transformers.GPT2Config(vocab_size=97, n_positions=32, n_embd=32, n_layer=2, n_head=4,
                                  bos_token_id=None, eos_token_id=None, pad_token_id=None)
    hf = transformers.GPT2LMHeadModel(cfg).eval()
    with torch.no_grad():
        for p in hf.parameters():
            p.copy_(torch.randn_like(p) * 0.3)
    fast = FastDecoder(from_hf(hf), 2)
    ids = torch.tensor([[5, 17, 3, 60]])
    expected = hf.generate(ids, attention_mask=torch.ones_like(ids), max_new_tokens=20, do_sample=False)
    assert torch.equal(generate(fast, ids, 20).sequences, expected)


# ------------------------------------------------------------------------------------------- errors

def test_stale_weights_are_refused():
    model = randomized_model()
    fast = FastDecoder(model)
    generate(fast, [1, 2], 3)
    with torch.no_grad():
        model.blocks[0].mlp.up_proj.weight.mul_(2)  # e.g. a training step
    with pytest.raises(StaleWeightsError, match="build a new FastDecoder"):
        generate(fast, [1, 2], 3)
    fresh = FastDecoder(model)
    assert torch.equal(generate(fresh, [1, 2], 5).sequences, generate(model, [1, 2], 5).sequences)
    model.load_state_dict(randomized_model(seed=1).state_dict())
    with pytest.raises(StaleWeightsError):
        fresh(torch.tensor([[1]]))


def test_bad_arguments():
    model = randomized_model()
    with pytest.raises(TypeError, match="wraps a lib.MiniTransformer"):
        FastDecoder(torch.nn.Linear(2, 2))
    for bad in (0, -1, 1.5, True):
        with pytest.raises(ValueError, match="shards must be a positive integer"):
            FastDecoder(model, bad)
    fast = FastDecoder(model, 3)
    assert fast.shards == 3 and "shards=3" in repr(fast)
    assert fast.nbytes >= sum(p.numel() * 4 for n, p in model.named_parameters() if "weight" in n and "norm" not in n
                              and "emb" not in n)


def test_bad_input_gets_the_models_errors():
    model = randomized_model()
    fast = FastDecoder(model, 2)
    cache = KVCache(model.config, 1, 3)
    with torch.no_grad():
        fast(torch.tensor([[1, 2]]), cache=cache)
        with pytest.raises(ValueError, match="token id 50 is out of range"):
            fast(torch.tensor([[50]]), cache=cache)
        fast(torch.tensor([[3]]), cache=cache)
        with pytest.raises(ValueError, match="KV cache is full"):
            fast(torch.tensor([[4]]), cache=cache)
        with pytest.raises(ValueError, match="batch size mismatch"):
            fast(torch.tensor([[1], [2]]), cache=KVCache(model.config, 1, 3))


def test_a_model_made_under_inference_mode():
    with torch.inference_mode():
        model = randomized_model()
        fast = FastDecoder(model, 2)
        assert torch.equal(generate(fast, [1, 2], 6).sequences, generate(model, [1, 2], 6).sequences)

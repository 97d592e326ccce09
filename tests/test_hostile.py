"""Issue 15: every reproducer of "Hostile and careless input", grouped by finding number.

A careless or hostile value must end in lib's clear error (ValueError / TypeError / IndexError whose message
names the argument and what is allowed) or in a sane result; never a hang, a raw torch / Python error, a
silent wrong answer, or a cache, pool or widget left changed by a call that failed. Each call that once hung
runs under ``time_bound``, so the suite itself can never hang. ``tests/test_fuzz.py`` draws such values at
random.
"""
import contextlib
import io
from types import SimpleNamespace

import numpy as np
import pytest
import torch

import lib
from helpers import make_model, time_bound
from lib import ConcatKVCache, KVCache, ModelConfig, PagedKVCache, PagedKVPool, generate
from lib.blocks import BlockAllocator, BlockTable, PoolExhaustedError
from lib.paged import prefill
from lib.serving import ServeRequest, SimRequest, request_stream, serve, simulate

BOUND = 30  # seconds: far more than any of these calls needs; a hang fails instead of stalling the suite


@pytest.fixture(scope="module")
def draft():
    return lib.load_demo("draft")[0]


def usage(pool):
    """What a failed call must leave as it was: the blocks in use, every block's references, the set of free
    blocks (their order on the free list may change: blocks taken and given back go to its end; ``copies``
    and ``prefix_hits`` count events that happened)."""
    u = pool.usage()
    return (u["used"], u["free"], u["shared"]), list(pool.allocator.refcounts), sorted(pool.allocator.free_blocks())


# ---------------------------------------------------------------------- 1. admission loops that spun

def test_1_a_request_that_needs_the_whole_pool_is_served_not_spun_on():
    with time_bound(BOUND, "simulate"):
        res = simulate([SimRequest(0, 2040, 8)], "paged", kv_tokens=2048)
    assert res.steps == 8 and res.preemptions == 0
    assert all(t + f + n + fr == 2048 for t, f, n, fr in zip(res.tokens, res.future, res.never, res.free))
    assert res.tokens[-1] == 2048  # prompt + 8 tokens: every position of the pool holds a token at the end


def test_1_long_prompts_on_a_small_pool_finish():
    with time_bound(BOUND, "simulate"):
        res = simulate(request_stream(50, prompt_mean=1500), "paged", kv_tokens=2048)
    assert res.n_requests == 50 and res.waiting[-1] == 0 and res.running[-1] >= 1
    s = res.summary()
    assert 0 <= s["tokens %"] <= 100 and 0 <= s["free %"] <= 100


@pytest.mark.parametrize("watermark", [2.0, 1.0, -1, float("nan"), float("inf"), "0.1", None])
def test_1_9_a_watermark_outside_0_to_1_is_refused(watermark):
    with time_bound(BOUND, "simulate"), pytest.raises(ValueError, match=(
            r"watermark must be a fraction of the pool from 0 to 1 \(1 excluded\), e.g. 0.01, got")):
        simulate(request_stream(20), "paged", kv_tokens=4096, watermark=watermark)


def test_1_a_high_watermark_still_makes_progress():
    with time_bound(BOUND, "simulate"):
        res = simulate(request_stream(20), "paged", kv_tokens=4096, watermark=0.99)
    assert max(res.running) == 1  # nothing may join a running request, but the queue drains one by one


# ---------------------------------------------------------------------- 2. a failed call gives back its blocks

@pytest.mark.parametrize("n", [1, 3])
def test_2_generate_on_a_too_small_pool_gives_back_every_block(chat, n):
    model, tok = chat
    pool = PagedKVPool.for_model(model, 2, 4)
    cache = PagedKVCache(pool=pool)
    before = usage(pool)
    with pytest.raises(PoolExhaustedError, match=r"KV block pool exhausted: .* needs \d+ free block\(s\) of 4 tokens"):
        generate(model, tok.encode("<s>hello"), 20, cache=cache, num_samples=n)
    assert usage(pool) == before and cache.seq_lens == [0]


def test_2_a_too_long_prefill_with_the_prefix_cache_gives_back_its_prefix_blocks(chat):
    model, tok = chat
    pool = PagedKVPool.for_model(model, 6, 4)
    ids = tok.encode("<s>hello world, hello world, hello world")
    first = pool.new_table("a")
    prefill(model, pool, first, ids[:21], prefix_cache=True)  # 5 full blocks go into the prefix cache
    pool.free(first)
    table = pool.new_table("b")
    before = usage(pool)
    with pytest.raises(PoolExhaustedError):
        prefill(model, pool, table, ids, prefix_cache=True)
    assert usage(pool)[1:] == before[1:] and table.blocks == [] and table.n_tokens == 0


# ---------------------------------------------------------------------- 3. a forward interrupted part-way

@pytest.mark.parametrize("make", [lambda c: KVCache(c, 1, 16), lambda c: ConcatKVCache(c, 1, 16),
                                  lambda c: PagedKVCache(c, 1, 16, block_size=4)], ids=["static", "concat", "paged"])
def test_3_a_forward_interrupted_in_block_2_leaves_the_cache_as_it_was(chat, make):
    model, tok = chat
    x = torch.tensor([tok.encode("<s>hello")])
    cache, fresh = make(model.config), make(model.config)
    model(x, cache=cache)
    model(x, cache=fresh)

    def interrupt(module, inputs, output):
        raise KeyboardInterrupt

    hook = model.blocks[2].register_forward_hook(interrupt)
    try:
        with pytest.raises(KeyboardInterrupt):
            model(torch.tensor([[5]]), cache=cache)
    finally:
        hook.remove()
    assert cache.seq_lens == [6] and [cache.keys(l).shape[2] for l in range(4)] == [6] * 4
    with torch.no_grad():  # the step run again equals one that was never interrupted
        assert torch.equal(model(torch.tensor([[5]]), cache=cache), model(torch.tensor([[5]]), cache=fresh))


# ---------------------------------------------------------------------- 4. config fields, NaN weights and logits

@pytest.mark.parametrize("field, value, msg", [
    ("rope_theta", 0, r"ModelConfig.rope_theta must be a finite number > 0, got 0"),
    ("norm_eps", -1, r"ModelConfig.norm_eps must be a finite number > 0, got -1"),
    ("bias", "no", r"ModelConfig.bias must be True or False, got 'no'"),
    ("tie_embeddings", None, r"ModelConfig.tie_embeddings must be True or False, got None"),
])
def test_4_every_config_field_is_checked(field, value, msg):
    with pytest.raises(ValueError, match=msg):
        ModelConfig(vocab_size=20, n_layers=1, d_model=8, n_heads=2, positions="rope", **{field: value})


def nan_model(value=float("nan")):
    model = make_model()
    with torch.no_grad():
        model.blocks[1].mlp.up_proj.weight[0, 0] = value
    return model


@pytest.mark.parametrize("value", [float("nan"), float("inf")])
@pytest.mark.parametrize("temperature", [0.0, 1.0])
def test_4_non_finite_logits_say_where_they_came_from(value, temperature):
    model = nan_model(value)
    with pytest.raises(ValueError, match=r"the logits at step 0 \(prefill\) hold NaN or inf, so no next token can "
                                         r"be chosen: the model's weights hold NaN or inf in "
                                         r"blocks.1.mlp.up_proj.weight"):
        generate(model, [1, 2], 5, temperature=temperature, seed=0)


def test_4_an_overflow_is_named_as_one():
    model = make_model()
    with torch.no_grad():
        model.lm_head.weight.mul_(1e38)  # finite weights, logits past float32's range
    with pytest.raises(ValueError, match=r"the model's weights are finite, so its torch.float32 arithmetic "
                                         r"overflowed on this input"):
        generate(model, [1, 2], 3)


def test_4_a_checkpoint_with_nan_weights_is_refused_at_load(chat, tmp_path):
    model, tok = chat
    bad = lib.MiniTransformer(model.config)
    bad.load_state_dict(model.state_dict())
    with torch.no_grad():
        bad.blocks[0].attn.q_proj.weight[1, 2] = float("nan")
    path = lib.save_checkpoint(bad, tok, tmp_path / "nan.safetensors")
    with pytest.raises(ValueError, match=r"nan.safetensors holds NaN or inf in blocks.0.attn.q_proj.weight: its "
                                         r"weights are not usable"):
        lib.load_checkpoint(path)


# ---------------------------------------------------------------------- 5, 6, 7, 17: generate's arguments

@pytest.mark.parametrize("pad_id, msg", [(-7, r"pad_id=-7 is not a token id of this model"),
                                         (2.5, r"pad_id=2.5 is not a token id"), ("x", r"pad_id='x' is not a token id"),
                                         (True, r"pad_id=True is not a token id")])
def test_5_pad_id_is_checked_before_the_run(chat, pad_id, msg):
    model, tok = chat
    with pytest.raises(ValueError, match=msg):
        generate(model, tok.encode("<s>"), 10, eos_id=tok.eos_id, pad_id=pad_id)


def test_6_numpy_and_tensor_seeds_are_seeds(chat):
    model, tok = chat
    ids = tok.encode("<s>")
    ref = generate(model, ids, 6, temperature=1.0, seed=3).sequences
    for seed in (np.int64(3), torch.tensor(3), np.int32(3)):
        assert torch.equal(generate(model, ids, 6, temperature=1.0, seed=seed).sequences, ref)
    assert torch.equal(generate(model, ids, 6, seed=5).sequences, generate(model, ids, 6).sequences)  # greedy


@pytest.mark.parametrize("seed", [1.5, "7", True, 2 ** 70, -1])
def test_6_other_seeds_are_refused(chat, seed):
    model, tok = chat
    with pytest.raises(ValueError, match=r"seed must be None or an integer from 0 to 2\*\*63 - 1, got"):
        generate(model, tok.encode("<s>"), 3, temperature=1.0, seed=seed)


@pytest.mark.parametrize("t", [float("nan"), float("inf"), -1.0, "1", None])
def test_7_temperature_must_be_finite_and_not_negative(chat, t):
    model, tok = chat
    with pytest.raises(ValueError, match=r"temperature must be a finite number >= 0 \(0 means greedy\), got"):
        generate(model, tok.encode("<s>"), 3, temperature=t, seed=0)


def test_7_next_token_probs_refuses_a_nan_temperature(chat):
    from lib.speculative import next_token_probs
    model, tok = chat
    with pytest.raises(ValueError, match=r"temperature must be a sampling temperature > 0 .* got nan"):
        next_token_probs(model, tok.encode("<s>"), temperature=float("nan"))
    with pytest.raises(ValueError, match=r"min_prob must be a finite number >= 0 and <= 1, got nan"):
        next_token_probs(model, tok.encode("<s>"), min_prob=float("nan"))


@pytest.mark.parametrize("kw, msg", [
    (dict(eos_id="2"), r"eos_id='2' is not a token id of this model"),
    (dict(eos_id=2.5), r"eos_id=2.5 is not a token id"),
    (dict(eos_id=True), r"eos_id=True is not a token id"),
    (dict(trace=True, trace_top_k=-1), r"trace_top_k must be an integer >= 1, got -1"),
    (dict(trace=1), r"trace=1 is not supported; allowed: False, True, full"),
    (dict(use_cache="no"), r"use_cache must be True or False, got 'no'"),
    (dict(cache="x"), r"cache must be a KV cache \(lib.KVCache, lib.ConcatKVCache, lib.PagedKVCache\) or None, "
                      r"got 'x'"),
    (dict(input_ids=torch.tensor([[1, 5]], dtype=torch.uint8)), r"input_ids must hold signed integer token ids"),
])
def test_17_generate_arguments(chat, kw, msg):
    model, tok = chat
    ids = kw.pop("input_ids", tok.encode("<s>"))
    with pytest.raises((ValueError, TypeError), match=msg):
        generate(model, ids, 3, **kw)


def test_17_forward_refuses_an_empty_batch_and_objects_of_the_wrong_kind(chat):
    model, _ = chat
    with pytest.raises(ValueError, match=r"input_ids is empty \(shape \(0, 3\)\)"):
        model(torch.ones(0, 3, dtype=torch.long))
    with pytest.raises(TypeError, match=r"cache must be a KV cache .* got 'x'"):
        model(torch.ones(1, 3, dtype=torch.long), cache="x")
    with pytest.raises(TypeError, match=r"record must be a lib.ForwardRecord or None, got 'x'"):
        model(torch.ones(1, 3, dtype=torch.long), record="x")


def test_17_filter_logits_and_choose():
    from lib.sampling import choose, filter_logits
    L = torch.randn(2, 10)
    cases = [(dict(top_k=0), r"top_k must be None \(no limit\) or an integer >= 1, got 0"),
             (dict(top_p=0), r"top_p must be None \(no limit\) or a number in \(0, 1\], got 0"),
             (dict(temperature=0), r"temperature must be a finite number > 0 \(to divide the logits by\), got 0")]
    for kw, msg in cases:
        with pytest.raises(ValueError, match=msg):
            filter_logits(L, **{"temperature": 1.0, **kw})
    with pytest.raises(ValueError, match=r"logits must be a \(batch, vocab\) floating-point tensor, got shape \(10,\), "
                                         r"dtype torch.float32 \(for one row use logits\[None\]\)"):
        filter_logits(torch.randn(10), 1.0, top_p=0.5)
    with pytest.raises(ValueError, match=r"logits hold non-finite values \(row 1: NaN, \+inf, or -inf for every "
                                         r"token\)"):
        choose(torch.tensor([[0.0, 1.0], [float("nan"), 0.0]]), 1.0)


def test_17_the_tokenizer_decodes_numpy_and_tensor_ids(chat):
    _, tok = chat
    five = tok.decode([5])
    for ids in ([np.int64(5)], torch.tensor(5), np.int64(5), 5, np.array([5]), torch.tensor([5])):
        assert tok.decode(ids) == five
    for ids in ([2.5], ["a"], [-1], torch.tensor([[5]]), torch.tensor([1.0]), None):
        with pytest.raises((ValueError, TypeError), match=r"ids|token id"):
            tok.decode(ids)


def test_17_trace_lookups_name_the_argument(chat):
    model, tok = chat
    tr = generate(model, tok.encode("<s>"), 3, trace=True).trace
    with pytest.raises(IndexError, match=r"layer must be an integer from 0 to 3 \(the model has 4 layers\), got 99"):
        tr.attention_grid(layer=99)
    with pytest.raises(IndexError, match=r"head must be an integer from 0 to 3 \(the model has 4 query heads\), "
                                         r"got -1"):
        tr.attention_grid(head=-1)
    with pytest.raises(IndexError, match=r"batch must be an integer from 0 to 0 \(the trace holds 1 sequence\(s\)\)"):
        tr.tokens(batch=1)
    torch.testing.assert_close(tr.attention_grid(layer=np.int64(1)), tr.attention_grid(layer=1), equal_nan=True)


def test_17_acceptance_probability_and_config_from_hf():
    from lib.hf import UnsupportedModelError, config_from_hf
    from lib.speculative import acceptance_probability
    p, q = torch.tensor([0.5, 0.3, 0.2]), torch.tensor([0.2, 0.3, 0.5])
    with pytest.raises(ValueError, match=r"x must be a token the draft can propose \(an integer from 0 to 2 with "
                                         r"q\(x\) > 0\), got 1.5"):
        acceptance_probability(p, q, 1.5)
    assert acceptance_probability(p, q, np.int64(0)) == acceptance_probability(p, q, torch.tensor(0)) == 1.0
    with pytest.raises(UnsupportedModelError, match=r"hf_config names no architecture \(config.architectures\) and "
                                                    r"no model_type: .* got SimpleNamespace"):
        config_from_hf(SimpleNamespace())
    with pytest.raises(UnsupportedModelError, match=r"hf_config lacks the field 'vocab_size' that every "
                                                    r"GPT2LMHeadModel config has"):
        config_from_hf(SimpleNamespace(architectures=["GPT2LMHeadModel"], activation_function="gelu"))


# ---------------------------------------------------------------------- 8, 9, 12: serve and simulate

@pytest.mark.parametrize("max_new, msg", [(0, r"got 0"), (-3, r"got -3"), (2.5, r"got 2.5"), ("3", r"got '3'")])
def test_8_serve_checks_max_new_tokens(chat, max_new, msg):
    model, tok = chat
    with pytest.raises(ValueError, match=r"request 0's max_new_tokens must be an integer >= 1, " + msg):
        serve(model, [ServeRequest(0, tok.encode("<s>"), max_new)])


@pytest.mark.parametrize("prompt", [["1", "5"], [1.5, 5.0], [131], [-1], [], torch.tensor([[1, 2]])])
def test_8_serve_checks_prompts_before_taking_a_block(chat, prompt):
    model, _ = chat
    with pytest.raises(ValueError, match=r"request 7's prompt"):
        serve(model, [ServeRequest(7, prompt, 3)])


def test_8_a_tensor_prompt_is_served_like_a_list(chat):
    model, tok = chat
    ids = tok.encode("<s>hello")
    a = serve(model, [ServeRequest(0, torch.tensor(ids), 4)], eos_id=tok.eos_id)
    b = serve(model, [ServeRequest(0, ids, 4)], eos_id=tok.eos_id)
    assert a.records[0].tokens == b.records[0].tokens and a.summary() == b.summary()


@pytest.mark.parametrize("kw, msg", [(dict(block_size=0), r"block_size must be an integer >= 1, got 0"),
                                     (dict(eos_id="2"), r"eos_id='2' is not a token id"),
                                     (dict(prefix_cache="yes"), r"prefix_cache must be True or False, got 'yes'"),
                                     (dict(n_blocks=2.5), r"n_blocks must be an integer >= 1, got 2.5")])
def test_8_serve_checks_its_settings(chat, kw, msg):
    model, tok = chat
    with pytest.raises(ValueError, match=msg):
        serve(model, [ServeRequest(0, tok.encode("<s>"), 3)], **kw)


@pytest.mark.parametrize("policy", ["paged", "pow2", "max", "oracle"])
def test_9_a_request_of_no_output_is_refused_when_made(policy):
    with pytest.raises(ValueError, match=r"SimRequest.output_len must be an integer >= 1, got 0"):
        simulate([SimRequest(0, 5, 0)], policy, kv_tokens=64, max_len=64)
    with pytest.raises(ValueError, match=r"SimRequest.prompt_len must be an integer >= 1, got -5"):
        SimRequest(0, -5, 5)


def test_9_requests_must_be_sim_requests(chat):
    with pytest.raises(TypeError, match=r"requests must be a list of SimRequest\(rid, prompt_len, output_len\) "
                                        r"objects; one of them is tuple \(0, 5, 5\)"):
        simulate([(0, 5, 5)])
    with pytest.raises(TypeError, match=r"requests must be a list of ServeRequest objects .* got int 5"):
        serve(chat[0], 5)


def test_12_summaries_of_empty_runs(chat):
    for policy in ("paged", "max"):
        s = simulate([], policy).summary()
        assert (s["steps"], s["tokens %"], s["free %"], s["max batch"], s["mean batch"]) == (0, 0.0, 100.0, 0, 0.0)
        assert np.isnan(s["tokens / allocated %"])  # nothing was allocated: no share to give
    res = serve(chat[0], [])
    assert res.summary()["requests"] == 0 and np.isnan(res.summary()["mean TTFT (passes)"])
    t = res.timings()
    assert np.isnan(t["ms per pass"]) and np.isnan(t["mean TTFT (ms)"]) and np.isnan(t["mean latency (ms)"])


# ---------------------------------------------------------------------- 10. lib.hf's loaders

def gpt2_folder(tmp_path):
    transformers = pytest.importorskip("transformers")
    cfg = transformers.GPT2Config(vocab_size=64, n_positions=32, n_embd=16, n_layer=1, n_head=2, bos_token_id=None,
                                  eos_token_id=None, pad_token_id=None)
    transformers.GPT2LMHeadModel(cfg).save_pretrained(tmp_path)
    return tmp_path


def test_10_a_folder_without_tokenizer_files_has_no_tokenizer(tmp_path):
    from lib.hf import load_tokenizer
    folder = gpt2_folder(tmp_path)
    with pytest.raises(FileNotFoundError, match=r"no usable tokenizer in .* the folder holds none of these files"):
        load_tokenizer(folder)


def test_10_truncated_weights_are_named_and_load_from_env_does_not_raise(tmp_path):
    from lib.hf import ENV_VAR, from_hf, load_from_env
    folder = gpt2_folder(tmp_path)
    weights = next(folder.glob("*.safetensors"))
    weights.write_bytes(weights.read_bytes()[:500])
    with pytest.raises(ValueError, match=rf"the weights \({weights.name}\) could not be read \(truncated or "
                                         rf"corrupt\?\)"):
        from_hf(folder)
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        assert load_from_env({ENV_VAR: str(folder)}) is None
    assert f"{ENV_VAR}={folder} could not be loaded: " in out.getvalue() and weights.name in out.getvalue()


# ---------------------------------------------------------------------- 11, 13: widgets

def test_11_the_memory_explorer_refuses_a_batch_past_its_slider():
    from lib.widgets.memory import MemoryExplorer
    e = MemoryExplorer()
    before = (e.budget, e.batch_box.value)
    for bad in (1000, 2000):
        with pytest.raises(ValueError, match=rf"batch \(concurrent requests\) must be an integer from 1 to 256 \(the "
                                             rf"requests slider's range\), got {bad}"):
            e.set(batch=bad)
        assert (e.budget, e.batch_box.value) == before  # the same after one refusal or two: no history
    with pytest.raises(ValueError, match=r"from 1 to 256"):
        MemoryExplorer(batch=1000)
    with pytest.raises(ValueError, match=r"model='chat' is not in the explorer's picker"):
        MemoryExplorer(model="chat", context=64)


@pytest.mark.parametrize("kw, msg", [
    (dict(max_new_tokens=1000), r"max_new_tokens must be an integer from 1 to 64 \(the range of the max new slider\), "
                                r"got 1000"),
    (dict(seed=-5), r"seed must be an integer from 0 to 2147483647, got -5"),
    (dict(seed=2 ** 40), r"seed must be an integer from 0 to 2147483647, got 1099511627776"),
    (dict(seed=1.5), r"seed must be an integer from 0 to 2147483647, got 1.5"),
    (dict(top_k=True), r"top_k=True is not one of the player's steps"),
    (dict(use_cache="no"), r"use_cache must be True or False, got 'no'"),
])
def test_13_the_player_refuses_in_its_constructor_what_set_refuses(chat, kw, msg):
    from lib.widgets.player import GenerationPlayer
    with pytest.raises(ValueError, match=msg):
        GenerationPlayer(*chat, **kw)
    player = GenerationPlayer(*chat, max_new_tokens=4)
    before = player.state()
    with pytest.raises(ValueError, match=msg):
        player.set(**kw)
    assert player.state() == before


@pytest.mark.parametrize("kw, msg", [
    (dict(n_blocks=2), r"n_blocks must be an integer from 4 to 48, got 2"),
    (dict(n_samples=9), r"n_samples must be an integer from 1 to 4, got 9"),
    (dict(block_size=3), r"block_size=3 is not supported; allowed: 1, 2, 4, 8, 16"),
    (dict(n_blocks=2.5), r"n_blocks must be an integer from 4 to 48, got 2.5"),
])
def test_13_the_block_widget_refuses_in_its_constructor_what_set_refuses(chat, kw, msg):
    from lib.widgets.blocks import BlockPoolWidget
    with pytest.raises(ValueError, match=msg):
        BlockPoolWidget(*chat, **kw)
    w = BlockPoolWidget(*chat)
    before = w.state()
    with pytest.raises(ValueError, match=msg):
        w.set(**kw)
    assert w.state() == before


def test_13_other_constructors(chat):
    from lib.widgets.attention import AttentionExplorer
    from lib.widgets.blocks import BlockPoolWidget
    from lib.widgets.cost_curves import CostCurvesExplorer
    from lib.widgets.sampling import SamplingExplorer
    model, tok = chat
    with pytest.raises(ValueError, match=r"max_new_tokens must be an integer >= 1, got 0"):
        AttentionExplorer(model, tok, max_new_tokens=0)
    with pytest.raises(ValueError, match=r"prompts must be the three prompts of requests A, B and C, got \('a', 'b'\)"):
        BlockPoolWidget(model, tok, prompts=("a", "b"))
    with pytest.raises(ValueError, match=r"the explorer's top-p slider runs from 0.05 to 1 \(None = off\), got 0.01"):
        SamplingExplorer(model, tok, top_p=0.01)
    with pytest.raises(ValueError, match=r"loglog must be True or False, got 'no'"):
        CostCurvesExplorer(loglog="no")


# ---------------------------------------------------------------------- 14, 15, 16: caches, context, allocator

@pytest.mark.parametrize("block_size", [0, 2.5, -4, "4"])
def test_14_paged_cache_names_block_size(chat, block_size):
    with pytest.raises(ValueError, match=rf"block_size must be an integer >= 1, got {block_size!r}"):
        PagedKVCache(chat[0].config, 1, 8, block_size=block_size)


def test_15_a_prompt_past_the_context_says_so(chat):
    model, _ = chat
    with pytest.raises(ValueError, match=r"sequence too long for the context window: positions 0..68 were asked for, "
                                         r"but this model has max_seq_len=64"):
        model(torch.ones(1, 69, dtype=torch.long), cache=KVCache(model.config, 1, 64))


def test_16_a_table_freed_twice_is_refused_and_counts_stay():
    a = BlockAllocator(4, 4)
    t = BlockTable()
    a.reserve(t, 5)
    t.n_tokens = 5
    copy = BlockTable(list(t.blocks), t.n_tokens)
    a.free(t)
    before = (list(a.refcounts), a.free_blocks())
    with pytest.raises(ValueError, match=r"free: BlockTable\(: 5 tokens in blocks \[0, 1\]\) is not a table of this "
                                         r"pool \(4 blocks\): block\(s\) \[0, 1\] are not held. Was it freed already"):
        a.free(copy)
    assert (list(a.refcounts), a.free_blocks()) == before and min(a.refcounts) == 0


def test_16_a_table_of_another_allocator_is_refused_and_counts_stay():
    a, b = BlockAllocator(4, 4), BlockAllocator(16, 4)
    t = BlockTable()
    b.reserve(t, 40)
    t.n_tokens = 40
    with pytest.raises(ValueError, match=r"fork: .* is not a table of this pool \(4 blocks\)"):
        a.fork(t)
    assert a.refcounts == [0] * 4 and a.n_free == 4


# ---------------------------------------------------------------------- found by tests/test_fuzz.py

@pytest.mark.parametrize("kw", [dict(temperature=4.6e-166), dict(temperature=1e-300),
                                dict(temperature=1.0, top_p=1e-97)])
def test_fuzz_a_tiny_temperature_or_top_p_is_greedy_not_nan(chat, kw):
    model, tok = chat
    ids = tok.encode("<s>")
    assert torch.equal(generate(model, ids, 5, seed=0, **kw).sequences, generate(model, ids, 5).sequences)


def test_fuzz_a_failed_forked_run_leaves_a_passed_cache_as_it_was(chat):
    model, tok = chat
    cache = KVCache(model.config, 1, 1)
    with pytest.raises(ValueError, match=r"KV cache is full"):
        generate(model, tok.encode("<s>"), 2, cache=cache, num_samples=2)
    assert cache.seq_len == 0
    pool = PagedKVPool.for_model(model, 40, 4)
    held = PagedKVCache(pool=pool)
    model(torch.tensor([tok.encode("<s>hello")]), cache=held)  # 6 positions in 2 blocks, before the call
    before = usage(pool)
    with pytest.raises(ValueError, match=r"sequence too long for the context window \(row 0\): positions 64..64"):
        generate(model, tok.encode("!"), 60, cache=held, num_samples=2)  # fails at a decode step, after the fork
    assert held.seq_lens == [6] and usage(pool) == before


def test_fuzz_sizes_a_few_zeros_too_large_are_refused_before_allocating(chat, monkeypatch):
    from lib import checks
    model, tok = chat
    monkeypatch.setattr(checks, "_cpu_memory", lambda: 10 ** 6)  # a machine of 1 MB: the checks, not the luck
    with pytest.raises(ValueError, match=r"a KVCache of batch_size=8 x 64 position\(s\) would take 1,048,576 bytes, "
                                         r"more than the 1,000,000 bytes of memory of cpu"):
        KVCache(model.config, 8, 64)
    with pytest.raises(ValueError, match=r"a pool of n_blocks=1000 blocks of block_size=16 tokens would take"):
        PagedKVPool.for_model(model, 1000, 16)
    with pytest.raises(ValueError, match=r"num_samples=1000 continuations of 1 prompt\(s\) would take"):
        generate(model, tok.encode("<s>"), 3, num_samples=1000)
    cache = KVCache(model.config, 1, 8)
    with pytest.raises(ValueError, match=r"fork's 1000 copies of each of the 1 row\(s\) of a KVCache would take"):
        cache.fork(1000)
    with pytest.raises(ValueError, match=r"n_blocks must be an integer from 1 to 1,048,576"):
        BlockAllocator(2 ** 31)
    with pytest.raises(ValueError, match=r"kv_tokens=34359738368 in blocks of block_size=16 makes 2,147,483,648 "
                                         r"blocks, more than the 1,048,576 the simulation keeps track of"):
        simulate(request_stream(3), kv_tokens=2 ** 35)
    with pytest.raises(TypeError, match=r"input_ids must hold signed integer token ids \(torch.long, torch.int\), got "
                                        r"dtype torch.int16"):
        model(torch.tensor([[1, 5]], dtype=torch.int16))


def test_one_index_check_raises_what_both_kinds_of_caller_catch():
    """lib.checks.index is the one index check (the heat-maps' own is gone): its error is an IndexError, as
    Python's sequences raise, and a ValueError, as the widgets catch to show a refused value as a message."""
    from lib import checks

    for bad in (4, -1, True, 1.0, "all", None):
        with pytest.raises(checks.IndexOutOfRange) as err:
            checks.index(bad, "layer", 4, "the model has 4 layers")
        assert isinstance(err.value, IndexError) and isinstance(err.value, ValueError)
        assert str(err.value) == f"layer must be an integer from 0 to 3 (the model has 4 layers), got {bad!r}"
    assert checks.index("all", "head", 4, "4 heads", allow_all=True) == "all" and checks.index(3, "head", 4, "") == 3
    with pytest.raises(ValueError, match=r'head must be an integer from 0 to 3 or "all" \(4 heads\), got 4'):
        checks.index(4, "head", 4, "4 heads", allow_all=True)

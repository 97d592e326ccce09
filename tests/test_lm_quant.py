"""The int8 KV cache on the real model (notebook 05): where a greedy run first diverges, and that the divergence
the notebook stores holds on any CPU: its only near-tie is the divergence itself, and the two runs are the same
under a tiny perturbation of the weights."""
import functools

import pytest
import torch

import lib
from lib import lm
from lib.quant import STORED_DIVERGENCES, QuantizedKVCache, first_divergence

torch.set_num_threads(1)


@functools.lru_cache(maxsize=None)
def real():
    return lib.load_demo("lm")


@functools.lru_cache(maxsize=None)
def divergence(prompt, n):
    model, tok = real()
    return first_divergence(model, tok.encode(prompt), n)


@pytest.mark.parametrize("prompt", sorted(STORED_DIVERGENCES))
def test_first_divergence_is_the_first_step_that_differs(prompt):
    model, tok = real()
    n = STORED_DIVERGENCES[prompt]
    d = divergence(prompt, n)
    step, a, b = d["first_difference"], d["fp32_tokens"], d["int8_tokens"]
    assert step is not None and d["steps"] == n == len(a) == len(b)
    assert a[:step] == b[:step] and a[step] != b[step]
    # the fp32 run is plain greedy decoding, the int8 run greedy decoding through a QuantizedKVCache
    ids = tok.encode(prompt)
    assert lib.generate(model, ids, n).new_tokens[0].tolist() == a
    assert lib.generate(model, ids, n, cache=QuantizedKVCache(model.config, 1, len(ids) + n - 1)).new_tokens[0].tolist() == b
    # a near-tie: both runs prefer their own token, each by a small lead
    assert 0 < d["fp32_lead_there"] < 0.1 and 0 < d["int8_lead_there"] < 0.1, d
    # the fp32 run up to the divergence is stored, and checked for stability, in lib.lm.STORED_GENERATIONS
    assert lm.STORED_GENERATIONS.get(prompt) == step


@pytest.mark.parametrize("prompt", sorted(STORED_DIVERGENCES))
def test_a_stored_divergence_has_one_near_tie_only(prompt):
    """Both runs are stored to the end; every step but the divergence wins by lib.lm.MIN_MARGIN or more."""
    model, tok = real()
    n, ids = STORED_DIVERGENCES[prompt], tok.encode(prompt)
    step = divergence(prompt, n)["first_difference"]
    for cache in (None, QuantizedKVCache(model.config, 1, len(ids) + n - 1)):
        out = lib.generate(model, ids, n, trace=True, trace_top_k=2, cache=cache)
        margins = [float(torch.topk(s.logits[0], 2).values.diff().neg()) for s in out.trace.steps]
        assert min(m for i, m in enumerate(margins) if i != step) >= lm.MIN_MARGIN, margins


@pytest.mark.parametrize("prompt", sorted(STORED_DIVERGENCES))
def test_a_stored_divergence_survives_a_perturbation_of_the_weights(prompt):
    model, tok = real()
    n = STORED_DIVERGENCES[prompt]
    d = divergence(prompt, n)
    for seed in (0, 1, 2):
        other = first_divergence(lm.perturbed(model, seed=seed), tok.encode(prompt), n)
        assert (other["fp32_tokens"], other["int8_tokens"]) == (d["fp32_tokens"], d["int8_tokens"]), seed
        # what the notebook prints, at 3 decimals (not the int8 run's lead: its rounding moves that by ~0.002)
        assert round(other["fp32_lead_there"], 3) == round(d["fp32_lead_there"], 3)


def test_no_divergence_reads_none():
    model, tok = real()
    d = first_divergence(model, tok.encode("<s>HAMLET.\n"), 3)  # three wide-margin steps: nothing flips
    assert d["first_difference"] is None and d["steps"] == 3
    assert d["fp32_lead_there"] is None and d["int8_lead_there"] is None and d["fp32_tokens"] == d["int8_tokens"]


def test_what_notebook_05_prints_of_the_int8_perplexity_survives_a_perturbation():
    """Notebook 05 prints the perplexity change as 'under 0.05%' and the share of positions whose top-1 differs as
    'under 0.5%' (0.1-0.2%: at one decimal it moved with a perturbation): both must read the same when the weights
    move by lib.lm.PERTURBATION."""
    from lib.corpus import heldout_text
    from lib.quant import perplexity_change
    model, tok = real()

    def printed(m):
        out = []
        for lang in ("en", "zh"):
            r = perplexity_change(m, lm.windows(tok, heldout_text(lang), model.config.max_seq_len, 4))
            assert abs(r["change"]) < 0.0005, r
            differ = r["top1_differs"] / r["positions"]
            out.append("under 0.5%" if differ < 0.005 else f"{differ:.1%}")  # as 05 prints it
        return out

    base = printed(model)
    for seed in (0, 1, 2):
        assert printed(lm.perturbed(model, seed=seed)) == base, seed


def test_most_of_the_course_prompts_go_100_greedy_steps_without_a_flip():
    """Notebook 05: a flip needs a near-tie the rounding can reach; most of the course's prompts meet none in 100
    greedy steps, and the one it shows does."""
    model, tok = real()
    prompts = lm.EN_PROMPTS + lm.FIVE_CHARACTER_PROMPTS
    flips = [first_divergence(model, tok.encode(p), 100)["first_difference"] for p in prompts]
    assert sum(f is None for f in flips) > len(prompts) / 2, dict(zip(prompts, flips))
    assert all(p in prompts for p in STORED_DIVERGENCES)

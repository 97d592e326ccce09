"""Prompt-lookup decoding (vLLM's n-gram proposer): proposals copied from the text itself, verified by the target
as any draft's are, so greedy output is the target's own and sampled output keeps its distribution."""
import pytest
import torch
from hypothesis import given, settings, strategies as st

from helpers import randomized_model
from lib import generate
from lib.speculative import PromptLookup, speculative_generate


def brute_force(tokens, k, min_n, max_n):
    """The rule in words: the longest n-gram (max_n .. min_n) ending the text that occurred earlier; the k tokens
    after its earliest occurrence."""
    for n in range(max_n, min_n - 1, -1):
        if n >= len(tokens):
            continue
        hits = [i for i in range(len(tokens) - n) if tokens[i:i + n] == tokens[-n:]]
        if hits:
            return tokens[hits[0] + n:hits[0] + n + k]
    return []


def test_vllm_docstring_example():
    # vLLM's example: [1, 2, 3, 4, 2, 3] with n in 2..3 and k = 4 proposes [4, 2, 3] (all that follows the match)
    assert PromptLookup(min_n=2, max_n=3).propose([1, 2, 3, 4, 2, 3], 4) == [4, 2, 3]
    assert PromptLookup(min_n=2, max_n=3).propose([1, 2, 3, 4, 5], 4) == []  # no n-gram repeats: no proposal
    assert PromptLookup(min_n=1, max_n=1).propose([7, 8, 9, 7], 2) == [8, 9]


@settings(max_examples=200, deadline=None)
@given(st.lists(st.integers(0, 3), min_size=1, max_size=30), st.integers(1, 6), st.integers(1, 3), st.integers(0, 2))
def test_matches_the_rule_in_words(tokens, k, min_n, extra):
    assert PromptLookup(min_n, min_n + extra).propose(tokens, k) == brute_force(tokens, k, min_n, min_n + extra)


def test_bad_settings_say_what_is_allowed():
    with pytest.raises(ValueError, match="min_n"):
        PromptLookup(min_n=0)
    with pytest.raises(ValueError, match="max_n"):
        PromptLookup(min_n=3, max_n=2)


@pytest.mark.parametrize("seed", range(4))
def test_greedy_output_is_the_targets_own_with_fewer_passes_on_repeated_text(seed):
    target = randomized_model(seed, 0.3, vocab_size=40, max_seq_len=96)
    gen = torch.Generator().manual_seed(seed)
    passage = torch.randint(4, 40, (12,), generator=gen).tolist()
    prompt = [1] + passage + passage + passage[:3]
    alone = generate(target, prompt, 24)
    r = speculative_generate(target, PromptLookup(), prompt, 24, k=4)
    assert torch.equal(r.sequences, alone.sequences)
    assert r.draft_forwards == 0 and r.draft_cache is None
    assert r.target_forwards <= r.n_new  # never more passes than one per token
    assert sum(len(x.emitted) for x in r.rounds) == r.n_new


def test_sampled_runs_are_reproducible_and_stop_at_eos():
    target = randomized_model(1, 0.3, vocab_size=40, max_seq_len=96)
    prompt = [1, 5, 6, 7, 8, 5, 6, 7]
    a = speculative_generate(target, PromptLookup(), prompt, 20, k=3, temperature=0.9, seed=3)
    b = speculative_generate(target, PromptLookup(), prompt, 20, k=3, temperature=0.9, seed=3)
    assert torch.equal(a.sequences, b.sequences)
    greedy = generate(target, prompt, 20).new_tokens[0].tolist()
    eos = greedy[5]  # a token the greedy run writes: both loops must stop right after its first appearance
    r = speculative_generate(target, PromptLookup(), prompt, 20, k=3, eos_id=eos)
    assert torch.equal(r.sequences, generate(target, prompt, 20, eos_id=eos).sequences)
    assert r.new_tokens[0].tolist() == greedy[:greedy.index(eos) + 1]


def test_compare_drafts_totals_the_runs_and_counts_lookups_that_found_nothing():
    from lib.speculative import compare_drafts

    target = randomized_model(2, 0.3, vocab_size=40, max_seq_len=96)
    repeated = [[1] + list(range(5, 17)) * 2 + [5, 6]]
    fresh = [[1, 30, 31, 32, 33]]  # nothing repeats yet: the first round's lookup finds no 3-gram, 2-gram
    lookup = PromptLookup(min_n=2, max_n=3)
    rows = compare_drafts(target, {"itself": target, "lookup": lookup}, {"repeat": repeated, "fresh": fresh},
                          k=3, max_new_tokens=12)
    assert [(r["text"], r["draft"]) for r in rows] == [("repeat", "itself"), ("repeat", "lookup"),
                                                       ("fresh", "itself"), ("fresh", "lookup")]
    for row, prompts, draft in zip(rows, [repeated, repeated, fresh, fresh], [target, lookup] * 2):
        runs = [speculative_generate(target, draft, p, 12, k=3) for p in prompts]
        assert row["target passes"] == sum(r.target_forwards for r in runs)
        assert row["new tokens"] == sum(r.n_new for r in runs) == 12 * len(prompts)
        assert row["kept"] == f"{sum(r.n_accepted for r in runs)}/{sum(r.n_proposed for r in runs)}"
    assert rows[0]["α"] == 1.0 and rows[0]["no proposal"] == 0  # the target as its own draft: always kept
    assert rows[1]["draft passes"] == rows[3]["draft passes"] == 0  # a lookup runs no model
    first = speculative_generate(target, lookup, fresh[0], 12, k=3).rounds[0]
    assert first.proposed == [] and rows[3]["no proposal"] >= 1  # the fresh prompt's first lookup found nothing

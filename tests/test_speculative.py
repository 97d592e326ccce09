"""Speculative decoding: greedy output identical to the target alone with fewer target passes, the sampling
rule exact on hand-made distributions, the sampled output distributed as the target's (chi-square), caches
consistent, and clear errors."""
import math

import pytest
import torch
from hypothesis import given, settings, strategies as st

import lib
from helpers import randomized_model
from lib import KVCache, MiniTransformer, generate
from lib.speculative import (accept_or_resample, acceptance_probability, chi_square_test, count_forward_passes,
                             distribution_check, expected_acceptance, measure_acceptance, next_token_probs,
                             output_distribution, residual_distribution, speculative_generate)
from lib.speculative import expected_speedup, expected_tokens_per_pass, implied_alpha
from lib.text import text_table

PROMPTS = ["<s>", "<s>深", "<s>hello", "<s>机器", "<s>the cat", "<s>kv", "<s>大语", "<s>注意", "<s>缓存",
           "<s>attention", "<s>模型逐"]


@pytest.fixture(scope="module")
def demo(target_and_draft):
    return target_and_draft


def random_model(seed, scale=0.3, **kw):
    """A random model (weights re-drawn with std `scale`, so its argmax is well separated)."""
    return randomized_model(seed, scale, **{"vocab_size": 40, "max_seq_len": 48, **kw})


def run_demo(demo, text: str, n: int, k: int):
    """Speculative decoding of ``text`` with the demo pair, stopping at <eos>: (result, tokenizer)."""
    target, draft, tok = demo
    return speculative_generate(target, draft, tok.encode(text), n, k=k, eos_id=tok.eos_id), tok


def check_rounds(r):
    """The per-round records add up to the run."""
    assert sum(len(x.emitted) for x in r.rounds) == r.n_new
    assert [t for x in r.rounds for t in x.emitted] == r.new_tokens[0].tolist()
    assert r.target_forwards == len(r.rounds)
    assert r.draft_forwards == sum(x.draft_passes for x in r.rounds) == r.n_proposed
    for x in r.rounds:
        assert 0 <= x.accepted <= len(x.proposed) <= r.k
        assert x.emitted == (x.proposed[:x.accepted] + [x.target_token])[:len(x.emitted)]
        assert x.kind == ("target" if not x.proposed else "bonus" if x.accepted == len(x.proposed) else "correction")
        assert len(x.p) == len(x.q) == len(x.proposed) and len(x.accept_prob) == min(x.accepted + 1, len(x.proposed))
    starts = [x.start for x in r.rounds]
    assert starts[0] == r.prompt_len and all(b - a == len(x.emitted) for a, b, x in zip(starts, starts[1:], r.rounds))


def check_caches(r, target, draft):
    """The caches hold exactly what a plain forward of the final text would put there."""
    seq = r.sequences
    assert r.target_cache.seq_len == seq.shape[1] - 1
    for model, cache in ((target, r.target_cache), (draft, r.draft_cache)):
        n = cache.seq_len
        if n == 0:  # a draft that never proposed (max_new_tokens=1) holds nothing
            assert model is draft and r.draft_forwards == 0
            continue
        assert seq.shape[1] - 3 <= n <= seq.shape[1] - 1  # the draft may lag: it is fed pending tokens next round
        ref = KVCache(model.config, 1, n)
        with torch.no_grad():
            model(seq[:, :n], cache=ref)
        for layer in range(model.config.n_layers):
            torch.testing.assert_close(cache.keys(layer), ref.keys(layer), atol=1e-5, rtol=0)
            torch.testing.assert_close(cache.values(layer), ref.values(layer), atol=1e-5, rtol=0)


# -- greedy: identical text, fewer target passes --------------------------------------------------------------
@pytest.mark.parametrize("k", [1, 2, 3, 4, 5, 6])
def test_greedy_equals_the_target_alone_on_the_demo_models(demo, k):
    target, draft, tok = demo
    for prompt in PROMPTS:
        ids = tok.encode(prompt)
        with count_forward_passes(target=target, draft=draft) as n:
            r = speculative_generate(target, draft, ids, 30, k=k, eos_id=tok.eos_id)
        with count_forward_passes(target=target) as m:
            g = generate(target, ids, 30, eos_id=tok.eos_id)
        assert torch.equal(r.sequences, g.sequences), (prompt, tok.decode(r.sequences[0]), tok.decode(g.sequences[0]))
        assert n == {"target": r.target_forwards, "draft": r.draft_forwards}  # hooks agree with the record
        assert m["target"] == r.baseline_target_forwards == r.n_new  # generate: one target pass per token
        assert r.target_forwards <= r.n_new
        if r.n_new > 1 and r.n_accepted > 0:
            assert r.target_forwards < r.n_new
        check_rounds(r)
        check_caches(r, target, draft)


def test_demo_draft_saves_target_passes(demo):
    """The demo draft knows the corpus phrases: with k=4, 人工智能<eos> takes one target pass instead of five."""
    r, tok = run_demo(demo, "<s>", 20, k=4)
    assert tok.decode(r.sequences[0]) == "<s>人工智能<eos>"
    assert r.target_forwards == 1 and r.baseline_target_forwards == 5 and r.draft_forwards == 4
    assert r.rounds[0].kind == "bonus" and r.rounds[0].emitted == tok.encode("人工智能<eos>")
    assert r.acceptance_rate == 1.0 and r.tokens_per_target_pass == 5.0


@pytest.mark.parametrize("seed", range(6))
@pytest.mark.parametrize("k", [1, 2, 3, 4, 5, 6])
def test_greedy_equals_the_target_alone_on_random_models(seed, k):
    """Two unrelated random models: the draft is almost always wrong, the text is still the target's."""
    variant = [dict(), dict(n_kv_heads=2, positions="rope", norm="rmsnorm", activation="swiglu", bias=False)][seed % 2]
    target = random_model(100 + seed, **variant)
    draft = random_model(200 + seed, n_layers=1, d_model=16, n_heads=2)
    prompt = torch.randint(0, 40, (1, 1 + seed), generator=torch.Generator().manual_seed(seed))
    r = speculative_generate(target, draft, prompt, 25, k=k)
    g = generate(target, prompt, 25)
    assert torch.equal(r.sequences, g.sequences)
    assert r.n_new == 25 and r.target_forwards <= 25
    assert r.acceptance_rate < 0.5  # unrelated models rarely agree
    check_rounds(r)
    check_caches(r, target, draft)


def test_greedy_with_the_target_as_its_own_draft_accepts_everything():
    m = random_model(7)
    r = speculative_generate(m, m, [1, 2], 30, k=5)
    assert torch.equal(r.sequences, generate(m, [1, 2], 30).sequences)
    assert r.acceptance_rate == 1.0 and r.target_forwards == 5  # 30 tokens, 6 per round (5 kept + bonus)


@settings(max_examples=15, deadline=None)
@given(seed=st.integers(0, 1000), prompt_len=st.integers(1, 10), k=st.integers(1, 8), n_new=st.integers(1, 20),
       eos=st.one_of(st.none(), st.integers(0, 39)))
def test_greedy_identity_property(seed, prompt_len, k, n_new, eos):
    target, draft = random_model(seed), random_model(seed + 1, n_layers=1)
    prompt = torch.randint(0, 40, (1, prompt_len), generator=torch.Generator().manual_seed(seed))
    r = speculative_generate(target, draft, prompt, n_new, k=k, eos_id=eos)
    assert torch.equal(r.sequences, generate(target, prompt, n_new, eos_id=eos).sequences)
    assert r.n_new <= n_new
    check_rounds(r)
    check_caches(r, target, draft)


@pytest.mark.parametrize("n_new", [1, 2, 3, 5, 8])
@pytest.mark.parametrize("k", [1, 3, 6])
@pytest.mark.parametrize("temperature", [0.0, 1.0])
def test_never_more_than_max_new_tokens(n_new, k, temperature):
    target, draft = random_model(3), random_model(3)  # identical: every proposal is kept
    r = speculative_generate(target, draft, [5], n_new, k=k, temperature=temperature, seed=0)
    assert r.n_new == n_new
    assert all(len(x.proposed) <= min(k, n_new - 1) for x in r.rounds)


def test_eos_stops_inside_a_round(demo):
    r, tok = run_demo(demo, "<s>深", 50, k=6)
    assert tok.decode(r.sequences[0]) == "<s>深度学习<eos>"
    assert r.rounds[-1].emitted[-1] == tok.eos_id
    assert r.rounds[0].proposed == tok.encode("度学习<eos>")  # the draft stops proposing at its <eos>
    check_caches(r, *demo[:2])


def test_the_context_window_is_respected():
    target, draft = random_model(1, max_seq_len=20), random_model(2, max_seq_len=20)
    r = speculative_generate(target, draft, [1, 2, 3], 18, k=6)  # fills the window exactly, as generate allows
    assert r.sequences.shape == (1, 21) and torch.equal(r.sequences, generate(target, [1, 2, 3], 18).sequences)
    with pytest.raises(ValueError, match=r"a prompt of 3 tokens leaves room for at most 18 new token\(s\) in the "
                                         r"context window \(max_seq_len=20\), but max_new_tokens=19"):
        speculative_generate(target, draft, [1, 2, 3], 19, k=2)
    short = random_model(2, max_seq_len=10)
    with pytest.raises(ValueError, match=r"the draft's context window is too short: a prompt of 3 tokens plus "
                                         r"max_new_tokens=18 needs 20 positions, the draft has max_seq_len=10"):
        speculative_generate(target, short, [1, 2, 3], 18)


def test_clear_errors():
    target = random_model(1)
    with pytest.raises(ValueError, match=r"batch size 1\), got a batch of 2: each sequence keeps a different "
                                         r"number of draft tokens per round, so call it once per prompt"):
        speculative_generate(target, target, torch.tensor([[1, 2], [3, 4]]), 5)
    with pytest.raises(ValueError, match=r"must share a vocabulary \(the same tokenizer\): the target has 40 "
                                         r"tokens, the draft 50"):
        speculative_generate(target, random_model(1, vocab_size=50), [1], 5)
    for bad in (0, -1, 2.5, True):
        with pytest.raises(ValueError, match=r"k \(draft tokens proposed per round\) must be an integer >= 1, got"):
            speculative_generate(target, target, [1], 5, k=bad)
    with pytest.raises(ValueError, match=r"temperature must be a finite number >= 0"):
        speculative_generate(target, target, [1], 5, temperature=-0.5)
    with pytest.raises(ValueError, match=r"eos_id=40 is not a token id of this model \(an integer from 0 to 39\)"):
        speculative_generate(target, target, [1], 5, eos_id=40)
    with pytest.raises(ValueError, match=r"the prompt is empty"):
        speculative_generate(target, target, [], 5)


def test_models_go_back_to_their_mode():
    target, draft = random_model(1), random_model(2)
    target.train()
    speculative_generate(target, draft, [1], 4)
    assert target.training and not draft.training


# -- sampling -------------------------------------------------------------------------------------------------
def test_sampling_is_reproducible_by_seed(demo):
    target, draft, tok = demo
    ids = tok.encode("<s>")
    runs = [speculative_generate(target, draft, ids, 12, k=3, temperature=1.2, seed=s).sequences for s in (5, 5, 6)]
    assert torch.equal(runs[0], runs[1])
    others = [speculative_generate(target, draft, ids, 12, k=3, temperature=1.2, seed=s).sequences for s in range(8)]
    assert len({tuple(o[0].tolist()) for o in others}) > 1


def test_top_k_1_sampling_is_greedy():
    """top-k=1 makes p and q one-hot: the rule then keeps x iff it is the target's argmax, and the residual
    is the target's argmax: exactly greedy."""
    target, draft = random_model(4), random_model(5)
    for k in (1, 3, 5):
        r = speculative_generate(target, draft, [2, 3], 20, k=k, temperature=0.8, top_k=1, seed=1)
        assert torch.equal(r.sequences, generate(target, [2, 3], 20).sequences)


def test_p_and_q_are_the_filtered_distributions(demo):
    target, draft, tok = demo
    ids = torch.tensor([tok.encode("<s>")])
    r = speculative_generate(target, draft, ids, 3, k=2, temperature=0.7, top_k=8, top_p=0.9, seed=3)
    x = r.rounds[0].proposed[0]
    with torch.no_grad():
        q = torch.softmax(lib.filter_logits(draft(ids)[:, -1].float(), 0.7, 8, 0.9), -1)[0]
        p = torch.softmax(lib.filter_logits(target(ids)[:, -1].float(), 0.7, 8, 0.9), -1)[0]
    assert r.rounds[0].q[0] == pytest.approx(float(q[x]), abs=1e-6)
    assert r.rounds[0].p[0] == pytest.approx(float(p[x]), abs=1e-6)
    assert r.rounds[0].accept_prob[0] == pytest.approx(min(1.0, float(p[x] / q[x])), abs=1e-5)


@pytest.mark.parametrize("temperature", [0.8, 1.5])
def test_sampled_runs_keep_the_caches_consistent(temperature):
    target, draft = random_model(8), random_model(9, n_layers=1)
    for seed in range(5):
        r = speculative_generate(target, draft, [1, 2, 3], 20, k=4, temperature=temperature, seed=seed)
        assert r.n_new == 20
        check_rounds(r)
        check_caches(r, target, draft)


# -- the acceptance rule on hand-made distributions -----------------------------------------------------------
P = torch.tensor([0.5, 0.3, 0.2, 0.0], dtype=torch.float64)
Q = torch.tensor([0.2, 0.5, 0.1, 0.2], dtype=torch.float64)


def test_rule_by_hand():
    # min(1, p/q): token 0 is under-proposed (always kept), 1 over-proposed (kept 3/5), 3 impossible for p
    assert [acceptance_probability(P, Q, x) for x in range(4)] == pytest.approx([1.0, 0.6, 1.0, 0.0])
    # p - q = [0.3, -0.2, 0.1, -0.2] -> max(0, .) = [0.3, 0, 0.1, 0] -> normalised [0.75, 0, 0.25, 0]
    torch.testing.assert_close(residual_distribution(P, Q), torch.tensor([0.75, 0, 0.25, 0], dtype=torch.float64))
    # kept with probability sum min(p, q) = 0.2 + 0.3 + 0.1 + 0 = 0.6
    assert expected_acceptance(P, Q) == pytest.approx(0.6)
    # accepted part min(p, q) = [0.2, 0.3, 0.1, 0] + 0.4 * [0.75, 0, 0.25, 0] = [0.5, 0.3, 0.2, 0] = p
    torch.testing.assert_close(output_distribution(P, Q), P)
    # p == q: nothing to correct, everything kept, the residual falls back to p
    assert expected_acceptance(P, P) == pytest.approx(1.0)
    torch.testing.assert_close(residual_distribution(P, P), P)


@settings(max_examples=50, deadline=None)
@given(seed=st.integers(0, 10_000), n=st.integers(2, 12))
def test_rule_output_is_p_for_any_p_and_q(seed, n):
    g = torch.Generator().manual_seed(seed)
    p = torch.softmax(torch.randn(n, generator=g, dtype=torch.float64) * 2, -1)
    q = torch.softmax(torch.randn(n, generator=g, dtype=torch.float64) * 2, -1)
    torch.testing.assert_close(output_distribution(p, q), p, atol=1e-12, rtol=0)
    assert 0 < expected_acceptance(p, q) <= 1


def test_rule_empirically():
    """Many seeded draws of x ~ q, then the rule: kept 60% of the time, output frequencies ~ p."""
    g = torch.Generator().manual_seed(0)
    n, kept, out = 4000, 0, torch.zeros(4)
    for _ in range(n):
        x = int(torch.multinomial(Q.float(), 1, generator=g))
        ok, token = accept_or_resample(P, Q, x, generator=g)
        kept += ok
        out[token] += 1
        if ok:
            assert token == x
        else:
            assert token in (0, 2)  # the residual lives where p > q
    assert kept / n == pytest.approx(0.6, abs=0.03)  # ~4 standard errors (sqrt(0.24 / 4000) = 0.0077)
    assert out[3] == 0
    chi = chi_square_test({i: int(out[i]) for i in range(4)}, {i: float(P[i]) for i in range(4)})
    assert chi.dof == 2 and chi.p_value > 0.01, chi


def test_rule_errors():
    with pytest.raises(ValueError, match=r"p must be a probability distribution \(finite, non-negative, summing "
                                         r"to 1\), got sum 0.9"):
        acceptance_probability(torch.tensor([0.5, 0.4]), torch.tensor([0.5, 0.5]), 0)
    with pytest.raises(ValueError, match=r"p and q must be over the same vocabulary, got 2 and 3 entries"):
        residual_distribution(torch.tensor([0.5, 0.5]), torch.tensor([0.5, 0.25, 0.25]))
    with pytest.raises(ValueError, match=r"x must be a token the draft can propose \(an integer from 0 to 3 with "
                                         r"q\(x\) > 0\), got 3 with q\(x\) = 0"):
        acceptance_probability(P, torch.tensor([0.5, 0.25, 0.25, 0.0], dtype=torch.float64), 3)
    with pytest.raises(ValueError, match=r"q must be a 1-D float tensor of probabilities over the vocabulary"):
        expected_acceptance(P, Q[None])


# -- chi-square ----------------------------------------------------------------------------------------------
def test_chi_square_p_values_against_known_values():
    # chi-square survival function: 3.841459 is the 5% point with 1 degree of freedom; with 2, sf(x) = exp(-x/2)
    d = 5 * math.sqrt(3.841458820694124)  # (d^2 + d^2) / 50 = 3.841459
    res = chi_square_test({0: 50 + d, 1: 50 - d}, {0: 0.5, 1: 0.5})
    assert res.dof == 1 and res.statistic == pytest.approx(3.841458820694124)
    assert res.p_value == pytest.approx(0.05, abs=1e-9)
    obs = {0: 30, 1: 50, 2: 20}
    res = chi_square_test(obs, {0: 0.25, 1: 0.5, 2: 0.25})
    stat = (30 - 25) ** 2 / 25 + 0 + (20 - 25) ** 2 / 25
    assert res.statistic == pytest.approx(stat) and res.dof == 2
    assert res.p_value == pytest.approx(math.exp(-stat / 2), rel=1e-9)
    assert str(res) == f"chi-square = {stat:.2f} with 2 degrees of freedom over 100 samples, p-value = 0.368"
    far = chi_square_test({0: 2000, 1: 0}, {0: 0.5, 1: 0.5})  # chi-square 2000: p underflows to 0
    assert far.p_value == 0 and str(far).endswith("p-value < 1e-300")


def test_chi_square_pools_rare_categories_and_checks_input():
    probs = {"a": 0.5, "b": 0.45, "c": 0.03, "d": 0.02}
    res = chi_square_test({"a": 52, "b": 44, "c": 4}, probs)  # n=100: c and d expected < 5 -> "other"
    assert res.labels == ["a", "b", "other"] and res.observed == [52, 44, 4] and res.expected == [50, 45, 5]
    with pytest.raises(ValueError, match=r"probs must be non-negative and sum to 1, got sum 0.9"):
        chi_square_test({"a": 1}, {"a": 0.5, "b": 0.4})
    with pytest.raises(ValueError, match=r"observed categories with probability 0 under probs: \['z'\]"):
        chi_square_test({"a": 5, "z": 1}, {"a": 1.0})
    with pytest.raises(ValueError, match=r"needs at least one observation"):
        chi_square_test({}, {"a": 1.0})


def test_next_token_probs_are_the_targets(demo):
    target, _, tok = demo
    ids = tok.encode("<s>")
    one = next_token_probs(target, ids, 1)
    two = next_token_probs(target, ids, 2)
    assert sum(one.values()) == pytest.approx(1.0) and sum(two.values()) == pytest.approx(1.0)
    ren, gong = tok.encode("人工")
    assert one[(ren,)] == pytest.approx(0.2, abs=0.01)  # 3 of the corpus's 15 lines start with 人
    marginal = sum(v for (a, _), v in two.items() if a == ren)
    assert marginal == pytest.approx(one[(ren,)], abs=1e-9)
    assert two[(ren, gong)] / one[(ren,)] > 0.95  # after 人 comes 工


def test_sampled_output_is_distributed_as_the_target_demo_draft(demo):
    """Chi-square over 300 seeded runs: first two tokens after <s> (k=1: accept / resample / bonus), as in
    notebook 07."""
    target, draft, tok = demo
    check = distribution_check(target, draft, tok.encode("<s>"), runs=300, n_tokens=2, k=1, seed=0)
    chi = check.chi
    assert chi.n == 300 == sum(check.counts.values()) and chi.dof >= 10  # first token: a dozen corpus starts
    assert chi.p_value > 0.01, chi
    assert check.n_proposed == 300 and check.acceptance_rate > 0.9  # the demo draft knows the corpus
    assert check.n_new == 600 and check.target_forwards < 600


def test_sampled_output_is_distributed_as_the_target_with_a_bad_draft(demo):
    """A random draft is accepted ~10% of the time: almost every token comes from the residual, and the
    output is still the target's distribution -- and clearly not the draft's (the test has power)."""
    target, _, tok = demo
    config = lib.load_demo("draft")[0].config
    torch.manual_seed(0)
    bad = MiniTransformer(config).eval()  # untrained: near-uniform proposals (the notebook's "untrained draft")
    ids = tok.encode("<s>")
    check = distribution_check(target, bad, ids, runs=300, n_tokens=2, k=1, seed=0)
    assert check.chi.p_value > 0.01, check.chi
    assert check.acceptance_rate < 0.3
    assert check.acceptance_rate == pytest.approx(expected_acceptance(
        *(torch.tensor(list(next_token_probs(m, ids, 1).values())) for m in (target, bad))), abs=0.05)
    firsts = {}
    for (a, _), c in check.counts.items():
        firsts[(a,)] = firsts.get((a,), 0) + c
    against_draft = chi_square_test(firsts, next_token_probs(bad, ids, 1), min_expected=1)
    assert against_draft.p_value < 1e-6, against_draft


def test_distribution_check_errors(demo):
    target, draft, tok = demo
    with pytest.raises(ValueError, match=r"runs must be an integer >= 1, got 0"):
        distribution_check(target, draft, tok.encode("<s>"), runs=0)
    with pytest.raises(ValueError, match=r"max_new_tokens=1 is shorter than the n_tokens=2 being counted"):
        distribution_check(target, draft, tok.encode("<s>"), runs=5, n_tokens=2, max_new_tokens=1)
    with pytest.raises(ValueError, match=r"n_tokens must be 1 or 2, got 3"):
        next_token_probs(target, tok.encode("<s>"), 3)


def test_count_forward_passes():
    m = random_model(1)
    with count_forward_passes(m=m) as n:
        generate(m, [1, 2], 7)
    assert n == {"m": 7}
    generate(m, [1], 3)
    assert n == {"m": 7}  # the hook is gone after the block
    with pytest.raises(TypeError, match=r"count_forward_passes\(x=...\) needs a torch.nn.Module, got int"):
        with count_forward_passes(x=3):
            pass


def test_result_table(demo):
    r, tok = run_demo(demo, "<s>the", 12, k=4)
    rows = r.rows(tok)
    assert [row["round"] for row in rows] == list(range(len(r.rounds)))
    assert rows[-1]["new so far"] == r.n_new == 12
    assert "".join(row["emitted"] for row in rows) == tok.decode(r.new_tokens[0])
    lines = r.table(tok).splitlines()
    assert lines[0].split() == ["round", "proposed", "kept", "target", "emitted", "new", "so", "far"]
    assert len(lines) == 2 + len(r.rounds)
    assert r.summary().startswith(f"12 new tokens in {r.target_forwards} target passes (generate: 12)")


def test_measure_acceptance_totals(demo):
    target, draft, tok = demo
    prompts = [tok.encode(p) for p in ("<s>深", "<s>hello", "<s>大")]
    for temperature, seeds in ((0.0, (0,)), (1.0, (0, 1))):
        rows = measure_acceptance(target, draft, prompts, ks=(2, 5), max_new_tokens=12, temperature=temperature,
                                  eos_id=tok.eos_id, seeds=seeds)
        assert [r["k"] for r in rows] == [2, 5]
        for row in rows:
            runs = [speculative_generate(target, draft, p, 12, k=row["k"], temperature=temperature,
                                         eos_id=tok.eos_id, seed=s) for p in prompts for s in seeds]
            new = sum(r.n_new for r in runs)
            passes = sum(r.target_forwards for r in runs)
            assert row["runs"] == len(runs) and row["new tokens"] == new
            assert row["target passes"] == passes and row["draft passes"] == sum(r.draft_forwards for r in runs)
            kept, proposed = sum(r.n_accepted for r in runs), sum(r.n_proposed for r in runs)
            assert row["kept"] == f"{kept}/{proposed}" and row["drafts kept"] == f"{kept / proposed:.1%}"
            assert row["saved"] == f"{1 - passes / new:.1%}" and row["tokens/pass"] == round(new / passes, 2)
            alpha = sum(r.alpha * r.n_decided for r in runs) / sum(r.n_decided for r in runs)
            assert row["α"] == round(alpha, 4) and row["predicted"] == round(expected_tokens_per_pass(alpha, row["k"]), 2)
            full = [x for r in runs for x in r.full_rounds]
            assert row["full rounds"] == len(full) and all(len(x.proposed) == row["k"] for x in full)
            assert row["tokens/full round"] == round(sum(len(x.emitted) for x in full) / len(full), 2)
    assert text_table(rows).splitlines()[0].split()[:4] == ["k", "runs", "new", "tokens"]
    with pytest.raises(ValueError, match=r"prompts is empty"):
        measure_acceptance(target, draft, [])


# -- by the numbers: α, tokens per target pass, the wall-time speed-up ---------------------------------------------


def test_expected_tokens_per_pass_edge_cases():
    assert expected_tokens_per_pass(0, 4) == 1.0  # every proposal rejected: the target's own token only
    assert expected_tokens_per_pass(1, 4) == 5.0 and expected_tokens_per_pass(1.0, 1) == 2.0  # all kept + bonus
    assert expected_tokens_per_pass(0.5, 1) == pytest.approx(1.5)
    assert expected_tokens_per_pass(0.5, 3) == pytest.approx(1 + 0.5 + 0.25 + 0.125)
    # continuous at α = 1 (the closed form's 0/0)
    assert expected_tokens_per_pass(1 - 1e-9, 6) == pytest.approx(7.0, rel=1e-6)


@settings(max_examples=60, deadline=None)
@given(alpha=st.floats(0, 1), k=st.integers(1, 12))
def test_expected_tokens_per_pass_is_the_geometric_sum(alpha, k):
    """1 + α + … + α^k: the mean of a kept prefix (P(i kept) = α^i(1 − α), P(all k) = α^k) plus the target's token."""
    dist = [alpha ** i * (1 - alpha) for i in range(k)] + [alpha ** k]
    assert sum(dist) == pytest.approx(1.0)
    mean = sum((i + 1) * pi for i, pi in enumerate(dist))
    assert expected_tokens_per_pass(alpha, k) == pytest.approx(mean, rel=1e-9, abs=1e-12)
    assert 1.0 <= expected_tokens_per_pass(alpha, k) <= k + 1
    if 0.01 < alpha < 0.99:
        assert implied_alpha(expected_tokens_per_pass(alpha, k), k) == pytest.approx(alpha, abs=1e-6)


def test_expected_speedup():
    assert expected_speedup(0.8, 4, 0.0) == pytest.approx(expected_tokens_per_pass(0.8, 4))  # a free draft
    assert expected_speedup(1.0, 4, 0.25) == pytest.approx(5 / 2)  # (k + 1) / (k·c + 1)
    assert expected_speedup(0.0, 3, 0.1) == pytest.approx(1 / 1.3)  # a useless draft costs time
    # Leviathan et al.: α = 0.8, γ = 5 (k), c = 0.05 -> (1 − 0.8^6) / (0.2 · 1.25) ≈ 2.95
    assert expected_speedup(0.8, 5, 0.05) == pytest.approx((1 - 0.8 ** 6) / (0.2 * 1.25))


def test_the_numbers_check_their_arguments():
    with pytest.raises(ValueError, match=r"alpha \(the chance that one draft token is accepted\) must be .*0.*1.*got 1.5"):
        expected_tokens_per_pass(1.5, 4)
    with pytest.raises(ValueError, match=r"alpha .* must be .*got -0.1"):
        expected_tokens_per_pass(-0.1, 4)
    with pytest.raises(ValueError, match=r"k \(draft tokens proposed per round\) must be an integer >= 1, got 0"):
        expected_tokens_per_pass(0.5, 0)
    with pytest.raises(ValueError, match=r"k \(draft tokens proposed per round\) must be an integer >= 1, got 2.5"):
        expected_tokens_per_pass(0.5, 2.5)
    with pytest.raises(ValueError, match=r"alpha .* must be .*got nan"):
        expected_tokens_per_pass(float("nan"), 2)
    with pytest.raises(ValueError, match=r"c \(the cost of one draft pass, in target passes\) must be .*got -1"):
        expected_speedup(0.5, 2, -1)
    with pytest.raises(ValueError, match=r"tokens_per_pass must be a number from 1 to k \+ 1 = 5 .*got 6"):
        implied_alpha(6, 4)


def test_a_draft_equal_to_the_target_is_always_accepted(demo):
    """α = 1 and k + 1 tokens per target pass, greedy and sampled, when the draft is the target itself."""
    target, _, tok = demo
    for k in (1, 3, 5):
        for temperature in (0.0, 1.0):
            r = speculative_generate(target, target, tok.encode("<s>"), 4 * (k + 1), k=k, temperature=temperature,
                                     seed=k)
            assert r.alpha == pytest.approx(1.0, abs=1e-5)
            assert r.n_accepted == r.n_proposed == 4 * k and r.target_forwards == 4
            assert r.tokens_per_target_pass == k + 1 == expected_tokens_per_pass(1.0, k)
            assert len(r.full_rounds) == 4 and all(x.kind == "bonus" for x in r.rounds)


def test_alpha_is_one_minus_the_total_variation(demo):
    """Sampling: every decided proposal records sum_x min(p, q) = 1 − TV(p, q) of its two distributions;
    greedy: whether the argmaxes agree (= its accept_prob)."""
    target, draft, tok = demo
    r = speculative_generate(target, draft, tok.encode("<s>the kv"), 20, k=3, temperature=1.0, seed=2)
    assert r.n_decided == sum(min(x.accepted + 1, len(x.proposed)) for x in r.rounds) > 0
    ids = r.sequences[0].tolist()
    for x in r.rounds:
        for i, a in enumerate(x.alpha):
            prefix = torch.tensor([ids[:x.start] + x.proposed[:i]])
            with torch.no_grad():
                p = torch.softmax(target(prefix)[0, -1].double(), -1)
                q = torch.softmax(draft(prefix)[0, -1].double(), -1)
            assert a == pytest.approx(1 - 0.5 * float((p - q).abs().sum()), abs=1e-5)
    g = speculative_generate(target, draft, tok.encode("<s>the kv"), 20, k=3)
    assert all(x.alpha == x.accept_prob for x in g.rounds)
    assert g.alpha == sum(x.accepted for x in g.rounds) / g.n_decided  # kept / (kept + first rejections)
    assert g.alpha > g.acceptance_rate  # drafts dropped unchecked after a rejection count as not kept


def constant_model(seed: int, vocab: int = 6, max_seq_len: int = 512) -> MiniTransformer:
    """A model whose next-token distribution is the same after every prefix: the attention and the FFN write
    nothing but a fixed bias into the residual stream, so lm_head sees one vector whatever the tokens. Its
    draft proposals are then accepted independently with one fixed α: the formula's assumption, exactly."""
    torch.manual_seed(seed)
    cfg = lib.ModelConfig(vocab_size=vocab, n_layers=1, d_model=8, n_heads=2, max_seq_len=max_seq_len,
                          tie_embeddings=False)
    m = MiniTransformer(cfg).eval()
    with torch.no_grad():
        for p in m.parameters():
            p.zero_()
        m.norm_f.weight.fill_(1.0)
        m.blocks[0].mlp.down_proj.bias.copy_(torch.randn(8))
        m.lm_head.weight.copy_(0.3 * torch.randn(vocab, 8))
    return m


@torch.no_grad()
def test_predicted_tokens_per_pass_matches_a_long_run():
    """With a fixed α per position, the measured tokens per full round agree with (1 − α^(k+1)) / (1 − α)
    within 4 standard errors over ~1,000 rounds (seeded: the run is the same every time)."""
    target, draft = constant_model(0), constant_model(1)
    ids = [0]
    p = torch.softmax(target(torch.tensor([ids]))[0, -1].double(), -1)
    q = torch.softmax(draft(torch.tensor([ids]))[0, -1].double(), -1)
    alpha = float(torch.minimum(p, q).sum())
    assert 0.4 < alpha < 0.95  # a draft that is right often, not always
    for k in (2, 4):
        runs = [speculative_generate(target, draft, ids, 400, k=k, temperature=1.0, seed=s) for s in range(6)]
        rounds = [x for r in runs for x in r.full_rounds]
        assert len(rounds) > 500
        assert all(a == pytest.approx(alpha, abs=1e-6) for r in runs for x in r.rounds for a in x.alpha)
        n = [len(x.emitted) for x in rounds]
        probs = [alpha ** i * (1 - alpha) for i in range(k)] + [alpha ** k]  # P(i + 1 tokens)
        mean = expected_tokens_per_pass(alpha, k)
        var = sum((i + 1 - mean) ** 2 * pi for i, pi in enumerate(probs))
        measured = sum(n) / len(n)
        assert abs(measured - mean) < 4 * math.sqrt(var / len(n)), (k, measured, mean)
        assert implied_alpha(measured, k) == pytest.approx(alpha, abs=0.05)

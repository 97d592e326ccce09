"""Serving with the lengths of real text (notebook 09): held-out passages and the pairs taken from them, the
simulated stream whose lengths they give, and real requests for the real model, whose counts follow from the
lengths alone (the model never writes <eos>)."""
import statistics

import pytest

import lib
from lib.corpus import LANGUAGES, encode_text, heldout_pairs, heldout_passages, heldout_text
from lib.serving import ServeRequest, compare_policies, request_stream, serve, text_requests, text_stream


@pytest.fixture(scope="module")
def lm():
    return lib.load_demo("lm")


@pytest.mark.parametrize("lang", LANGUAGES)
def test_passages_are_the_blank_line_blocks_of_two_lines_or_more_in_text_order(lang):
    text, passages = heldout_text(lang), heldout_passages(lang)
    assert len(passages) > 500
    assert all("\n\n" not in p and p.count("\n") >= 1 and p == p.strip("\n") for p in passages)
    at = 0
    for p in passages:  # each one is in the text, after the one before it, and bounded by blank lines
        at = text.index(p, at)
        assert at == 0 or text[at - 2:at] == "\n\n"
        at += len(p)
    blocks = [b.strip("\n") for b in text.split("\n\n") if b.strip()]
    assert len(passages) == sum(b.count("\n") >= 1 for b in blocks)  # only the one-line blocks are left out


def test_the_two_texts_give_speeches_sonnets_and_poems():
    en, zh = heldout_passages("en"), heldout_passages("zh")
    assert any(p.startswith("FLAVIUS.\nHence! home, you idle creatures, get you home!") for p in en)
    assert any(p.startswith("From fairest creatures we desire increase,") and p.count("\n") == 13 for p in en)
    assert zh[0].split("\n")[:2] == ["快活年近拍", "万俟咏"]  # title, poet, then the verses


def test_pairs_take_the_languages_in_turn_and_each_passage_with_the_next():
    pairs = heldout_pairs(9)
    assert [lang for lang, _, _ in pairs] == ["en", "zh"] * 4 + ["en"]
    for lang in LANGUAGES:
        passages = heldout_passages(lang)
        mine = [(a, b) for x, a, b in pairs if x == lang]
        indices = [passages.index(a) for a, _ in mine]
        assert all(passages[i + 1] == b for i, (_, b) in zip(indices, mine))
        assert indices == sorted(indices) and len(set(indices)) == len(indices)  # spread through the text, in order
        count = len(mine)
        assert indices == [(2 * m + 1) * (len(passages) - 1) // (2 * count) for m in range(count)]
    assert [x for x, _, _ in heldout_pairs(3, langs=("zh",))] == ["zh"] * 3


def test_pairs_errors():
    with pytest.raises(ValueError, match=r"n must be an integer >= 1, got 0"):
        heldout_pairs(0)
    with pytest.raises(ValueError, match=r"langs is empty"):
        heldout_pairs(2, langs=())
    with pytest.raises(ValueError, match=r"lang='fr' is not supported; allowed: en, zh"):
        heldout_pairs(2, langs=("fr",))
    n_en = len(heldout_passages("en"))
    with pytest.raises(ValueError, match=rf"asks for {n_en} pairs of en passages, but its held-out text has "
                                         rf"{n_en} passages \({n_en - 1} pairs\): give a smaller n"):
        heldout_pairs(n_en, langs=("en",))


def test_text_stream_has_the_lengths_of_the_passages():
    stream = text_stream(40)
    assert stream == text_stream(40)  # no randomness
    for r, (_, prompt, answer) in zip(stream, heldout_pairs(40)):
        assert r.prompt_len == len(prompt) + 3 and r.output_len == len(answer)  # <s>, passage, "\n\n"; next passage
    clipped = text_stream(40, max_len=64)
    assert all(r.total_len <= 64 and r.prompt_len <= 63 and r.output_len >= 1 for r in clipped)
    assert any(r.prompt_len == 63 for r in clipped)


def test_text_stream_is_shorter_than_the_sharegpt_like_one_and_paging_still_wins():
    """Real speeches and poems: prompts and answers of about 150 characters (the log-normal stream: 160 / 340
    tokens), long-tailed; paging still holds tokens in almost all of the memory, reserving 2048 in a few
    tenths."""
    text, lognormal = text_stream(400), request_stream(400, seed=0)
    assert 100 < statistics.mean(r.prompt_len for r in text) < 200
    assert 100 < statistics.mean(r.output_len for r in text) < 200
    assert statistics.median(r.output_len for r in text) < 0.75 * statistics.mean(r.output_len for r in text)
    assert statistics.mean(r.output_len for r in text) < statistics.mean(r.output_len for r in lognormal)
    results = compare_policies(text, kv_tokens=16384)
    shares = {p: r.shares()["tokens"] for p, r in results.items()}
    assert shares["max"] < 0.3 < shares["pow2"] < shares["oracle"] < 0.9 < shares["paged"]
    assert results["paged"].mean_running() > 3 * results["max"].mean_running()


def test_text_requests_are_passages_ending_in_a_blank_line(lm):
    model, tok = lm
    requests = text_requests(tok, n=6, max_prompt=40, max_new_tokens=20)
    blank = encode_text(tok, "\n\n")
    for r, (_, prompt, answer) in zip(requests, heldout_pairs(6)):
        assert isinstance(r, ServeRequest) and r.prompt[0] == tok.bos_id and r.prompt[-2:] == blank
        assert r.prompt[1:-2] == encode_text(tok, prompt)[:37] and len(r.prompt) <= 40
        assert r.max_new_tokens == min(20, len(answer))
    assert [r.rid for r in requests] == list(range(6))
    with pytest.raises(ValueError, match=r"max_prompt must be an integer >= 3"):
        text_requests(tok, max_prompt=2)


def test_serving_the_real_model_counts_follow_from_the_lengths(lm):
    """No <eos>: every request makes exactly its max_new_tokens, under both policies the same greedy tokens as
    lib.generate, and static batching needs more passes than continuous batching for the same tokens."""
    model, tok = lm
    requests = text_requests(tok, n=6, max_prompt=24, max_new_tokens=12)
    for r, n in zip(requests, (12, 2, 2, 12, 2, 2)):  # answers of very different lengths
        r.max_new_tokens = n
    runs = {p: serve(model, requests, p, max_batch=3) for p in ("static", "continuous")}
    expected = [lib.generate(model, r.prompt, r.max_new_tokens).new_tokens[0].tolist() for r in requests]
    for run in runs.values():
        assert [r.tokens for r in run.records] == expected
        assert run.tokens == sum(r.max_new_tokens for r in requests) and run.preemptions == 0
        assert run.prefill_tokens == sum(len(r.prompt) for r in requests)
    assert runs["continuous"].steps < runs["static"].steps
    # static: each batch of three runs as long as its longest request (its first pass is the prefill)
    lengths = [r.max_new_tokens for r in requests]
    assert runs["static"].steps == max(lengths[:3]) + max(lengths[3:])


def test_what_notebook_10_says_of_the_text_stream():
    """Paging leaves under the vLLM paper's 4% of the memory without tokens, `max` leaves no hole (16,384 is eight
    regions of 2048), swapping and recomputing cost about the same time for Llama-2-13B at best on an H100, and
    blocks of 8, 16 and 32 positions leave under 5% of the final lengths' slots empty."""
    from lib.presets import PRESETS
    from lib.serving import PREEMPTIONS, block_size_tradeoff, preemption_seconds, simulate
    stream = text_stream(400)
    results = compare_policies(stream, kv_tokens=16384)
    assert 1 - results["paged"].shares()["tokens"] < 0.04 and results["max"].shares()["free"] == 0
    runs = {p: simulate(stream, "paged", kv_tokens=16384, preemption=p) for p in PREEMPTIONS}
    seconds = {p: preemption_seconds(r, PRESETS["llama-2-13b"])[p] for p, r in runs.items()}
    assert abs(seconds["swap"] / seconds["recompute"] - 1) < 0.1, seconds
    assert all(c.empty_share < 0.05 for c in block_size_tradeoff([r.total_len for r in stream], (8, 16, 32)))


def test_chunked_prefill_keeps_the_decodes_pace_beside_a_long_prompt(lm):
    """A long prompt joins while three requests decode: unchunked, its pass costs llama-2-13b on an H100 far more
    than a decode step (compute-bound); under a budget of 256 tokens every pass with decodes stays near a decode
    step's time (the chunks ride on the weights a decode reads anyway), and the tokens are the same."""
    model, tok = lm
    short = text_requests(tok, n=4, max_prompt=16, max_new_tokens=12)
    long_prompt = [tok.bos_id] + list(range(10, 10 + 447))  # 448 tokens
    mixed = short[:1] + [ServeRequest(50, [tok.bos_id, 5], 2)] + short[1:3] + [ServeRequest(99, long_prompt, 3)]
    cfg13 = lib.PRESETS["llama-2-13b"]
    runs = {b: serve(model, mixed, "continuous", max_batch=4, max_num_batched_tokens=b) for b in (None, 256)}
    assert [r.tokens for r in runs[None].records] == [r.tokens for r in runs[256].records]
    rows = {b: run.chunking_row(cfg13, rid=99) for b, run in runs.items()}
    decode = lib.roofline.DEFAULT_GPU.seconds(lib.costs.decode_cost(cfg13, 20, 3)) * 1e3
    assert rows[None]["longest pass with decodes (ms)"] > 1.4 * decode
    assert rows[256]["longest pass with decodes (ms)"] < 1.05 * decode
    assert rows[256]["its first token (pass)"] == rows[None]["its first token (pass)"] + 1  # two chunks
    with pytest.raises(ValueError, match=r"no request has rid=7"):
        runs[256].chunking_row(cfg13, rid=7)

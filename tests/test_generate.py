"""generate(): the loop's counts (from instrumentation), stopping, sampling rules and its errors."""
import pytest
import torch

from helpers import SMALL_GQA, small_gqa_model
from lib import MiniTransformer, generate

CFG = SMALL_GQA


@pytest.fixture(scope="module")
def model():
    return small_gqa_model()


@pytest.mark.parametrize("n", [1, 2, 5, 17, 40])
def test_kv_counts_from_the_trace(model, n):
    """One start token, n steps: with a cache each layer computes n K/V vectors in total, without n(n+1)/2."""
    prompt = torch.tensor([[1]])
    cached = generate(model, prompt, n, use_cache=True, trace=True).trace
    uncached = generate(model, prompt, n, use_cache=False, trace=True).trace
    for layer in range(CFG.n_layers):
        assert cached.kv_computed(layer) == [1] * n
        assert cached.kv_read(layer) == list(range(n))
        assert uncached.kv_computed(layer) == list(range(1, n + 1))
        assert uncached.kv_read(layer) == [0] * n
        assert cached.total_kv_computed(layer) == n
        assert uncached.total_kv_computed(layer) == n * (n + 1) // 2
    assert cached.total_kv_computed() == CFG.n_layers * n


def test_counts_match_the_analytic_schedule(model):
    from lib.costs import generation_steps
    for use_cache in (True, False):
        tr = generate(model, torch.randint(0, 30, (2, 6)), 9, use_cache=use_cache, trace=True).trace
        analytic = generation_steps(CFG, 6, 9, use_cache)
        assert [s.kv_computed[0] for s in tr] == [a["kv_computed"] for a in analytic]
        assert [s.kv_read[0] for s in tr] == [a["kv_read"] for a in analytic]
        assert [s.n_keys for s in tr] == [a["n_keys"] for a in analytic]


def test_eos_stops_and_pads(model):
    prompt = torch.randint(0, 30, (3, 2))
    free = generate(model, prompt, 12)
    eos = int(free.sequences[0, 4])  # the token row 0 produces at its third step
    r = generate(model, prompt, 12, eos_id=eos, pad_id=0, trace=True)
    first = free.sequences[0, 2:].tolist().index(eos) + 2  # row 0 stops at its first eos
    row0 = r.sequences[0].tolist()
    assert row0[first] == eos and all(t == 0 for t in row0[first + 1:])
    for b in range(3):  # every row is the free run up to and including its eos, then padding
        new = free.sequences[b, 2:].tolist()
        got = r.sequences[b, 2:].tolist()
        if eos in new[:len(got)]:
            cut = new.index(eos) + 1
            assert got[:cut] == new[:cut] and all(t == 0 for t in got[cut:])
        else:
            assert got == new[:len(got)]
    if r.sequences.shape[1] < 14:  # it stopped early: every row has finished
        assert all(eos in r.sequences[b, 2:].tolist() for b in range(3))


def test_temperature_zero_is_greedy_and_seed_reproduces(model):
    p = torch.randint(0, 30, (1, 3))
    g = generate(model, p, 10).sequences
    assert torch.equal(g, generate(model, p, 10, temperature=0.0, top_k=3, seed=5).sequences)
    a = generate(model, p, 20, temperature=1.5, seed=7).sequences
    b = generate(model, p, 20, temperature=1.5, seed=7).sequences
    c = generate(model, p, 20, temperature=1.5, seed=8).sequences
    assert torch.equal(a, b) and not torch.equal(a, c)


def test_top_k_restricts_the_choice(model):
    p = torch.randint(0, 30, (1, 3))
    r = generate(model, p, 15, temperature=2.0, top_k=1, seed=3)
    assert torch.equal(r.sequences, generate(model, p, 15).sequences)  # top-1 sampling is greedy
    tr = generate(model, p, 15, temperature=2.0, top_k=3, seed=3, trace=True).trace
    for s in tr:
        assert int(s.chosen[0]) in s.top_ids[0, :3].tolist()
        assert (s.sample_top_probs[0, 3:] == 0).all()


def test_bad_arguments_are_clear_errors(model):
    p = torch.tensor([[1, 2, 3]])
    cases = [
        (dict(max_new_tokens=0), r"max_new_tokens must be an integer >= 1, got 0"),
        (dict(max_new_tokens=39), r"a prompt of 3 tokens leaves room for at most 38 new token\(s\) in the context "
                                  r"window \(max_seq_len=40\), but max_new_tokens=39"),
        (dict(max_new_tokens=2, temperature=-1), r"temperature must be a finite number >= 0 \(0 means greedy\), got -1"),
        (dict(max_new_tokens=2, top_k=0), r"top_k must be None \(no limit\) or an integer >= 1, got 0"),
        (dict(max_new_tokens=2, top_p=1.5), r"top_p must be None \(no limit\) or a number in \(0, 1\], got 1.5"),
        (dict(max_new_tokens=2, eos_id=99), r"eos_id=99 is not a token id of this model \(an integer from 0 to 29\)"),
        (dict(max_new_tokens=2, cache_kind="ring"), r"cache_kind='ring' is not supported; allowed: static, concat, paged"),
    ]
    for kw, msg in cases:
        with pytest.raises(ValueError, match=msg):
            generate(model, p, **kw)
    with pytest.raises(ValueError, match=r"the prompt has 41 tokens but the model's context window holds max_seq_len=40"):
        generate(model, torch.ones(1, 41, dtype=torch.long), 1)
    with pytest.raises(ValueError, match=r"the prompt is empty"):
        generate(model, [], 3)
    with pytest.raises(ValueError, match=r"token id 30 is out of range: this model's ids run from 0 to 29"):
        generate(model, [1, 30], 3)
    assert generate(model, [1, 2], 38).sequences.shape == (1, 40)  # exactly fills the window: allowed


def test_prompt_lists_are_checked_before_torch_sees_them(model):
    """A list prompt with ragged rows or non-integers gets lib's error, not torch.tensor's."""
    with pytest.raises(ValueError, match=r"the prompts of one batch must have the same length .*got lengths "
                                         r"\[3, 2\]; generate them one at a time, or use lib.serving.serve"):
        generate(model, [[1, 2, 3], [1, 2]], 3)
    with pytest.raises(ValueError, match=r"prompt 1 of the batch is empty"):
        generate(model, [[1], []], 3)
    with pytest.raises(TypeError, match=r"token ids are integers; the prompt holds 'a' \(str\) \(encode text"):
        generate(model, [1, "a"], 3)
    with pytest.raises(TypeError, match=r"token ids are integers; prompt 0 of the batch holds 1.5 \(float\)"):
        generate(model, [[1.5, 2], [1, 2]], 3)
    with pytest.raises(TypeError, match=r"the prompt holds True \(bool\)"):
        generate(model, [True, 2], 3)
    with pytest.raises(TypeError, match=r"list of lists of token ids; prompt 1 of the batch is 3 \(int\)"):
        generate(model, [[1, 2], 3], 3)
    import numpy as np
    same = generate(model, [np.int64(1), 2, 3], 4).sequences
    assert torch.equal(same, generate(model, [1, 2, 3], 4).sequences)  # numpy integers are token ids too
    two = generate(model, ([1, 2, 3], (4, 5, 6)), 4).sequences  # tuples as well as lists
    assert two.shape == (2, 7) and torch.equal(two[:1], same)


def test_list_and_1d_prompts(model):
    a = generate(model, [1, 2, 3], 4).sequences
    b = generate(model, torch.tensor([1, 2, 3]), 4).sequences
    c = generate(model, torch.tensor([[1, 2, 3]]), 4).sequences
    assert a.shape == (1, 7) and torch.equal(a, b) and torch.equal(b, c)


def test_generate_on_each_device_and_dtype(device):
    torch.manual_seed(0)
    for dtype in (torch.float32, torch.bfloat16, torch.float16):
        m = MiniTransformer(CFG).to(device=device, dtype=dtype).eval()
        r = generate(m, torch.tensor([[1, 2]], device=device), 8, trace=True)
        assert r.sequences.device.type == device.type and r.cache.dtype == dtype
        assert r.trace.total_kv_computed(0) == 2 + 7
        u = generate(m, torch.tensor([[1, 2]], device=device), 8, use_cache=False)
        # low precision: the two paths round differently, but agree on these few greedy steps at least at first
        assert torch.equal(r.sequences[:, :3], u.sequences[:, :3])


# ---------------------------------------------------------------------- the hot path: what a decode step reads back

READS = ("item", "__bool__", "__int__", "__float__", "__index__", "tolist")  # a read of a tensor's value by Python


def reads_of(monkeypatch, run) -> int:
    """How many times ``run()`` reads a tensor's value back into Python (on a GPU each read is a host sync)."""
    count = [0]
    for name in READS:
        original = getattr(torch.Tensor, name)

        def counted(self, *args, _original=original, **kwargs):
            count[0] += 1
            return _original(self, *args, **kwargs)
        monkeypatch.setattr(torch.Tensor, name, counted)
    try:
        run()
    finally:
        monkeypatch.undo()
    return count[0]


@pytest.mark.parametrize("kw", [dict(), dict(use_cache=False), dict(temperature=0.8, top_k=5, seed=0),
                                dict(temperature=1.3, top_p=0.9, seed=0), dict(cache_kind="concat")])
def test_a_decode_step_reads_nothing_back(model, monkeypatch, kw):
    """The prompt's ids and the first logits are checked once, the decode steps' logits once after the loop:
    a call reads the same few values whether it makes 2 tokens or 12 (0 reads per decode step)."""
    prompt = torch.randint(0, CFG.vocab_size, (2, 3))
    short = reads_of(monkeypatch, lambda: generate(model, prompt, 2, **kw))
    long = reads_of(monkeypatch, lambda: generate(model, prompt, 12, **kw))
    assert long == short <= 4


def test_with_eos_a_decode_step_reads_one_flag(model, monkeypatch):
    """eos_id: every step reads whether every row has stopped (the loop must know when to stop), and nothing else."""
    prompt = torch.randint(0, CFG.vocab_size, (1, 3))
    chosen = set(generate(model, prompt, 12).new_tokens[0].tolist())
    never = next(i for i in range(CFG.vocab_size) if i not in chosen)  # an id greedy does not pick: no early stop
    short = reads_of(monkeypatch, lambda: generate(model, prompt, 2, eos_id=never))
    long = reads_of(monkeypatch, lambda: generate(model, prompt, 12, eos_id=never))
    assert long - short == 10


def test_the_token_buffer_gives_what_concatenation_gave(model):
    """The loop writes each token into a buffer allocated once; the sequences are the prompt and the chosen
    tokens (as the trace saw them), contiguous, also when every row stopped early."""
    prompt = torch.randint(0, CFG.vocab_size, (3, 4))
    for kw in (dict(), dict(use_cache=False), dict(eos_id=int(generate(model, prompt, 3).sequences[0, 5]))):
        out = generate(model, prompt, 8, trace=True, **kw)
        chosen = torch.stack([s.chosen for s in out.trace], dim=1)  # (3, generated)
        assert torch.equal(out.sequences, torch.cat([prompt, chosen], dim=1)) and out.sequences.is_contiguous()
        fed = [s.input_ids for s in out.trace]  # the trace keeps copies, not views of the buffer
        out.sequences.fill_(0)
        assert all(f.abs().sum() > 0 for f in fed[1:])


class NaNAtStep:
    """A model whose pass number ``at`` (0: the prefill) returns NaN logits: a decode step gone wrong."""

    def __init__(self, model, at):
        self.model, self.at, self.calls = model, at, 0
        self.config, self.device, self.dtype, self.training = model.config, model.device, model.dtype, False

    def eval(self):
        return self

    def train(self, mode=True):
        return self

    def __call__(self, *args, **kwargs):
        logits = self.model(*args, **kwargs)
        self.calls += 1
        return logits.fill_(float("nan")) if self.calls - 1 == self.at else logits


@pytest.mark.parametrize("kw", [dict(), dict(temperature=0.7, top_p=0.8, seed=1), dict(eos_id=3)])
def test_logits_that_go_bad_at_a_decode_step_fail_the_call_as_before(model, kw):
    """The decode steps' logits are checked on the device and read after the loop: the error names the first
    step that failed, as the pass itself did, and a cache passed in holds what it held before."""
    from lib import KVCache
    cache = KVCache(CFG, 1, 20)
    model(torch.tensor([[1, 2]]), cache=cache)
    with pytest.raises(ValueError, match=r"the logits at step 3 \(decode\) hold NaN or inf, so no next token can be "
                                         r"chosen: the model's weights are finite"):
        generate(NaNAtStep(model, 3), torch.tensor([[4]]), 9, cache=cache, **kw)
    assert cache.seq_len == 2
    with pytest.raises(ValueError, match=r"the logits at step 0 \(prefill\) hold NaN"):
        generate(NaNAtStep(model, 0), torch.tensor([[4]]), 9, **kw)


def test_a_curious_learner_gets_text_back_and_can_watch_it_being_written(chat):
    """out.text(tok) is the new tokens as text; on_token sees each step's ids as they are chosen (the same ids the
    result holds); decode given the result or a batch says what to pass instead."""
    m, tok = chat
    seen = []
    out = generate(m, tok.encode("<s>人"), 5, eos_id=tok.eos_id, on_token=lambda step, ids: seen.append((step, ids)))
    assert out.text(tok) == tok.decode(out.new_tokens[0]) == "工智能<eos>"
    assert out.text(tok, prompt=True) == "<s>人工智能<eos>"
    assert [s for s, _ in seen] == list(range(4)) and torch.cat([ids for _, ids in seen]).tolist() == \
        out.new_tokens[0].tolist()
    assert generate(m, tok.encode("<s>人"), 5, eos_id=tok.eos_id).sequences.tolist() == out.sequences.tolist()
    with pytest.raises(TypeError, match=r"not the result of lib.generate: pass out.new_tokens\[0\]"):
        tok.decode(out)
    with pytest.raises(ValueError, match=r"got a batch of shape \(1, 6\): pass one row, ids\[0\]"):
        tok.decode(out.sequences)
    with pytest.raises(IndexError, match="row must be an integer from 0 to 0 .the result holds 1 sequence"):
        out.text(tok, row=1)
    with pytest.raises(TypeError, match="on_token must be a function on_token.step, ids. or None, got str"):
        generate(m, tok.encode("<s>人"), 2, on_token="print")

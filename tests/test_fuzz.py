"""Property-based fuzzing of lib's public API with hostile values (issue 15).

Each test draws one argument of an entry point and a value for it from a mix of valid values, values just
outside the range, and junk (None, bools, 2.5, NaN, inf, strings, lists, tensors, numpy scalars), keeping
the other arguments valid. What is valid is written down here, independently of lib (``int_like``,
``real``): an integer argument takes Python and numpy integers and 0-d integer tensors, never a bool or a
float; a number is finite. Then, within a time bound:

* a valid value gives a sane result (shapes, ids in the vocabulary, the prompt kept, lengths in range);
* an invalid one raises lib's clear error: a ValueError / TypeError / IndexError whose message names the
  argument (a full pool may say so with ``PoolExhaustedError``);
* after any failure, pool usage, block references and cache lengths equal their values before the call,
  and a widget shows what it showed before.

The block allocator gets a stateful test: random sequences of reserve / fork / free / truncate, legal and
not, against a model of who holds which block. Examples are bounded and derandomized (the same examples on
every run: no flaky CI), so the whole file runs in well under a minute on two cores.
"""
import math
import os
from datetime import timedelta

import numpy as np
import pytest
import torch
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, rule

import lib
from helpers import time_bound
from lib import ConcatKVCache, KVCache, PagedKVCache, PagedKVPool, generate
from lib.blocks import BlockAllocator, BlockTable, PoolExhaustedError
from lib.serving import ServeRequest, SimRequest, serve, simulate

# FUZZ_EXAMPLES=1000 FUZZ_RANDOM=1 pytest tests/test_fuzz.py: a longer hunt, new examples on every run
FUZZ = settings(max_examples=int(os.environ.get("FUZZ_EXAMPLES", 60)), deadline=timedelta(seconds=20),
                derandomize=not os.environ.get("FUZZ_RANDOM"), database=None,
                suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
BOUND = 20  # seconds for one call: a hang fails the test instead of stalling the suite
CLEAR = (ValueError, TypeError, IndexError)


@pytest.fixture(scope="module")
def chat():
    torch.set_num_threads(1)
    return lib.load_demo("chat")


@pytest.fixture(scope="module")
def draft():
    return lib.load_demo("draft")[0]


# -------------------------------------------------------------------------------------- the spec of a value

def int_like(v):
    """v as an int when it is an integer (int, numpy integer, 0-d integer tensor; not a bool), else None."""
    if isinstance(v, torch.Tensor):
        ok = v.dim() == 0 and not v.dtype.is_floating_point and not v.dtype.is_complex and v.dtype != torch.bool
        return int(v) if ok else None
    if isinstance(v, (int, np.integer)) and not isinstance(v, (bool, np.bool_)):
        return int(v)
    return None


def real(v):
    """v as a finite float when it is a real number (not a bool, not a string), else None."""
    if isinstance(v, torch.Tensor):
        v = v.item() if v.dim() == 0 and v.dtype != torch.bool and not v.dtype.is_complex else None
    if isinstance(v, (int, float, np.integer, np.floating)) and not isinstance(v, (bool, np.bool_)):
        return float(v) if math.isfinite(v) else None
    return None


def int_in(lo, hi=None):
    return lambda v: int_like(v) is not None and lo <= int_like(v) and (hi is None or int_like(v) <= hi)


def optional(check):
    return lambda v: v is None or check(v)


JUNK = st.sampled_from([None, True, False, 2.5, -0.5, float("nan"), float("inf"), -float("inf"), "3", "", "all",
                        [], [1], (2,), {}, b"1", torch.tensor(2.5), torch.tensor([1, 2]), torch.tensor(True),
                        np.float64(1.5), np.bool_(True), object()])


def ints(lo=-3, hi=80):
    """Integers around a range, as Python ints, numpy integers and 0-d tensors, plus a few huge ones."""
    base = st.one_of(st.integers(lo, hi), st.sampled_from([2 ** 31 - 1, 2 ** 31, 2 ** 63 - 1, 2 ** 63, 2 ** 70]))
    small = st.integers(lo, hi)
    return st.one_of(base, small.map(np.int64), small.map(np.int32), small.map(torch.tensor), JUNK)


def reals(lo=-2.0, hi=3.0):
    return st.one_of(st.floats(lo, hi), st.floats(lo, hi).map(np.float32), st.sampled_from([0, 1, 2]), JUNK)


def outcome(call):
    """(result, None) or (None, the exception), within the time bound."""
    try:
        with time_bound(BOUND):
            return call(), None
    except (Exception, KeyboardInterrupt) as e:  # noqa: BLE001 - sorted by the caller
        return None, e


def assert_clear(err, *names, extra=()):
    """``err`` is lib's clear error: the right type and a message naming one of ``names``."""
    assert err is not None, f"accepted silently, expected an error naming {names}"
    assert isinstance(err, CLEAR + tuple(extra)), f"raw error {type(err).__name__}: {err}"
    text = str(err).lower().replace("-", "_").replace(" ", "_")
    assert any(n.lower().replace("-", "_").replace(" ", "_") in text for n in names), \
        f"the message does not name {names}: {err}"


def assert_ok(err):
    assert err is None, f"a valid value was refused: {type(err).__name__}: {err}"


def too_big(err, *names) -> bool:
    """A valid value may still ask for more memory than the machine has (num_samples=2**31): then the
    refusal says so and names the argument."""
    if err is not None and "bytes of memory" in str(err):
        assert_clear(err, *names)
        return True
    return False


# -------------------------------------------------------------------------------------------- generate

V, CONTEXT = 131, 64  # the chat demo's vocabulary and context window

GENERATE_ARGS = {  # name -> (strategy, is it valid, names its error may use)
    "max_new_tokens": (ints(-2, 70), int_in(1, CONTEXT - 1), ("max_new_tokens",)),  # after a 2-token prompt
    "use_cache": (st.one_of(st.booleans(), JUNK, st.integers(0, 1)), lambda v: isinstance(v, bool), ("use_cache",)),
    "temperature": (reals(), lambda v: real(v) is not None and real(v) >= 0, ("temperature",)),
    "top_k": (ints(-2, 200), optional(int_in(1)), ("top_k",)),
    "top_p": (reals(-0.5, 1.5), optional(lambda v: real(v) is not None and 0 < real(v) <= 1), ("top_p",)),
    "eos_id": (ints(-2, V + 2), optional(int_in(0, V - 1)), ("eos_id",)),
    "seed": (ints(-2, 10), optional(int_in(0, 2 ** 63 - 1)), ("seed",)),
    "trace": (st.one_of(st.sampled_from([False, True, "full", 0, 1, "yes", None]), JUNK),
              lambda v: any(type(v) is type(a) and v == a for a in (False, True, "full")), ("trace",)),
    "cache_kind": (st.one_of(st.sampled_from(["static", "concat", "paged", "ring", "Static", None]), JUNK),
                   lambda v: isinstance(v, str) and v in ("static", "concat", "paged"), ("cache_kind",)),
    "num_samples": (ints(-2, 4), int_in(1), ("num_samples",)),
    "pad_id": (ints(-2, V + 2), optional(int_in(0, V - 1)), ("pad_id",)),
    "trace_top_k": (ints(-2, 200), int_in(1), ("trace_top_k",)),
}


def check_generation(res, prompt, max_new, n_rows, trace):
    seq = res.sequences
    assert seq.dtype == torch.long and seq.shape[0] == n_rows
    assert 1 <= seq.shape[1] - len(prompt) <= max_new
    assert torch.equal(seq[:, :len(prompt)], torch.tensor([prompt] * n_rows))
    assert int(seq.min()) >= 0 and int(seq.max()) < V
    if trace:
        assert len(res.trace) == seq.shape[1] - len(prompt)


@FUZZ
@given(arg=st.sampled_from(sorted(GENERATE_ARGS)), data=st.data())
def test_generate_arguments(chat, arg, data):
    model, tok = chat
    strategy, valid, names = GENERATE_ARGS[arg]
    value = data.draw(strategy, label=arg)
    kwargs = dict(max_new_tokens=4, temperature=0.8, seed=0, eos_id=tok.eos_id)
    kwargs[arg] = value
    prompt = tok.encode("<s>人")
    res, err = outcome(lambda: generate(model, prompt, **kwargs))
    if valid(value):
        if too_big(err, *names):
            return
        assert_ok(err)
        check_generation(res, prompt, int_like(kwargs["max_new_tokens"]), int_like(kwargs.get("num_samples", 1)),
                         kwargs.get("trace", False))
    else:
        assert_clear(err, *names)


def prompts():
    ids = st.one_of(st.integers(-2, V + 1), st.integers(0, V - 1).map(np.int64), JUNK)
    row = st.lists(ids, min_size=0, max_size=6)
    dtypes = st.sampled_from([torch.long, torch.int, torch.int16, torch.int8, torch.uint8, torch.float32, torch.bool])
    tensors = st.builds(lambda dt, b, t, hi: torch.randint(0, hi, (b, t)).to(dt), dtypes, st.integers(0, 3),
                        st.integers(0, 70), st.sampled_from([2, V + 1]))
    return st.one_of(row, st.lists(row, min_size=1, max_size=3), tensors, tensors.map(lambda t: t.flatten()),
                     tensors.map(lambda t: t[None]), JUNK)


def valid_prompt(p):
    """A list of ids, a batch of equally long lists, or a 1-D / 2-D signed integer tensor; ids in range, at
    most CONTEXT - 1 positions (room for the 2 new tokens asked for)."""
    if isinstance(p, torch.Tensor):
        if p.dim() not in (1, 2) or p.dtype not in (torch.long, torch.int) or not p.numel():
            return False
        return int(p.min()) >= 0 and int(p.max()) < V and p.shape[-1] <= CONTEXT - 1
    if not isinstance(p, (list, tuple)) or not p:
        return False
    rows = p if isinstance(p[0], (list, tuple)) else [p]
    return (all(isinstance(r, (list, tuple)) and r and len(r) == len(rows[0]) for r in rows)
            and all(int_like(t) is not None and 0 <= int_like(t) < V for r in rows for t in r)
            and len(rows[0]) <= CONTEXT - 1)


@FUZZ
@given(prompt=prompts())
def test_generate_prompts(chat, prompt):
    model, _ = chat
    res, err = outcome(lambda: generate(model, prompt, 2))
    if valid_prompt(prompt):
        assert_ok(err)
        rows = prompt if isinstance(prompt, torch.Tensor) and prompt.dim() == 2 else \
            [prompt] if not isinstance(prompt[0], (list, tuple)) else prompt
        rows = [[int(t) for t in r] for r in rows]
        assert [r[:len(rows[0])] for r in res.sequences.tolist()] == rows
    else:
        assert_clear(err, "input_ids", "prompt", "token")


def usage(cache):
    """What a failed call must leave as it was: the cache's lengths and, for a paged one, its pool's blocks
    in use and every block's references (``copies`` and ``prefix_hits`` count events that happened)."""
    pool = getattr(cache, "pool", None)
    return cache.seq_lens, None if pool is None else (pool.allocator.n_used, list(pool.allocator.refcounts))


@FUZZ
@given(kind=st.sampled_from(["static", "concat", "paged", "paged-small"]), max_len=st.integers(1, 64),
       held=st.integers(0, 64), max_new=st.integers(1, 70), n=st.integers(1, 3), t=st.sampled_from([0.0, 1.0]))
def test_generate_on_a_cache_passed_in(chat, kind, max_len, held, max_new, n, t):
    """A passed cache continues after what it holds; a run that fails (a full cache, a full pool, a context
    too short) leaves it, and its pool, as they were."""
    model, tok = chat
    c = model.config
    if kind == "paged-small":
        cache = PagedKVCache(pool=PagedKVPool.for_model(model, max(1, max_len // 8), 4))
    else:
        cache = {"static": KVCache, "concat": ConcatKVCache, "paged": PagedKVCache}[kind](c, 1, max_len)
    held = min(held, max_len - 1)
    if held:
        outcome(lambda: model(torch.randint(0, V, (1, held)), cache=cache))  # may fill a small pool: fine
    before = usage(cache)
    prompt = tok.encode("<s>")
    res, err = outcome(lambda: generate(model, prompt, max_new, cache=cache, num_samples=n, temperature=t, seed=1))
    if err is not None:
        assert_clear(err, "cache", "max_len", "max_new_tokens", "context", "pool", extra=(PoolExhaustedError,))
        assert usage(cache) == before
    else:
        assert 1 <= res.new_tokens.shape[1] <= max_new and res.sequences.shape[0] == n


# ------------------------------------------------------------------------------------------ model forward

@FUZZ
@given(ids=prompts(), cache=st.sampled_from([None, "static", "concat", "paged", "junk"]), held=st.integers(0, 20),
       lengths=st.one_of(st.none(), st.lists(st.one_of(st.integers(-1, 8), JUNK), max_size=3), JUNK))
def test_forward(chat, ids, cache, held, lengths):
    model, _ = chat
    c = model.config
    if cache == "junk":
        cache = "a cache"
    elif cache is not None:
        cache = {"static": KVCache, "concat": ConcatKVCache, "paged": PagedKVCache}[cache](c, 3, 32)
        if held:
            model(torch.randint(0, V, (3, min(held, 31))), cache=cache)
    x = ids  # forward takes tensors only: a list is a bad value here
    before = usage(cache) if hasattr(cache, "seq_lens") else None
    with torch.no_grad():
        out, err = outcome(lambda: model(x, cache=cache, lengths=lengths))
    if err is not None:
        assert_clear(err, "input_ids", "cache", "lengths", "context", "max_len", "batch", "token")
        if before is not None:
            assert usage(cache) == before
    else:
        B, T = x.shape
        assert out.shape == (B, T, V) and bool(torch.isfinite(out).all())
        if before is not None:
            grown = [s - b for s, b in zip(cache.seq_lens, before[0])]
            assert grown == (lengths if lengths is not None and len(set(lengths)) > 1 else [T] * B)


# ----------------------------------------------------------------------------- caches, pools and allocator

CACHE_ARGS = {
    "batch_size": (ints(-2, 4), int_in(1)),
    "max_len": (ints(-2, 70), int_in(1, CONTEXT)),  # (None is ConcatKVCache's and PagedKVCache's default)
    "dtype": (st.one_of(st.sampled_from([None, torch.float32, torch.float16, torch.long, torch.bool, "float32"]), JUNK),
              lambda v: v is None or (isinstance(v, torch.dtype) and v.is_floating_point)),
    "block_size": (ints(-2, 40), int_in(1)),
}


@FUZZ
@given(kind=st.sampled_from(["static", "concat", "paged"]), arg=st.sampled_from(sorted(CACHE_ARGS)), data=st.data())
def test_cache_constructors(chat, kind, arg, data):
    c = chat[0].config
    strategy, valid = CACHE_ARGS[arg]
    value = data.draw(strategy, label=arg)
    kw = dict(batch_size=2, max_len=8, dtype=None)
    if kind == "paged":
        kw["block_size"] = 4
    elif arg == "block_size":
        return  # only a paged cache has blocks
    kw[arg] = value
    cls = {"static": KVCache, "concat": ConcatKVCache, "paged": PagedKVCache}[kind]
    cache, err = outcome(lambda: cls(c, **kw))
    if valid(value) or (arg == "max_len" and value is None and kind != "static"):
        kw["max_len"] = CONTEXT if kw["max_len"] is None else kw["max_len"]
        if too_big(err, arg):
            return
        assert_ok(err)
        assert cache.seq_lens == [0] * int_like(kw["batch_size"]) and cache.max_len == int_like(kw["max_len"])
    else:
        assert_clear(err, arg)


@FUZZ
@given(kind=st.sampled_from(["static", "concat", "paged"]), method=st.sampled_from(["crop", "keys", "fork", "select"]),
       value=st.one_of(ints(-3, 8), st.lists(st.one_of(st.integers(-1, 3), JUNK), max_size=3), JUNK))
def test_cache_methods(chat, kind, method, value):
    model, _ = chat
    cache = {"static": KVCache, "concat": ConcatKVCache, "paged": PagedKVCache}[kind](model.config, 2, 16)
    model(torch.randint(0, V, (2, 5)), cache=cache)
    before = usage(cache)
    out, err = outcome(lambda: getattr(cache, method)(value))
    valid = {"crop": int_in(0, 5), "keys": int_in(0, model.config.n_layers - 1), "fork": int_in(1),
             "select": lambda v: isinstance(v, list) and v and all(int_in(0, 1)(r) for r in v)}[method](value)
    if valid and not too_big(err, "fork"):
        assert_ok(err)
        if method == "crop":
            assert cache.seq_lens == [int_like(value)] * 2
        if method == "keys":
            assert out.shape == (2, model.config.n_kv_heads, 5, model.config.head_dim)
        if method in ("fork", "select"):
            assert out.seq_lens == [5] * (2 * int_like(value) if method == "fork" else len(value))
    else:
        assert_clear(err, {"crop": "seq_len", "keys": "layer", "fork": "fork", "select": "rows"}[method])
        assert usage(cache) == before


@FUZZ
@given(n_blocks=ints(-2, 20), block_size=ints(-2, 20))
def test_pool_constructor(chat, n_blocks, block_size):
    pool, err = outcome(lambda: PagedKVPool.for_model(chat[0], n_blocks, block_size))
    ok_blocks = int_in(1, 2 ** 20)  # lib keeps track of at most 2**20 blocks
    if ok_blocks(n_blocks) and int_in(1)(block_size):
        if too_big(err, "n_blocks"):
            return
        assert_ok(err)
        assert pool.usage()["free"] == int_like(n_blocks)
    else:
        assert_clear(err, "n_blocks" if not ok_blocks(n_blocks) else "block_size")


class AllocatorMachine(RuleBasedStateMachine):
    """Random reserve / fork / free / truncate on a small allocator, legal or not (a stale copy of a freed
    table, a table of another allocator, a bad length). Invariants after every step: each block's
    reference count is the number of live tables holding it, the free list is exactly the blocks nobody
    holds; a refused call changes nothing."""

    def __init__(self):
        super().__init__()
        self.a = BlockAllocator(6, 4)
        self.other = BlockAllocator(12, 4)
        self.tables = []  # live tables of self.a
        self.stale = []  # hand-made copies of tables that were freed since

    def snapshot(self):
        return list(self.a.refcounts), sorted(self.a.free_blocks()), [(list(t.blocks), t.n_tokens) for t in self.tables]

    def attempt(self, call, *names, extra=()):
        before = self.snapshot()
        result, err = outcome(call)
        if err is not None:
            assert_clear(err, *names, extra=extra)
            assert self.snapshot() == before
        return result, err

    @rule(n=st.one_of(st.integers(0, 30), ints(-2, 10)))
    def new_sequence(self, n):
        t = BlockTable()
        _, err = self.attempt(lambda: self.a.reserve(t, n), "n", "block", extra=(PoolExhaustedError,))
        if err is None:
            assert int_in(0)(n)
            t.n_tokens = int_like(n)
            self.tables.append(t)
        else:  # a valid length is refused only when the pool is too small for it
            assert not int_in(0)(n) or isinstance(err, PoolExhaustedError)

    @rule(i=st.integers(0, 10), n=st.integers(0, 9))
    def grow(self, i, n):
        if self.tables:
            t = self.tables[i % len(self.tables)]
            _, err = self.attempt(lambda: self.a.reserve(t, n), "block", extra=(PoolExhaustedError,))
            if err is None:
                t.n_tokens += n

    @rule(i=st.integers(0, 10))
    def fork(self, i):
        if self.tables:
            self.tables.append(self.a.fork(self.tables[i % len(self.tables)]))

    @rule(i=st.integers(0, 10))
    def free(self, i):
        if self.tables:
            t = self.tables.pop(i % len(self.tables))
            self.stale.append(BlockTable(list(t.blocks), t.n_tokens))
            self.a.free(t)

    @rule(i=st.integers(0, 10), n=ints(-2, 30))
    def truncate(self, i, n):
        if self.tables:
            t = self.tables[i % len(self.tables)]
            valid = int_in(0, t.n_tokens)(n)
            _, err = self.attempt(lambda: self.a.truncate(t, n), "truncate")
            assert (err is None) == valid

    @rule(i=st.integers(0, 10), op=st.sampled_from(["free", "fork", "truncate"]))
    def misuse_a_stale_copy(self, i, op):
        if self.stale:
            t = self.stale[i % len(self.stale)]
            if t.blocks and any(self.a.refcounts[b] < t.blocks.count(b) for b in set(t.blocks)):
                call = {"free": lambda: self.a.free(t), "fork": lambda: self.a.fork(t),
                        "truncate": lambda: self.a.truncate(t, 0)}[op]
                _, err = self.attempt(call, "table")
                assert err is not None

    @rule(n=st.integers(1, 40), op=st.sampled_from(["free", "fork"]))
    def misuse_a_foreign_table(self, n, op):
        t = BlockTable()
        self.other.reserve(t, n)
        t.n_tokens = n
        if any(b >= 6 or self.a.refcounts[b] < t.blocks.count(b) for b in t.blocks):
            _, err = self.attempt(lambda: getattr(self.a, op)(t), "table")
            assert err is not None
        self.other.free(t)

    @invariant()
    def counts_match_the_tables(self):
        held = [0] * 6
        for t in self.tables:
            for b in t.blocks:
                held[b] += 1
        assert self.a.refcounts == held
        assert sorted(self.a.free_blocks()) == [b for b in range(6) if held[b] == 0]


TestAllocatorMachine = AllocatorMachine.TestCase
TestAllocatorMachine.settings = settings(max_examples=30, stateful_step_count=25, deadline=timedelta(seconds=20),
                                         derandomize=True, database=None)


# ------------------------------------------------------------------------------------------- serving

SIM_ARGS = {
    "policy": (st.one_of(st.sampled_from(["max", "pow2", "oracle", "paged", "lru"]), JUNK),
               lambda v: isinstance(v, str) and v in ("max", "pow2", "oracle", "paged")),
    "kv_tokens": (st.one_of(st.sampled_from([256, 512, 1024, 2048, 100]), ints(-2, 64)), int_in(1)),
    "block_size": (st.one_of(st.sampled_from([16, 32]), ints(-2, 20)), int_in(1)),
    "max_len": (st.one_of(st.sampled_from([256, 1024]), ints(-2, 40)), int_in(1)),
    "watermark": (reals(-0.5, 1.5), lambda v: real(v) is not None and 0 <= real(v) < 1),
    "max_running": (ints(-2, 8), int_in(1)),
}


@FUZZ
@given(arg=st.sampled_from(sorted(SIM_ARGS)), data=st.data(),
       lens=st.lists(st.tuples(st.integers(1, 300), st.integers(1, 300)), max_size=12))
def test_simulate(arg, data, lens):
    """Any budget either serves every request (every step adds up to the budget) or is refused up front with
    a message that names the argument or the request that cannot fit; never a hang."""
    strategy, valid = SIM_ARGS[arg]
    value = data.draw(strategy, label=arg)
    kw = dict(policy="paged", kv_tokens=1024, block_size=16, max_len=1024, watermark=0.01, max_running=8)
    kw[arg] = value
    requests = [SimRequest(i, p, o) for i, (p, o) in enumerate(lens)]
    res, err = outcome(lambda: simulate(requests, **kw))
    if not valid(value):
        assert_clear(err, arg)
    elif err is not None:  # a valid setting can still be too small for these requests: said so, up front
        assert_clear(err, "kv_tokens", "max_len", "block_size", "request")
    else:
        assert res.n_requests == len(requests) and (not res.steps or res.waiting[-1] == 0)
        for i in range(res.steps):
            assert res.tokens[i] + res.future[i] + res.never[i] + res.free[i] == res.kv_tokens
            assert min(res.tokens[i], res.future[i], res.never[i], res.free[i]) >= 0
        s = res.summary()
        assert all(0 <= s[k] <= 100 for k in ("tokens %", "reserved, later %", "reserved, never %", "free %"))


SERVE_ARGS = {
    "policy": (st.one_of(st.sampled_from(["static", "continuous", "fifo"]), JUNK),
               lambda v: isinstance(v, str) and v in ("static", "continuous")),
    "max_batch": (ints(-2, 5), int_in(1)),
    "eos_id": (ints(-2, V + 2), optional(int_in(0, V - 1))),
    "block_size": (ints(-2, 20), int_in(1)),
    "n_blocks": (st.one_of(st.none(), ints(-2, 30)), optional(int_in(1))),
    "prefix_cache": (st.one_of(st.booleans(), JUNK), lambda v: isinstance(v, bool)),
}


@FUZZ
@given(arg=st.sampled_from(sorted(SERVE_ARGS)), data=st.data(),
       reqs=st.lists(st.tuples(st.lists(st.integers(0, V - 1), min_size=1, max_size=6), st.integers(1, 6)),
                     max_size=4))
def test_serve(chat, arg, data, reqs):
    """Valid settings serve every request exactly as generate() does for it alone (greedy, same eos); bad ones
    are refused by name, before any forward pass."""
    model, tok = chat
    strategy, valid = SERVE_ARGS[arg]
    value = data.draw(strategy, label=arg)
    kw = dict(policy="continuous", max_batch=3, eos_id=tok.eos_id, block_size=4, n_blocks=None, prefix_cache=True)
    kw[arg] = value
    requests = [ServeRequest(i, [1] + p, n) for i, (p, n) in enumerate(reqs)]
    res, err = outcome(lambda: serve(model, requests, **kw))
    if not valid(value):
        assert_clear(err, arg)
    elif err is not None:  # a pool too small for one request is refused up front, by name
        assert_clear(err, "n_blocks")
    else:
        eos = None if kw["eos_id"] is None else int_like(kw["eos_id"])
        for r, rec in zip(requests, res.records):
            alone = generate(model, r.prompt, r.max_new_tokens, eos_id=eos).new_tokens[0].tolist()
            if eos is not None and eos in alone:
                alone = alone[:alone.index(eos) + 1]
            assert rec.tokens == alone


@FUZZ
@given(prompt=st.one_of(st.lists(st.one_of(st.integers(-1, V), JUNK), max_size=4), JUNK,
                        st.builds(torch.tensor, st.lists(st.integers(0, V - 1), min_size=1, max_size=4))),
       max_new=st.one_of(ints(-2, 8), JUNK))
def test_serve_requests(chat, prompt, max_new):
    model, _ = chat
    res, err = outcome(lambda: serve(model, [ServeRequest(5, prompt, max_new)]))
    ok_prompt = (isinstance(prompt, torch.Tensor) and prompt.dim() == 1 and not prompt.dtype.is_floating_point
                 and prompt.dtype != torch.bool) or (
        isinstance(prompt, (list, tuple)) and prompt and all(int_in(0, V - 1)(t) for t in prompt))
    if ok_prompt and int_in(1, 60)(max_new):
        assert_ok(err)
        assert 1 <= len(res.records[0].tokens) <= int_like(max_new)
    else:
        assert_clear(err, "request 5")


# ------------------------------------------------------------------------------------- speculative decoding

SPEC_ARGS = {
    "k": (ints(-2, 10), int_in(1)),
    "max_new_tokens": (ints(-2, 70), int_in(1, CONTEXT)),
    "temperature": (reals(), lambda v: real(v) is not None and real(v) >= 0),
    "top_k": (ints(-2, 200), optional(int_in(1))),
    "top_p": (reals(-0.5, 1.5), optional(lambda v: real(v) is not None and 0 < real(v) <= 1)),
    "eos_id": (ints(-2, V + 2), optional(int_in(0, V - 1))),
    "seed": (ints(-2, 10), optional(int_in(0, 2 ** 63 - 1))),
}


@FUZZ
@given(arg=st.sampled_from(sorted(SPEC_ARGS)), data=st.data())
def test_speculative_generate(chat, draft, arg, data):
    from lib.speculative import speculative_generate
    model, tok = chat
    strategy, valid = SPEC_ARGS[arg]
    value = data.draw(strategy, label=arg)
    kw = dict(max_new_tokens=5, k=3, temperature=0.0, seed=0, eos_id=tok.eos_id)
    kw[arg] = value
    prompt = tok.encode("<s>")
    res, err = outcome(lambda: speculative_generate(model, draft, prompt, **kw))
    if valid(value):
        assert_ok(err)
        n = int_like(kw["max_new_tokens"])
        assert 1 <= res.n_new <= n and int(res.sequences.max()) < V
        if real(kw["temperature"]) == 0:  # greedy: exactly the target's own tokens
            eos = None if kw["eos_id"] is None else int_like(kw["eos_id"])
            alone = generate(model, prompt, n, eos_id=eos).sequences
            assert torch.equal(res.sequences, alone[:, :res.sequences.shape[1]])
    else:
        assert_clear(err, arg)


# ----------------------------------------------------------------------------------------------- widgets

def player_valid(name, v):
    from lib.widgets.player import TEMPERATURES, TOP_KS, TOP_PS
    steps = {"temperature": TEMPERATURES, "top_k": TOP_KS, "top_p": TOP_PS}
    if name in steps:
        v = {"top_k": 0, "top_p": 1.0}.get(name, v) if v is None else v
        return real(v) is not None and any(o == real(v) for _, o in steps[name])
    return {"seed": int_in(0, 2 ** 31 - 1), "use_cache": lambda x: isinstance(x, bool),
            "max_new_tokens": int_in(1, 64), "prompt": lambda x: isinstance(x, str)}[name](v)


WIDGET_VALUES = st.one_of(ints(-3, 70), reals(-1, 3), st.sampled_from([0.5, 0.7, 0.95, 1.0, 0.2, 1.5, 2.0, 8, 16, 3]),
                          st.sampled_from(["<s>", "<s>人工", "§", ""]), JUNK)


@settings(FUZZ)
@given(name=st.sampled_from(["temperature", "top_k", "top_p", "seed", "use_cache", "max_new_tokens", "prompt"]),
       value=WIDGET_VALUES)
def test_player_set(player, name, value):
    before = player.state()
    _, err = outcome(lambda: player.set(**{name: value}))
    if player_valid(name, value):
        assert_ok(err)
    else:
        assert_clear(err, name)
        assert player.state() == before


@pytest.fixture(scope="module")
def player(chat):
    from lib.widgets.player import GenerationPlayer
    return GenerationPlayer(*chat, max_new_tokens=4)


@pytest.fixture(scope="module")
def explorers(chat, draft):
    from lib.widgets.attention import AttentionExplorer
    from lib.widgets.blocks import BlockPoolWidget
    from lib.widgets.cost_curves import CostCurvesExplorer
    from lib.widgets.memory import MemoryExplorer
    from lib.widgets.roofline import RooflineExplorer
    from lib.widgets.sampling import SamplingExplorer
    from lib.widgets.speculative import SpeculativeExplorer
    model, tok = chat
    return {"memory": MemoryExplorer(), "blocks": BlockPoolWidget(model, tok), "sampling": SamplingExplorer(model, tok),
            "speculative": SpeculativeExplorer(model, draft, tok, max_new_tokens=6),
            "attention": AttentionExplorer(model, tok, max_new_tokens=4), "cost": CostCurvesExplorer(),
            "roofline": RooflineExplorer()}


def shown(w):
    """What a widget shows now, as comparable data."""
    for attr in ("state", "drawn", "html"):
        v = getattr(w, attr, None)
        if v is not None:
            v = v() if callable(v) else v
            return repr(v) + repr(getattr(w, "budget", None)) + repr(getattr(w, "summary", None))
    raise AssertionError(f"nothing to compare on {w}")


CONTROLS = [("memory", "batch"), ("memory", "context"), ("memory", "model"), ("memory", "dtype"),
            ("blocks", "n_blocks"), ("blocks", "n_samples"), ("blocks", "block_size"), ("blocks", "prompt_a"),
            ("sampling", "temperature"), ("sampling", "top_k"), ("sampling", "top_p"),
            ("speculative", "k"), ("speculative", "seed"), ("speculative", "temperature"),
            ("attention", "layer"), ("attention", "head"), ("attention", "step"),
            ("cost", "n"), ("cost", "loglog"), ("cost", "show"), ("roofline", "batch"), ("roofline", "context"),
            ("roofline", "machine")]


@settings(FUZZ)
@given(control=st.sampled_from(CONTROLS), value=st.one_of(WIDGET_VALUES, st.sampled_from(
    ["fp16", "fp7", "llama-2-7b", "gpt2", "both", "cumulative", "all", 4096, 1024, 256, 2048])))
def test_widgets_set(explorers, control, value):
    """Every explorer's set(): a value its control takes changes it; any other is refused by name and the
    widget shows exactly what it showed before (no clamping, no half-applied change)."""
    which, name = control
    w = explorers[which]
    before = shown(w)
    _, err = outcome(lambda: w.set(**{name: value}))
    if err is not None:
        assert_clear(err, name, "slider", "picker", "vocabulary")
        assert shown(w) == before


WIDGET_KW = {  # widget -> (how to build it with one keyword, how to set() it, the keywords both take)
    "player": (lambda m, t, d, kw: __import__("lib.widgets.player", fromlist=["x"]).GenerationPlayer(
        m, t, **{"max_new_tokens": 4, **kw}), ("temperature", "top_k", "top_p", "seed", "use_cache", "max_new_tokens")),
    "blocks": (lambda m, t, d, kw: __import__("lib.widgets.blocks", fromlist=["x"]).BlockPoolWidget(m, t, **kw),
               ("n_samples", "block_size", "n_blocks")),
    "memory": (lambda m, t, d, kw: __import__("lib.widgets.memory", fromlist=["x"]).MemoryExplorer(**kw),
               ("model", "dtype", "context", "batch")),
    "sampling": (lambda m, t, d, kw: __import__("lib.widgets.sampling", fromlist=["x"]).SamplingExplorer(m, t, **kw),
                 ("temperature", "top_k", "top_p")),
    "speculative": (lambda m, t, d, kw: __import__("lib.widgets.speculative", fromlist=["x"]).SpeculativeExplorer(
        m, d, t, **{"max_new_tokens": 6, **kw}), ("k", "temperature", "seed")),
}


@settings(FUZZ)
@given(which=st.sampled_from(sorted(WIDGET_KW)), data=st.data(), value=st.one_of(WIDGET_VALUES, st.sampled_from(
    ["fp16", "fp7", "llama-2-7b", "gpt2", 4096, 1024, 256, 2048, 300])))
def test_widget_constructors_refuse_what_set_refuses(chat, draft, which, data, value):
    """The same value through the constructor and through set() on a new widget: both accepted, or both
    refused with the same message (a constructor never clamps what set() would refuse)."""
    build, names = WIDGET_KW[which]
    name = data.draw(st.sampled_from(names), label="control")
    # set(x=None) keeps x where None is no value of x (the constructor then takes its default)
    keeps = which in ("memory", "speculative") or (which, name) == ("sampling", "temperature")
    assume(value is not None or not keeps)
    _, built = outcome(lambda: build(chat[0], chat[1], draft, {name: value}))
    w = build(chat[0], chat[1], draft, {})
    _, set_err = outcome(lambda: w.set(**{name: value}))
    assert (built is None) == (set_err is None), f"constructor: {built!r}; set(): {set_err!r}"
    if built is not None:
        assert type(built) is type(set_err) and str(built) == str(set_err)

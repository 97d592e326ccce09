"""A careless / hostile user's probe of lib's public API (issue 15): not a test, a count.

Every case feeds one bad (or borderline but valid) value into a public entry point or widget and sorts the
outcome into one of:

    clear      the bad value was refused with lib's error (ValueError / TypeError / IndexError, or a
               PoolExhaustedError / FileNotFoundError where that is the honest answer) whose message names
               the argument, and the state the call touched is as it was before
    sane       a valid value (a numpy seed, a 0-d tensor id, ...) was accepted with a sane result
    opaque     an error from deep inside torch / Python, or one whose message does not name the argument
    refused    a valid value was refused
    silent     a bad value was accepted: a wrong result, no error
    hang       the call did not return within the time bound (the alarm interrupts it)
    corrupted  the call failed, but left a cache, pool or widget changed

    python scripts/hostile_probe.py            # the counts, then every case that is not clear / sane
    python scripts/hostile_probe.py -v         # every case

It uses only names that exist since the branch point of issue 15, so it can be run on the code before and
after the fixes; a name that does not exist counts as opaque. Run it under a memory limit
(``(ulimit -v 16000000; python scripts/hostile_probe.py)``): before the fixes, a few cases allocate without
bound (those run in a child process, so the probe itself survives).
"""
from __future__ import annotations

import argparse
import contextlib
import io
import json
import signal
import sys
import tempfile
import traceback
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import torch

import lib
from lib import (ConcatKVCache, KVCache, MiniTransformer, ModelConfig, PagedKVCache, PagedKVPool, generate,
                 load_demo)

TIMEOUT = 6.0  # seconds before a call counts as a hang
CLEAR_TYPES = (ValueError, TypeError, IndexError)


class Hang(BaseException):
    pass


def _alarm(signum, frame):
    raise Hang()


CASES = []


def E(area, label, fn, *names, state=None, exc=(), isolate=False):
    """A bad value: it must be refused with a clear error naming one of ``names``. ``isolate``: run it in a
    child process (a huge allocation can hold the interpreter in C code past the alarm, or get it killed)."""
    CASES.append(dict(area=area, label=label, fn=fn, names=names, state=state, exc=exc, expect="error",
                      isolate=isolate))


def OK(area, label, fn, check=None, state=None):
    """A valid value: it must be accepted (``check(result)`` True when given)."""
    CASES.append(dict(area=area, label=label, fn=fn, names=(), state=state, exc=(), expect="ok", check=check))


def EITHER(area, label, fn, *names, check=None, state=None, exc=()):
    """Borderline: a sane result or a clear error are both fine; a hang, a raw error or corruption are not."""
    CASES.append(dict(area=area, label=label, fn=fn, names=names, state=state, exc=exc, expect="either",
                      check=check))


def run_isolated(c):
    """run_case in a forked child, which has TIMEOUT + 10 s to answer; killed after that (a hang), or dead
    (killed by the system: a crash)."""
    import multiprocessing as mp
    ctx = mp.get_context("fork")
    parent, child = ctx.Pipe(duplex=False)
    proc = ctx.Process(target=lambda: child.send(run_case(c, isolated=True)))
    proc.start()
    if parent.poll(TIMEOUT + 10):
        result = parent.recv()
        proc.join()
        return result
    if proc.is_alive():
        proc.kill()
        proc.join()
        return "hang", f"no answer within {TIMEOUT + 10:.0f} s (stuck in C code: the alarm could not stop it)"
    return "opaque", f"the process died (exit code {proc.exitcode}): killed by the system?"


def run_case(c, isolated=False):
    """-> (outcome, detail)."""
    if c.get("isolate") and not isolated:
        return run_isolated(c)
    fn, state = c["fn"], c["state"]
    if state is not None:  # fn() builds the objects and returns (call, state_of)
        try:
            call, state_of = fn()
        except BaseException as e:  # the setup itself failed (a missing name on an old branch)
            return "opaque", f"setup failed: {type(e).__name__}: {e}"
        fn = call
    before = state_of() if state is not None else None
    signal.signal(signal.SIGALRM, _alarm)
    signal.setitimer(signal.ITIMER_REAL, TIMEOUT)
    try:
        with contextlib.redirect_stdout(io.StringIO()) as out:
            result = fn()
        signal.setitimer(signal.ITIMER_REAL, 0)
    except Hang:
        return "hang", f"no answer within {TIMEOUT:.0f} s"
    except BaseException as e:
        signal.setitimer(signal.ITIMER_REAL, 0)
        msg = f"{type(e).__name__}: {e}"
        if state is not None:
            try:
                after = state_of()
            except BaseException as e2:
                return "corrupted", f"{msg} | state unreadable after: {type(e2).__name__}: {e2}"
            if after != before:
                return "corrupted", f"{msg} | state {before} -> {after}"
        if c["expect"] == "ok":
            return "refused", msg
        clear_type = isinstance(e, CLEAR_TYPES + tuple(c["exc"]))
        named = any(_words(n) in _words(str(e)) for n in c["names"])
        return ("clear" if clear_type and named else "opaque"), msg
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
    if c["expect"] == "error":
        return "silent", f"accepted, returned {_short(result)}" + (f" (printed {out.getvalue()[:80]!r})"
                                                                      if out.getvalue() else "")
    check = c.get("check")
    if check is not None:
        try:
            ok = check(result)
        except BaseException as e:
            ok, result = False, f"{result!r:.60} (check raised {type(e).__name__}: {e})"
        if not ok:
            return "silent", f"wrong result {_short(result)}"
    return "sane", _short(result)


def _words(s: str) -> str:
    """Lower case, with "top-p", "top p" and "top_p" all spelled the same."""
    return s.lower().replace("-", "_").replace(" ", "_")


def _short(x) -> str:
    s = repr(x)
    return s if len(s) < 100 else s[:97] + "..."


# ================================================================================================ the cases

torch.set_num_threads(1)
m, tok = load_demo("chat")
draft, _ = load_demo("draft")
c = m.config
V = c.vocab_size
ids = tok.encode("<s>")
hello = tok.encode("<s>hello")
eos = tok.eos_id


def gen(*a, **kw):
    return generate(m, kw.pop("input_ids", ids), *a, **kw)


# -- generate: every argument --------------------------------------------------------------------------------
for v in (0, -1, 2.5, "3", None, True, float("nan"), 10 ** 9):
    E("generate", f"max_new_tokens={v!r}", lambda v=v: gen(v), "max_new_tokens")
for v in (np.int64(3), torch.tensor(3)):
    OK("generate", f"max_new_tokens={v!r}", lambda v=v: gen(v), check=lambda r: r.new_tokens.shape[1] <= 3)
for v in (-1.0, float("nan"), float("inf"), "1", None, True):
    E("generate", f"temperature={v!r}", lambda v=v: gen(3, temperature=v, seed=0), "temperature")
OK("generate", "temperature=np.float32(0.7)", lambda: gen(3, temperature=np.float32(0.7), seed=0))
for v in (0, -1, 2.5, "3", True):
    E("generate", f"top_k={v!r}", lambda v=v: gen(3, temperature=1.0, top_k=v, seed=0), "top_k")
OK("generate", "top_k=np.int64(3)", lambda: gen(3, temperature=1.0, top_k=np.int64(3), seed=0))
OK("generate", "top_k=10**6 (more than the vocabulary)", lambda: gen(3, temperature=1.0, top_k=10 ** 6, seed=0))
for v in (0, -0.1, 1.5, float("nan"), "0.5", True):
    E("generate", f"top_p={v!r}", lambda v=v: gen(3, temperature=1.0, top_p=v, seed=0), "top_p")
for v in (-1, V, 2.5, "2", True, float("nan")):
    E("generate", f"eos_id={v!r}", lambda v=v: gen(3, eos_id=v), "eos_id")
OK("generate", "eos_id=np.int64(eos)", lambda: gen(10, eos_id=np.int64(eos)))
for v in (-1, 1.5, "7", True, 2 ** 70, float("nan")):
    E("generate", f"seed={v!r}", lambda v=v: gen(3, temperature=1.0, seed=v), "seed")
for v in (np.int64(3), torch.tensor(3), 0):
    OK("generate", f"seed={v!r}", lambda v=v: gen(3, temperature=1.0, seed=v))
OK("generate", "seed=5 with greedy decoding", lambda: gen(3, seed=5))
for v in ("yes", 1, 0, "no"):
    E("generate", f"trace={v!r}", lambda v=v: gen(3, trace=v), "trace")
for v in (0, -1, 2.5, "2", True):
    E("generate", f"num_samples={v!r}", lambda v=v: gen(3, num_samples=v), "num_samples")
for v in (-7, 2.5, "x", V, True):
    E("generate", f"pad_id={v!r}", lambda v=v: gen(10, eos_id=eos, pad_id=v), "pad_id")
for v in (-1, 2.5, "3", True):
    E("generate", f"trace_top_k={v!r}", lambda v=v: gen(3, trace=True, trace_top_k=v), "trace_top_k")
for v in ("no", None, 1, "yes"):
    E("generate", f"use_cache={v!r}", lambda v=v: gen(3, use_cache=v), "use_cache")
for v in ("foo", None, 3):
    E("generate", f"cache_kind={v!r}", lambda v=v: gen(3, cache_kind=v), "cache_kind")
for v in ("x", 5, {}):
    E("generate", f"cache={v!r}", lambda v=v: gen(3, cache=v), "cache")
E("generate", "cache of another model's shape", lambda: gen(3, cache=KVCache(draft.config, 1, 8)), "cache")
E("generate", "cache with batch 2 for one prompt", lambda: gen(3, cache=KVCache(c, 2, 8)), "batch")
for v in ([], [[]], "hello", [1.5], [-1], [V], [[1, 2], [3]], None, 5, [True], [[1], 2]):
    E("generate", f"input_ids={v!r}", lambda v=v: generate(m, v, 3), "prompt", "input_ids", "token")
for v in (torch.tensor([[1.0, 2.0]]), torch.tensor([[1, 2]], dtype=torch.uint8), torch.tensor([[True]]),
          torch.ones(1, 1, 2, dtype=torch.long), torch.ones(0, 3, dtype=torch.long),
          torch.ones(2, 0, dtype=torch.long), torch.full((1, 2), V)):
    E("generate", f"input_ids tensor {v.dtype} {tuple(v.shape)}", lambda v=v: generate(m, v, 3), "input_ids", "token")
OK("generate", "input_ids=np.array([1, 5])", lambda: generate(m, [np.int64(1), np.int64(5)], 2))
E("generate", "prompt longer than the context", lambda: generate(m, [1] * (c.max_seq_len + 1), 1),
  "context", "max_seq_len")
E("generate", "max_new_tokens past the context", lambda: generate(m, ids, c.max_seq_len + 5), "max_new_tokens")
E("generate", "cache= with use_cache=False", lambda: gen(3, cache=KVCache(c, 1, 8), use_cache=False), "cache")


def _full_cache():
    cache = KVCache(c, 1, 4)
    return (lambda: gen(8, cache=cache)), (lambda: cache.seq_len)


E("generate", "a passed cache too small for the run", _full_cache, "cache", "max_len", state=True)

# -- finding 2: a failed generate gives back the pool's blocks ---------------------------------------------


def _pool_gen(n, max_new=20, block_size=4, n_blocks=2, prompt=None):
    def setup():
        pool = PagedKVPool.for_model(m, n_blocks, block_size)
        cache = PagedKVCache(pool=pool)
        return (lambda: generate(m, prompt or hello, max_new, cache=cache, num_samples=n)), \
            (lambda: (pool.usage()["used"], cache.seq_lens, list(pool.allocator.refcounts)))
    return setup


from lib.paged import BlockAllocator, BlockTable, PoolExhaustedError, decode_step, forward_paged, prefill  # noqa

for n in (1, 3):
    E("2 pool", f"generate on a 2-block pool, num_samples={n}", _pool_gen(n), "pool", "block", state=True,
      exc=(PoolExhaustedError,))
E("2 pool", "generate on a 5-block pool, num_samples=2, runs out at decode", _pool_gen(2, 30, 4, 5), "pool", "block",
  state=True, exc=(PoolExhaustedError,))


def _prefix_too_long():
    pool = PagedKVPool.for_model(m, 6, 4)
    long = tok.encode("<s>hello world, hello world, hello world")
    t0 = pool.new_table("a")
    prefill(m, pool, t0, long[:21], prefix_cache=True)  # 5 full blocks get cached
    pool.free(t0)
    t = pool.new_table("b")
    return (lambda: prefill(m, pool, t, long, prefix_cache=True)), \
        (lambda: (pool.usage()["used"], t.blocks, t.n_tokens, list(pool.allocator.refcounts)))


E("2 pool", "too long prefill with prefix_cache=True", _prefix_too_long, "pool", "block", state=True,
  exc=(PoolExhaustedError,))

# -- finding 3: a forward that fails part-way leaves every cache as it was ----------------------------------


def _interrupted(kind):
    def setup():
        cache = {"static": lambda: KVCache(c, 1, 16), "concat": lambda: ConcatKVCache(c, 1, 16),
                 "paged": lambda: PagedKVCache(c, 1, 16, block_size=4)}[kind]()
        x = torch.tensor([hello])
        m(x, cache=cache)

        def boom(mod, inp, out):
            raise KeyboardInterrupt("simulated Ctrl-C in block 2")

        def call():
            h = m.blocks[2].register_forward_hook(boom)
            try:
                m(torch.tensor([[5]]), cache=cache)
            finally:
                h.remove()

        def state():
            lens = [cache.keys(l).shape[2] for l in range(c.n_layers)]
            return cache.seq_lens, lens
        return call, state
    return setup


for kind in ("static", "concat", "paged"):
    E("3 rollback", f"{kind} cache interrupted in block 2", _interrupted(kind), "simulated", state=True,
      exc=(KeyboardInterrupt,))


def _retry_logits(kind):
    make = {"static": lambda: KVCache(c, 1, 16), "concat": lambda: ConcatKVCache(c, 1, 16),
            "paged": lambda: PagedKVCache(c, 1, 16, block_size=4)}[kind]
    x = torch.tensor([hello])
    cache, fresh = make(), make()
    m(x, cache=cache)
    m(x, cache=fresh)

    def boom(mod, inp, out):
        raise KeyboardInterrupt

    h = m.blocks[2].register_forward_hook(boom)
    try:
        m(torch.tensor([[5]]), cache=cache)
    except KeyboardInterrupt:
        pass
    finally:
        h.remove()
    a, b = m(torch.tensor([[5]]), cache=cache), m(torch.tensor([[5]]), cache=fresh)
    return float((a - b).abs().max())


for kind in ("static", "concat", "paged"):
    OK("3 rollback", f"{kind} cache: the retried step equals an uninterrupted one", lambda k=kind: _retry_logits(k),
       check=lambda d: d < 1e-5)

# -- finding 4: config fields; NaN weights; non-finite logits ------------------------------------------------
base_cfg = dict(vocab_size=20, n_layers=1, d_model=8, n_heads=2, max_seq_len=16)
for field, v in (("vocab_size", 0), ("n_layers", 2.5), ("d_model", "64"), ("n_heads", 0), ("n_kv_heads", 3),
                 ("d_ff", -1), ("max_seq_len", 0), ("norm", "batchnorm"), ("activation", "relu"),
                 ("positions", "alibi"), ("rope_theta", 0), ("rope_theta", float("nan")),
                 ("rope_theta", float("inf")), ("norm_eps", -1), ("norm_eps", 0), ("norm_eps", float("nan")),
                 ("bias", "no"), ("qkv_bias", 1), ("tie_embeddings", None), ("head_dim", 0), ("attn_impl", "flash"),
                 ("vocab_size", True)):
    extra = {"positions": "rope"} if field == "rope_theta" else {}
    E("4 config", f"ModelConfig({field}={v!r})", lambda f=field, v=v, x=extra: ModelConfig(**{**base_cfg, **x, f: v}),
      field)
E("4 config", "ModelConfig rope with odd head_dim", lambda: ModelConfig(**{**base_cfg, "d_model": 6, "n_heads": 2,
                                                                          "positions": "rope"}), "head_dim")
E("4 config", "ModelConfig.from_dict unknown field", lambda: ModelConfig.from_dict({**base_cfg, "foo": 1}), "foo")
E("4 config", "MiniTransformer('config')", lambda: MiniTransformer("config"), "ModelConfig")


def _nan_model(value=float("nan")):
    bad = MiniTransformer(m.config).eval()
    bad.load_state_dict(m.state_dict())
    with torch.no_grad():
        bad.blocks[1].mlp.up_proj.weight[0, 0] = value
    return bad


E("4 non-finite", "generate with a NaN weight", lambda: generate(_nan_model(), ids, 5, eos_id=eos), "nan", "finite")
E("4 non-finite", "generate with an inf weight", lambda: generate(_nan_model(float("inf")), ids, 5, eos_id=eos),
  "nan", "finite", "inf")
E("4 non-finite", "generate sampling with a NaN weight",
  lambda: generate(_nan_model(), ids, 5, temperature=1.0, seed=0), "nan", "finite")


def _nan_checkpoint():
    d = Path(tempfile.mkdtemp())
    lib.save_checkpoint(_nan_model(), tok, d / "nan.safetensors")
    return lib.load_checkpoint(d / "nan.safetensors")


E("4 non-finite", "load_checkpoint of NaN weights", _nan_checkpoint, "nan", "finite")


def _truncated_checkpoint():
    d = Path(tempfile.mkdtemp())
    p = lib.save_checkpoint(m, tok, d / "t.safetensors")
    p.write_bytes(p.read_bytes()[:1000])
    return lib.load_checkpoint(p)


E("4 non-finite", "load_checkpoint of a truncated file", _truncated_checkpoint, "t.safetensors")
E("4 non-finite", "load_checkpoint of a missing file", lambda: lib.load_checkpoint("/nonexistent/x.safetensors"),
  "x.safetensors", exc=(FileNotFoundError,))
E("4 non-finite", "load_demo('nope')", lambda: load_demo("nope"), "nope")

# -- finding 8: serve -------------------------------------------------------------------------------------------
from lib.serving import (ServeRequest, SimRequest, request_stream, serve, simulate)  # noqa: E402

for v in (0, -3, 2.5, "3", None, True):
    E("8 serve", f"ServeRequest max_new_tokens={v!r}", lambda v=v: serve(m, [ServeRequest(0, hello, v)]),
      "max_new_tokens")
for v in (["1", "5"], [1.5, 5.0], [V], [-1], [], "hello", None, torch.tensor([[1, 2]]), [[1, 2]]):
    E("8 serve", f"ServeRequest prompt={v!r:.40}", lambda v=v: serve(m, [ServeRequest(0, v, 3)]), "prompt",
      "token")
OK("8 serve", "ServeRequest prompt of numpy ints", lambda: serve(m, [ServeRequest(0, list(np.array(hello)), 3)]))
OK("8 serve", "ServeRequest prompt as a 1-D tensor", lambda: serve(m, [ServeRequest(0, torch.tensor(hello), 3)]),
   check=lambda r: r.records[0].prompt_len == len(hello))
for v in (0, -1, 2.5, "16", True):
    E("8 serve", f"serve block_size={v!r}", lambda v=v: serve(m, [ServeRequest(0, hello, 3)], block_size=v),
      "block_size")
for v in (0, -1, 2.5, "4", True):
    E("8 serve", f"serve max_batch={v!r}", lambda v=v: serve(m, [ServeRequest(0, hello, 3)], max_batch=v),
      "max_batch")
for v in (0, -1, 2.5, 1):
    E("8 serve", f"serve n_blocks={v!r}", lambda v=v: serve(m, [ServeRequest(0, hello, 30)], n_blocks=v, block_size=4),
      "n_blocks")
for v in (-1, V, "2", 2.5, True):
    E("8 serve", f"serve eos_id={v!r}", lambda v=v: serve(m, [ServeRequest(0, hello, 3)], eos_id=v), "eos_id")
for v in ("yes", 1, None):
    E("8 serve", f"serve prefix_cache={v!r}", lambda v=v: serve(m, [ServeRequest(0, hello, 3)], prefix_cache=v),
      "prefix_cache")
E("8 serve", "serve policy='fifo'", lambda: serve(m, [ServeRequest(0, hello, 3)], policy="fifo"), "policy")
E("8 serve", "serve requests=[('a', 1)]", lambda: serve(m, [("a", 1)]), "ServeRequest")
E("8 serve", "serve requests=5", lambda: serve(m, 5), "requests")
E("8 serve", "serve with a prompt past the context", lambda: serve(m, [ServeRequest(0, [1] * 300, 3)]),
  "max_seq_len", "context")
OK("8 serve", "serve(m, []).summary()", lambda: serve(m, []).summary())

# -- findings 1, 9, 12: simulate ----------------------------------------------------------------------------------
EITHER("1 simulate", "simulate([SimRequest(0, 2040, 8)], 'paged', kv_tokens=2048)",
       lambda: simulate([SimRequest(0, 2040, 8)], "paged", kv_tokens=2048).summary(), "kv_tokens", "watermark")
EITHER("1 simulate", "simulate(request_stream(50, prompt_mean=1500), 'paged', kv_tokens=2048)",
       lambda: simulate(request_stream(50, prompt_mean=1500), "paged", kv_tokens=2048).summary(), "kv_tokens",
       "watermark")
for v in (2.0, 1.0, -1, float("nan"), "0.1", None, float("inf")):
    E("1 simulate", f"simulate watermark={v!r}",
      lambda v=v: simulate(request_stream(20), "paged", kv_tokens=4096, watermark=v).summary(), "watermark")
for out in (0, -1):
    for pol in ("paged", "pow2", "max", "oracle"):
        E("9 simulate", f"SimRequest(0, 5, {out}) under {pol}",
          lambda out=out, pol=pol: simulate([SimRequest(0, 5, out)], pol, kv_tokens=64, max_len=64).summary(),
          "output_len")
for v in (-5, 0, 2.5, "5"):
    E("9 simulate", f"SimRequest prompt_len={v!r}",
      lambda v=v: simulate([SimRequest(0, v, 5)], "paged", kv_tokens=64, max_len=64).summary(), "prompt_len")
for arg, v in (("kv_tokens", 0), ("kv_tokens", -16), ("kv_tokens", 2.5), ("kv_tokens", 100), ("block_size", 0),
               ("block_size", 2.5), ("max_len", 0), ("max_running", 0), ("max_running", 2.5), ("policy", "lru")):
    E("9 simulate", f"simulate {arg}={v!r}", lambda a=arg, v=v: simulate(request_stream(5), **{a: v}), arg)
E("9 simulate", "simulate requests=[(0, 5, 5)]", lambda: simulate([(0, 5, 5)], "paged"), "SimRequest")
OK("12 empty", "simulate([], 'paged').summary()", lambda: simulate([], "paged").summary())
OK("12 empty", "simulate([], 'max').summary()", lambda: simulate([], "max").summary())
OK("12 empty", "serve(m, []).timings()", lambda: serve(m, []).timings())
for arg, v in (("n", 0), ("n", 2.5), ("prompt_mean", float("nan")), ("prompt_mean", float("inf")), ("sigma", 0),
               ("max_len", 1), ("seed", "x"), ("output_mean", -1)):
    E("9 simulate", f"request_stream {arg}={v!r}", lambda a=arg, v=v: request_stream(**{a: v}), arg)

# -- finding 10: lib.hf ------------------------------------------------------------------------------------------
from lib import hf  # noqa: E402

E("10 hf", "config_from_hf(SimpleNamespace())", lambda: hf.config_from_hf(SimpleNamespace()), "config")
E("10 hf", "config_from_hf(None)", lambda: hf.config_from_hf(None), "config")
E("10 hf", "config_from_hf gpt2 without fields",
  lambda: hf.config_from_hf(SimpleNamespace(architectures=["GPT2LMHeadModel"], activation_function="gelu")),
  "n_layer", "config")
E("10 hf", "from_hf(42)", lambda: hf.from_hf(42), "from_hf")
E("10 hf", "from_hf('/nonexistent')", lambda: hf.from_hf("/nonexistent"), "nonexistent", exc=(FileNotFoundError,))


def _hf_folder(with_tokenizer=False, truncate=False):
    import transformers
    d = Path(tempfile.mkdtemp())
    cfg = transformers.GPT2Config(vocab_size=64, n_positions=32, n_embd=16, n_layer=1, n_head=2)
    transformers.GPT2LMHeadModel(cfg).save_pretrained(d)
    if truncate:
        w = next(d.glob("*.safetensors"))
        w.write_bytes(w.read_bytes()[:500])
    return d


E("10 hf", "load_tokenizer(folder without a tokenizer)", lambda: hf.load_tokenizer(_hf_folder()), "tokenizer",
  exc=(FileNotFoundError,))


def _env_truncated():
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        r = hf.load_from_env({hf.ENV_VAR: str(_hf_folder(truncate=True))})
    return r, out.getvalue()


OK("10 hf", "load_from_env with truncated weights prints and returns None", _env_truncated,
   check=lambda r: r[0] is None and "could not be loaded" in r[1] and ".safetensors" in r[1])
E("10 hf", "from_hf(max_seq_len=0)", lambda: hf.from_hf(_hf_folder(), max_seq_len=0), "max_seq_len")

# -- findings 14, 15, 16, 17: caches, pool, allocator -----------------------------------------------------------
for v in (0, 2.5, -4, "4", True):
    E("14 paged", f"PagedKVCache(c, 1, 8, block_size={v!r})", lambda v=v: PagedKVCache(c, 1, 8, block_size=v),
      "block_size")
for v in (0, -1, 2.5, "4"):
    E("14 paged", f"PagedKVPool n_blocks={v!r}", lambda v=v: PagedKVPool.for_model(m, v, 4), "n_blocks")
    E("14 paged", f"PagedKVPool block_size={v!r}", lambda v=v: PagedKVPool.for_model(m, 4, v), "block_size")
E("14 paged", "PagedKVCache(pool='x')", lambda: PagedKVCache(c, pool="x"), "pool")
E("14 paged", "PagedKVCache with 2 tables for batch 1",
  lambda: PagedKVCache(c, 1, pool=PagedKVPool(c, 4, 4), tables=[BlockTable(), BlockTable()]), "batch_size", "table")
for cls in (KVCache, ConcatKVCache):
    n = cls.__name__
    for arg, v in (("batch_size", 0), ("batch_size", 2.5), ("max_len", 0), ("max_len", c.max_seq_len + 1),
                   ("max_len", "8")):
        kw = {"batch_size": 1, "max_len": 8, arg: v}
        E("14 caches", f"{n}({arg}={v!r})", lambda cls=cls, kw=kw: cls(c, **kw), arg)
    E("14 caches", f"{n}(config='x')", lambda cls=cls: cls("x", 1, 8), "ModelConfig")
    E("14 caches", f"{n}(dtype=torch.long)", lambda cls=cls: cls(c, 1, 8, dtype=torch.long), "dtype")
    E("14 caches", f"{n}(dtype='float32')", lambda cls=cls: cls(c, 1, 8, dtype="float32"), "dtype")
    E("14 caches", f"{n}(device='gpu9')", lambda cls=cls: cls(c, 1, 8, device="gpu9"), "device", "gpu9")
for cls in (KVCache, ConcatKVCache, lambda *a: PagedKVCache(*a, block_size=4)):
    name = getattr(cls, "__name__", "PagedKVCache")
    name = "PagedKVCache" if name == "<lambda>" else name

    def filled(cls=cls):
        cache = cls(c, 1, 16)
        m(torch.tensor([hello]), cache=cache)
        return cache

    for v in (-1, 2.5, 99, "3", True):
        def crop(v=v, filled=filled):
            cache = filled()
            return (lambda: cache.crop(v)), (lambda: cache.seq_lens)
        E("14 caches", f"{name}.crop({v!r})", crop, "crop", "seq_len", state=True)
    for v in (99, -1, "0", 1.5):
        E("14 caches", f"{name}.keys({v!r})", lambda v=v, filled=filled: filled().keys(v), "layer")
    for v in (0, -1, 2.5):
        E("14 caches", f"{name}.fork({v!r})", lambda v=v, filled=filled: filled().fork(v), "fork", "copies")
    for v in ([], [5], [0.5], "0"):
        E("14 caches", f"{name}.select({v!r})", lambda v=v, filled=filled: filled().select(v), "rows")
    OK("14 caches", f"{name}.keys(np.int64(1))", lambda filled=filled: filled().keys(np.int64(1)))
    OK("14 caches", f"{name}.crop(np.int64(2))", lambda filled=filled: filled().crop(np.int64(2)))

E("15 context", "m(ones(1, 69)) with a 64-position cache",
  lambda: m(torch.ones(1, 69, dtype=torch.long), cache=KVCache(c, 1, 64)), "context", "max_seq_len")
E("15 context", "m(ones(1, 257))", lambda: m(torch.ones(1, c.max_seq_len + 1, dtype=torch.long)), "context",
  "max_seq_len")
E("15 context", "m(ones(1, 9)) on a cache of max_len 8",
  lambda: m(torch.ones(1, 9, dtype=torch.long), cache=KVCache(c, 1, 8)), "max_len")


def _double_free():
    a = BlockAllocator(4, 4)
    t = BlockTable()
    a.reserve(t, 5)
    t.n_tokens = 5
    copy = BlockTable(list(t.blocks), t.n_tokens)
    a.free(t)
    return (lambda: a.free(copy)), (lambda: (list(a.refcounts), a.free_blocks()))


E("16 allocator", "free a hand-copied BlockTable twice", _double_free, "free", "block", state=True)


def _foreign_fork():
    a, b = BlockAllocator(4, 4), BlockAllocator(16, 4)
    t = BlockTable()
    b.reserve(t, 40)
    t.n_tokens = 40
    return (lambda: a.fork(t)), (lambda: (list(a.refcounts), a.free_blocks()))


E("16 allocator", "fork a table of another allocator", _foreign_fork, "table", "block", "allocator", state=True)


def _alloc_case(call):
    def setup():
        a = BlockAllocator(4, 4)
        t = BlockTable()
        a.reserve(t, 3)
        t.n_tokens = 3
        return (lambda: call(a, t)), (lambda: (list(a.refcounts), a.free_blocks(), t.blocks, t.n_tokens))
    return setup


for v in (-1, 2.5, "2", 10 ** 6):
    E("16 allocator", f"reserve(table, {v!r})", _alloc_case(lambda a, t, v=v: a.reserve(t, v)), "n", "block",
      state=True, exc=(PoolExhaustedError,))
for v in (-1, 2.5, 99):
    E("16 allocator", f"truncate(table, {v!r})", _alloc_case(lambda a, t, v=v: a.truncate(t, v)), "truncate",
      state=True)
E("16 allocator", "match_prefix on a non-empty table", _alloc_case(lambda a, t: a.match_prefix(t, [1, 2, 3, 4, 5])),
  "empty", state=True)
E("16 allocator", "register_prefix with too few ids", _alloc_case(lambda a, t: a.register_prefix(t, [1])),
  "register_prefix", "ids", state=True)
for arg, v in (("n_blocks", 0), ("n_blocks", 2.5), ("block_size", 0), ("block_size", "4")):
    E("16 allocator", f"BlockAllocator({arg}={v!r})", lambda a=arg, v=v: BlockAllocator(**{"n_blocks": 4,
                                                                                           "block_size": 4, a: v}), arg)


def _paged_fn(call):
    def setup():
        pool = PagedKVPool.for_model(m, 8, 4)
        t = pool.new_table("a")
        prefill(m, pool, t, hello)
        return (lambda: call(pool, t)), (lambda: (pool.usage(), t.blocks, t.n_tokens))
    return setup


E("16 paged fns", "decode_step with 2 tokens for 1 table", _paged_fn(lambda p, t: decode_step(m, p, [t], [5, 6])),
  "token", state=True)
E("16 paged fns", "decode_step with token V", _paged_fn(lambda p, t: decode_step(m, p, [t], [V])), "token",
  state=True)
E("16 paged fns", "decode_step with token 'a'", _paged_fn(lambda p, t: decode_step(m, p, [t], ["a"])), "token",
  state=True)
E("16 paged fns", "forward_paged with an empty token list", _paged_fn(lambda p, t: forward_paged(m, p, [t], [[]])),
  "token", state=True)
E("16 paged fns", "forward_paged with 1.5", _paged_fn(lambda p, t: forward_paged(m, p, [t], [[1.5]])), "token",
  state=True)
E("16 paged fns", "prefill of a shorter prompt", _paged_fn(lambda p, t: prefill(m, p, t, hello[:2])), "prompt",
  "table", state=True)
E("16 paged fns", "forward_paged on the pool of another model",
  _paged_fn(lambda p, t: forward_paged(draft, p, [t], [[5]])), "pool", "model", state=True)

# -- finding 17: token dtypes, filter_logits, tokenizer, trace, speculative ----------------------------------------
E("17 forward", "m(uint8 ids)", lambda: m(torch.tensor([[1, 5]], dtype=torch.uint8)), "input_ids", "dtype")
E("17 forward", "m(ones(0, 3))", lambda: m(torch.ones(0, 3, dtype=torch.long)), "input_ids", "empty")
E("17 forward", "m(ones(3))", lambda: m(torch.ones(3, dtype=torch.long)), "input_ids")
E("17 forward", "m(float ids)", lambda: m(torch.ones(1, 3)), "input_ids")
E("17 forward", "m([1, 2])", lambda: m([1, 2]), "input_ids")
E("17 forward", "m(ids, cache='x')", lambda: m(torch.tensor([ids]), cache="x"), "cache")
E("17 forward", "m(ids, record='x')", lambda: m(torch.tensor([ids]), record="x"), "record")
E("17 forward", "m(ids, lengths=[2])", lambda: m(torch.tensor([ids]), lengths=[2]), "lengths")
E("17 forward", "m(ids, lengths='x')", lambda: m(torch.tensor([ids]), lengths="x"), "lengths")
from lib.sampling import choose, filter_logits, sampling_probs  # noqa: E402

L = torch.randn(1, 10)
for kw in (dict(top_k=0), dict(top_k=-1), dict(top_k=2.5), dict(top_p=0), dict(top_p=1.5), dict(top_p=float("nan")),
           dict(temperature=0), dict(temperature=-1), dict(temperature=float("nan")), dict(temperature="1")):
    k = next(iter(kw))
    E("17 sampling", f"filter_logits(L, **{kw})", lambda kw=kw: filter_logits(L, **{"temperature": 1.0, **kw}), k)
E("17 sampling", "filter_logits of 1-D logits", lambda: filter_logits(torch.randn(10), 1.0, top_p=0.5), "logits")
E("17 sampling", "filter_logits of a list", lambda: filter_logits([1.0, 2.0], 1.0), "logits")
E("17 sampling", "choose of 1-D logits", lambda: choose(torch.randn(10), 1.0), "logits")
E("17 sampling", "choose(L, temperature=-1)", lambda: choose(L, -1.0), "temperature")
E("17 sampling", "choose of NaN logits", lambda: choose(torch.full((1, 10), float("nan")), 1.0), "nan", "finite")
E("17 sampling", "sampling_probs(L, top_p=0)", lambda: sampling_probs(L, 1.0, top_p=0), "top_p")
for v in (-1, 2.5, "0", True):
    E("17 sampling", f"make_generator(seed={v!r})", lambda v=v: lib.sampling.make_generator(v, "cpu"), "seed")
OK("17 sampling", "make_generator(np.int64(3))", lambda: lib.sampling.make_generator(np.int64(3), "cpu"))

for v in ([np.int64(5)], torch.tensor(5), np.int64(5), np.array([5, 6]), torch.tensor([5, 6]), 5):
    OK("17 tokenizer", f"tok.decode({v!r})", lambda v=v: tok.decode(v), check=lambda s: isinstance(s, str) and s)
for v in ([-1], [V], [2.5], ["a"], None, [True], torch.tensor([[5]]), torch.tensor([1.0])):
    E("17 tokenizer", f"tok.decode({v!r})", lambda v=v: tok.decode(v), "token", "id")
E("17 tokenizer", "tok.encode(5)", lambda: tok.encode(5), "str")
E("17 tokenizer", "tok.encode('x', unknown='drop')", lambda: tok.encode("x", unknown="drop"), "unknown")
E("17 tokenizer", "tok.encode('x', add_bos='yes')", lambda: tok.encode("x", add_bos="yes"), "add_bos")
E("17 tokenizer", "tok.decode([5], skip_special='yes')", lambda: tok.decode([5], skip_special="yes"), "skip_special")
E("17 tokenizer", "CharTokenizer(['ab'])", lambda: lib.CharTokenizer(["ab"]), "character")

tr = generate(m, hello, 4, trace=True).trace
for kw in (dict(layer=99), dict(layer=-1), dict(layer="0"), dict(head=99), dict(batch=5), dict(layer=1.5)):
    E("17 trace", f"trace.attention_grid(**{kw})", lambda kw=kw: tr.attention_grid(**kw), next(iter(kw)))
OK("17 trace", "trace.attention_grid(layer=np.int64(1))", lambda: tr.attention_grid(layer=np.int64(1)))
E("17 trace", "trace.kv_computed(layer=99)", lambda: tr.kv_computed(99), "layer")
E("17 trace", "trace.total_kv_computed(layer=99)", lambda: tr.total_kv_computed(99), "layer")
E("17 trace", "trace.tokens(batch=5)", lambda: tr.tokens(5), "batch")
E("17 trace", "trace.rows(batch=5)", lambda: tr.rows(None, 5), "batch")
E("17 trace", "trace.table(batch=-1)", lambda: tr.table(None, -1), "batch")

from lib import speculative as sp  # noqa: E402

p = torch.tensor([0.5, 0.3, 0.2])
q = torch.tensor([0.2, 0.3, 0.5])
for v in (1.5, -1, 3, "1", True, float("nan")):
    E("17 speculative", f"acceptance_probability(p, q, {v!r})", lambda v=v: sp.acceptance_probability(p, q, v), "x")
for v in (np.int64(1), torch.tensor(1)):
    OK("17 speculative", f"acceptance_probability(p, q, {v!r})", lambda v=v: sp.acceptance_probability(p, q, v),
       check=lambda a: a == 1.0)
E("17 speculative", "acceptance_probability with NaN p",
  lambda: sp.acceptance_probability(torch.tensor([float("nan"), 0.5, 0.5]), q, 1), "p")
E("17 speculative", "acceptance_probability with p a list", lambda: sp.acceptance_probability([0.5, 0.5], q, 1), "p")
E("17 speculative", "residual_distribution of 2-D p", lambda: sp.residual_distribution(p[None], q), "p")
E("17 speculative", "accept_or_resample(x=5)", lambda: sp.accept_or_resample(p, q, 5), "x")
for kw in (dict(k=0), dict(k=-1), dict(k=2.5), dict(k="4"), dict(k=True), dict(max_new_tokens=0),
           dict(temperature=float("nan")), dict(seed=1.5), dict(seed=True), dict(eos_id=-1), dict(eos_id="2"),
           dict(top_k=0), dict(top_p=0)):
    args = {"max_new_tokens": 5, **kw}
    E("17 speculative", f"speculative_generate(**{kw})", lambda a=args: sp.speculative_generate(m, draft, ids, **a),
      next(iter(kw)))
OK("17 speculative", "speculative_generate(seed=np.int64(1), temperature=1)",
   lambda: sp.speculative_generate(m, draft, ids, 5, temperature=1.0, seed=np.int64(1)))
OK("17 speculative", "speculative_generate(k=np.int64(2))", lambda: sp.speculative_generate(m, draft, ids, 5,
                                                                                              k=np.int64(2)))
E("17 speculative", "speculative_generate with a batch of 2",
  lambda: sp.speculative_generate(m, draft, [ids, ids], 5), "batch")
E("17 speculative", "speculative_generate draft=None", lambda: sp.speculative_generate(m, None, ids, 5), "draft")
for kw in (dict(temperature=float("nan")), dict(temperature=0), dict(n_tokens=3), dict(min_prob=float("nan")),
           dict(temperature="1")):
    E("17 speculative", f"next_token_probs(**{kw})", lambda kw=kw: sp.next_token_probs(m, ids, **kw),
      next(iter(kw)))
E("17 speculative", "distribution_check(runs=0)", lambda: sp.distribution_check(m, draft, ids, runs=0), "runs")
E("17 speculative", "measure_acceptance(prompts=[])", lambda: sp.measure_acceptance(m, draft, []), "prompts")
E("17 speculative", "measure_acceptance(ks=[0])", lambda: sp.measure_acceptance(m, draft, [ids], ks=[0]), "k")
E("17 speculative", "chi_square_test({}, ...)", lambda: sp.chi_square_test({}, {"a": 1.0}), "observ")

# -- costs ---------------------------------------------------------------------------------------------------------
from lib import costs  # noqa: E402

for a_ in ((c, -1), (c, 2.5), (c, 10, 1, "fp7"), ("nope", 10), (None, 10)):
    E("costs", f"kv_cache_bytes(config, {', '.join(map(repr, a_[1:]))})" if a_[0] is c else
      f"kv_cache_bytes{a_!r}", lambda a_=a_: lib.kv_cache_bytes(*a_), "n_tokens", "batch", "dtype",
      "model", "config", "nope")
E("costs", "resolve_model('nope')", lambda: costs.resolve_model("nope"), "nope")
E("costs", "step_cost(context=0)", lambda: costs.step_cost("chat", 0), "context")
E("costs", "decode_cost(context=2.5)", lambda: costs.decode_cost("chat", 2.5), "context")
E("costs", "prefill_cost(batch=0)", lambda: costs.prefill_cost("chat", 4, 0), "batch")
E("costs", "kv_computations(-1, 3, True)", lambda: costs.kv_computations(-1, 3, True), "prompt_len")
E("costs", "crossover_batch(context=-5)", lambda: costs.crossover_batch("chat", -5), "context")

# -- widgets: constructors refuse what set() refuses (finding 13), set() never depends on history (11) ---------------
from lib.widgets.attention import AttentionExplorer  # noqa: E402
from lib.widgets.blocks import BlockPoolWidget  # noqa: E402
from lib.widgets.cost_curves import CostCurvesExplorer  # noqa: E402
from lib.widgets.memory import MemoryExplorer  # noqa: E402
from lib.widgets.player import GenerationPlayer  # noqa: E402
from lib.widgets.roofline import RooflineExplorer  # noqa: E402
from lib.widgets.sampling import SamplingExplorer  # noqa: E402
from lib.widgets.speculative import SpeculativeExplorer  # noqa: E402
from lib.widgets.worked import WorkedExplorer  # noqa: E402

tiny, tiny_tok = load_demo("tiny")

for kw in (dict(max_new_tokens=1000), dict(max_new_tokens=0), dict(seed=-5), dict(seed=2 ** 40), dict(seed=1.5),
           dict(temperature=0.33), dict(temperature=float("nan")), dict(top_k=7), dict(top_p=0.33), dict(layer=99),
           dict(bar_k=0), dict(use_cache="no"), dict(prompt=5)):
    E("13 widgets", f"GenerationPlayer(**{kw})", lambda kw=kw: GenerationPlayer(m, tok, **kw), next(iter(kw)))
OK("13 widgets", "GenerationPlayer(seed=np.int64(3))", lambda: GenerationPlayer(m, tok, seed=np.int64(3)).state())


def _player_set(kw):
    def setup():
        w = GenerationPlayer(m, tok, max_new_tokens=4)
        return (lambda: w.set(**kw)), (lambda: json.dumps(w.state(), sort_keys=True, default=str))
    return setup


for kw in (dict(seed=2 ** 40), dict(seed=-1), dict(max_new_tokens=0), dict(max_new_tokens=1000),
           dict(max_new_tokens=2.5), dict(temperature=0.33), dict(use_cache="no"), dict(foo=1), dict(seed="3")):
    E("13 widgets", f"GenerationPlayer.set(**{kw})", _player_set(kw), next(iter(kw)), state=True)
for kw in (dict(max_new_tokens=0), dict(max_new_tokens=-1), dict(max_new_tokens=2.5), dict(layer=99), dict(head=99),
           dict(step=99), dict(head="some")):
    E("13 widgets", f"AttentionExplorer(**{kw})", lambda kw=kw: AttentionExplorer(m, tok, **kw), next(iter(kw)))


def _attn_set(kw):
    def setup():
        w = AttentionExplorer(m, tok, max_new_tokens=4)
        return (lambda: w.set(**kw)), (lambda: json.dumps(w.drawn, sort_keys=True, default=str))
    return setup


for kw in (dict(layer=99), dict(step=-1), dict(head="x"), dict(layer=1.5)):
    E("13 widgets", f"AttentionExplorer.set(**{kw})", _attn_set(kw), next(iter(kw)), state=True)
for kw in (dict(n_blocks=2), dict(n_blocks=100), dict(n_samples=9), dict(n_samples=0), dict(prompts=("a", "b")),
           dict(block_size=3), dict(seed=-1), dict(seed=1.5), dict(prompts="abc")):
    E("13 widgets", f"BlockPoolWidget(**{kw})", lambda kw=kw: BlockPoolWidget(m, tok, **kw), next(iter(kw)))


def _blocks_set(kw):
    def setup():
        w = BlockPoolWidget(m, tok)
        return (lambda: w.set(**kw)), (lambda: json.dumps(w.state(), sort_keys=True, default=str))
    return setup


for kw in (dict(n_blocks=2), dict(block_size=3), dict(n_samples=9), dict(n_blocks=2.5), dict(prompt_a=5)):
    E("13 widgets", f"BlockPoolWidget.set(**{kw})", _blocks_set(kw), next(iter(kw)), state=True)
for kw in (dict(batch=1000), dict(batch=0), dict(context=0), dict(context=10 ** 7), dict(model="nope"),
           dict(dtype="fp7"), dict(batch=2.5)):
    E("11 widgets", f"MemoryExplorer(**{kw})", lambda kw=kw: MemoryExplorer(**kw), next(iter(kw)))


def _memory_set(kw, first=None):
    def setup():
        w = MemoryExplorer()
        if first:
            try:
                w.set(**first)
            except ValueError:
                pass
        return (lambda: w.set(**kw)), (lambda: (w.budget, w.batch_box.value, w.context_box.value))
    return setup


for kw in (dict(batch=1000), dict(batch=0), dict(context=0), dict(model="nope"), dict(dtype="fp7")):
    E("11 widgets", f"MemoryExplorer.set(**{kw})", _memory_set(kw), next(iter(kw)), state=True)


def _memory_history():
    a = MemoryExplorer()
    try:
        a.set(batch=1000)
    except ValueError:
        pass
    b = MemoryExplorer()
    try:
        b.set(batch=2000)
        b.set(batch=1000)
    except ValueError:
        pass
    return (a.budget.batch, a.batch_box.value) == (b.budget.batch, b.batch_box.value)


OK("11 widgets", "MemoryExplorer: set(batch=1000) does not depend on history", _memory_history, check=bool)
for kw in (dict(temperature=3.0), dict(temperature=float("nan")), dict(top_k=0), dict(top_p=0), dict(top_p=0.01),
           dict(n_bars=0), dict(prompt="§")):
    E("13 widgets", f"SamplingExplorer(**{kw})", lambda kw=kw: SamplingExplorer(m, tok, **kw), next(iter(kw)),
      "vocabulary")


def _sampling_set(kw):
    def setup():
        w = SamplingExplorer(m, tok)
        return (lambda: w.set(**kw)), (lambda: (w.settings(), w.prompt))
    return setup


for kw in (dict(temperature=3.0), dict(temperature=float("nan")), dict(top_k=0), dict(top_p=0.01)):
    E("13 widgets", f"SamplingExplorer.set(**{kw})", _sampling_set(kw), next(iter(kw)), state=True)
for kw in (dict(k=0), dict(k=9), dict(temperature=0.33), dict(seed="x"), dict(seed=-1), dict(max_new_tokens=0),
           dict(max_new_tokens=2.5)):
    E("13 widgets", f"SpeculativeExplorer(**{kw})", lambda kw=kw: SpeculativeExplorer(m, draft, tok, **kw),
      next(iter(kw)))


def _spec_set(kw):
    def setup():
        w = SpeculativeExplorer(m, draft, tok, max_new_tokens=6)
        return (lambda: w.set(**kw)), (lambda: (w.html, w.k_slider.value, w.seed.value))
    return setup


for kw in (dict(k=0), dict(seed=-1), dict(seed=2 ** 40)):
    E("13 widgets", f"SpeculativeExplorer.set(**{kw})", _spec_set(kw), next(iter(kw)), state=True)
for kw in (dict(max_new_tokens=0), dict(max_new_tokens=2.5), dict(prompt="§")):
    E("13 widgets", f"WorkedExplorer(**{kw})", lambda kw=kw: WorkedExplorer(tiny, tiny_tok, **kw), next(iter(kw)),
      "vocabulary")


def _worked_step(v):
    def setup():
        w = WorkedExplorer(tiny, tiny_tok, max_new_tokens=4)
        return (lambda: w.set_step(v)), (lambda: (w.step, w.html))
    return setup


for v in (99, -1, 1.5):
    E("13 widgets", f"WorkedExplorer.set_step({v!r})", _worked_step(v), "step", state=True)
for kw in (dict(n=0), dict(n=2.5), dict(loglog="no"), dict(model="nope"), dict(show="x"), dict(view="x")):
    E("13 widgets", f"CostCurvesExplorer(**{kw})", lambda kw=kw: CostCurvesExplorer(**kw), next(iter(kw)))


def _cost_set(kw):
    def setup():
        w = CostCurvesExplorer()
        return (lambda: w.set(**kw)), (lambda: w.state)
    return setup


for kw in (dict(loglog="no"), dict(n=0), dict(model="nope")):
    E("13 widgets", f"CostCurvesExplorer.set(**{kw})", _cost_set(kw), next(iter(kw)), state=True)
for kw in (dict(batch=3), dict(context=5), dict(machine="x"), dict(dtype="fp7"), dict(model="nope"),
           dict(batch=2.5)):
    E("13 widgets", f"RooflineExplorer(**{kw})", lambda kw=kw: RooflineExplorer(**kw), next(iter(kw)))


# -- found by tests/test_fuzz.py: tiny settings, typos of a few zeros, a forked run that fails ------------------
for t in (4.6e-166, 1e-300):
    OK("fuzz", f"generate(temperature={t})", lambda t=t: gen(4, temperature=t, seed=0),
       check=lambda r: torch.equal(r.sequences, gen(4).sequences))
OK("fuzz", "generate(top_p=1e-97)", lambda: gen(4, temperature=1.0, top_p=1e-97, seed=0),
   check=lambda r: torch.equal(r.sequences, gen(4).sequences))
OK("fuzz", "generate(top_k=torch.tensor(3))", lambda: gen(4, temperature=1.0, top_k=torch.tensor(3), seed=0))
E("fuzz", "generate(num_samples=2**31)", lambda: gen(3, num_samples=2 ** 31), "num_samples", isolate=True)
E("fuzz", "PagedKVPool.for_model(m, 2**31, 16)", lambda: PagedKVPool.for_model(m, 2 ** 31, 16), "n_blocks",
  isolate=True)
E("fuzz", "ConcatKVCache(c, 2**40, 8)", lambda: ConcatKVCache(c, 2 ** 40, 8), "batch_size", isolate=True)
E("fuzz", "simulate(kv_tokens=2**31)", lambda: simulate(request_stream(3), "paged", kv_tokens=2 ** 31), "kv_tokens",
  isolate=True)
E("fuzz", "request_stream(2**40)", lambda: request_stream(2 ** 40), "n", isolate=True)
E("fuzz", "m(int16 ids)", lambda: m(torch.tensor([[1, 5]], dtype=torch.int16)), "input_ids")


def _fork_in_a_passed_cache():
    cache = KVCache(c, 1, 1)
    return (lambda: generate(m, ids, 2, cache=cache, num_samples=2)), (lambda: cache.seq_lens)


E("fuzz", "generate(num_samples=2) on a passed cache too small for it", _fork_in_a_passed_cache, "cache", "max_len",
  state=True)


def _fork_cache(n):
    def setup():
        cache = KVCache(c, 1, 8)
        m(torch.tensor([ids]), cache=cache)
        return (lambda: cache.fork(n)), (lambda: cache.seq_lens)
    return setup


E("fuzz", "cache.fork(2**31)", _fork_cache(2 ** 31), "fork", state=True, isolate=True)


# ================================================================================================ run

def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("-v", "--verbose", action="store_true", help="print every case, not only the failures")
    ap.add_argument("--json", help="write every case's outcome to this file")
    args = ap.parse_args()
    counts, rows = {}, []
    for case in CASES:
        try:
            outcome, detail = run_case(case)
        except BaseException as e:  # the probe's own bug: say so, never stop
            outcome, detail = "opaque", f"probe error: {e!r} {traceback.format_exc(limit=2)}"
        counts[outcome] = counts.get(outcome, 0) + 1
        rows.append(dict(area=case["area"], label=case["label"], outcome=outcome, detail=detail))
        if args.verbose or outcome not in ("clear", "sane"):
            print(f"[{outcome:9}] {case['area']:14} {case['label']}\n{'':12}{detail[:300]}", flush=True)
    order = ("clear", "sane", "opaque", "refused", "silent", "hang", "corrupted")
    print(f"\ntried {len(CASES)}: " + ", ".join(f"{k} {counts.get(k, 0)}" for k in order))
    if args.json:
        Path(args.json).write_text(json.dumps(rows, indent=1, ensure_ascii=False))
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""Decode benchmark: lib's generation loop against Hugging Face ``transformers``, side by side, honestly.

    python -m tools.bench [--quick] [--out DIR] [--threads N] [--runs N] [--accelerator cuda] [--profile]

Not a test (timings are never asserted): it prints a table and writes ``bench.json`` and ``bench.png`` into
``--out`` (default ``bench-results/``). Everything runs in one process with the torch thread count fixed, the
garbage collector paused while timing, a warm-up first, the contenders interleaved run by run (so a busy
moment of the machine hits all of them alike); every time comes from ``lib.timing``.

It cannot mislead by a lucky run: every contender's median is printed beside its spread (the fastest and
slowest run), and two contenders are only ranked (a ratio such as "FastDecoder / transformers: 1.6x")
when ``lib.timing.rank`` separates them: at least 3 runs each and every run of one faster than every run of
the other. Otherwise the line says "not separated after N runs" and gives no ratio (it does not run extra
rounds: a busy moment widens the ranges, and the full mode's longer runs are the cure). The same holds for
the speedups of sections 2 and 3.

1. **Decode tokens/s** on identical GPT-2-124M-shaped random weights (``lib.PRESETS["gpt2"]``, the full 50,257
   vocabulary), fp32 CPU, batch 1, a 4-token prompt, 200 new tokens, greedy: ``lib.generate`` with its KV cache
   against ``transformers``' ``generate`` with its default (dynamic) cache and with its static cache, and both
   without a cache. lib runs three ways: the plain model the notebooks show (attention written out), the
   same with its fused ``sdpa`` attention, and ``lib.FastDecoder`` (``lib.fastdecode``: weights packed
   transposed and split into one slice per thread, so every core streams its share of each matrix-vector
   product). One transformers ``GPT2LMHeadModel`` is initialised at random and converted with
   ``lib.from_hf``, so both hold the same numbers; every contender must produce the same tokens (checked).
   The headline is lib's tokens/s (FastDecoder) divided by transformers' (dynamic cache); the plain
   model's ratio is reported beside it.
2. **Cached vs uncached time per token** at context lengths 64 … 1024 (``lib.measure.time_at_positions``) with
   log-log slopes (``lib.measure.fit_loglog_slope``): about 0 with the cache (each step reads the weights
   once), about 1 without (each step re-runs the whole context).
3. **Preallocated vs ``torch.cat`` cache** at long contexts: time per step, and the bytes the ``torch.cat``
   cache copies (counted by ``ConcatKVCache.bytes_copied``, checked against ``lib.costs.kv_cache_bytes``).
4. **Bandwidth utilisation (MBU)**: bytes one generation must read and write (weights + KV cache,
   ``lib.costs.pass_cost`` per step) ÷ its median time ÷ the fastest memory read seen in the run. Two
   read kernels are sampled in every round of section 1 (between the contenders' runs, so they see the same
   moments of a shared machine) and around the other sections: a sum over 256 MiB
   (``lib.roofline.measure_bandwidth_gbs``) and ``FastDecoder``'s packed product over the lm_head matrix
   (150 MiB for GPT-2). The second is often the faster one here, so leaving it out would flatter the MBU.
   For reference, ``F.linear``'s one-token product over the same matrix, as the plain model runs it.
5. **On a CUDA device** (skipped without one): the same model in bf16, ``lib.generate`` with the plain
   model and with ``FastDecoder``, lib's decode step eager and under ``torch.compile``, transformers' ``generate`` (its static cache is compiled automatically on CUDA), MBU
   against the bandwidth measured on that device.

Numbers depend on the machine and on what else runs on it: take the real figures on a quiet machine.

On a terminal (not under CI, see ``lib.progress``) two bars show where it is: the sections, and below them
each measured run of the current section (which contender or context pass, with an ETA). In a log only the
section headers are printed. The bars change nothing that is measured or written.
"""
from __future__ import annotations

import argparse
import copy
import json
import os
import platform
import sys
from dataclasses import asdict, dataclass, field
from pathlib import Path

import torch
import torch.nn.functional as F

from lib.cache import KVCache
from lib.concat import ConcatKVCache
from lib.costs import generation_steps, kv_bytes_per_token, kv_cache_bytes, pass_cost, streamed_weight_bytes
from lib.generate import generate
from lib.measure import fit_loglog_slope, random_model, time_at_positions
from lib.model import MiniTransformer
from lib.presets import PRESETS
from lib.device import cpu_name, fixed_threads
from lib.fastdecode import FastDecoder, PackedLinear
from lib import progress
from lib.roofline import measure_bandwidth_gbs
from lib.timing import MIN_RUNS_TO_RANK, Timing, benchmark, rank, steady, time_call

PROMPT = [464, 6953, 12940, 318]  # 4 token ids (GPT-2's "The KV cache is"); random weights: only the length counts


def prompt_ids(model) -> torch.Tensor:
    """(1, 4) the PROMPT on the model's device (ids wrapped into a smaller vocabulary)."""
    return torch.tensor([[t % model.config.vocab_size for t in PROMPT]], device=model.device)


@dataclass
class Settings:
    """What one benchmark run measures (``FULL`` by default, ``QUICK`` with --quick)."""

    new_tokens: int = 200  # section 1: tokens generated per run
    runs: int = 5  # timed runs per cached contender (after `warmup` untimed ones); median and range reported
    uncached_runs: int = 3  # timed runs per uncached contender (each is ~10x slower); 3 is the least ranked
    warmup: int = 1
    lengths: tuple = (64, 128, 256, 512, 1024)  # section 2: context lengths
    long_lengths: tuple = (256, 512, 768, 1024)  # section 3
    position_runs: int = 3  # sections 2 and 3: timed passes over the lengths (3: the least that is ranked)
    bandwidth_repeats: int = 5  # each bandwidth sample is the best of at least this many reads (sums, products)
    bandwidth_bytes: int | None = None  # None: lib.roofline's default (256 MiB on a CPU, far beyond its caches)
    seed: int = 0


FULL = Settings()
# quick: short runs, but as many of them as a ranking needs (lib.timing.MIN_RUNS_TO_RANK)
QUICK = Settings(new_tokens=24, runs=MIN_RUNS_TO_RANK, uncached_runs=MIN_RUNS_TO_RANK, lengths=(64, 128, 256),
                 long_lengths=(256, 512), position_runs=MIN_RUNS_TO_RANK, bandwidth_repeats=3)


# ------------------------------------------------------------------------------------------ the models

def _transformers():
    try:
        import transformers
    except ImportError:
        return None
    return transformers


def twin_models(seed: int = 0):
    """``(hf_model, lib_model)``: a GPT-2-124M-shaped ``GPT2LMHeadModel`` with seeded random weights and its
    ``lib.from_hf`` conversion (same numbers, fp32, eval mode, attention written out as the notebooks show
    it). Without ``transformers``: ``(None, lib.measure.random_model(PRESETS["gpt2"]))``."""
    transformers = _transformers()
    shape = PRESETS["gpt2"]
    if transformers is None:
        return None, random_model(shape, seed=seed)
    from lib.hf import from_hf

    state = torch.random.get_rng_state()
    try:
        torch.manual_seed(seed)
        cfg = transformers.GPT2Config(vocab_size=shape.vocab_size, n_positions=shape.max_seq_len,
                                      n_embd=shape.d_model, n_layer=shape.n_layers, n_head=shape.n_heads,
                                      bos_token_id=None, eos_token_id=None, pad_token_id=None)  # no early stop
        hf = transformers.GPT2LMHeadModel(cfg).eval()
    finally:
        torch.random.set_rng_state(state)
    model = from_hf(hf)
    if model.config != shape:
        raise AssertionError(f"the converted model's shape {model.config} is not lib.PRESETS['gpt2'] {shape}")
    return hf, model


# ---------------------------------------------------------------------------------------------- timing

@dataclass
class Contender:
    name: str
    impl: str  # "lib" or "transformers"
    cached: bool
    fn: object  # () -> sequences (1, prompt + new tokens)
    runs: int = 1  # timed runs (after the warm-up)
    seconds: list = field(default_factory=list)
    sequences: object = None
    error: str = ""

    @property
    def timing(self) -> Timing | None:
        """The timed runs as a ``lib.timing.Timing`` (None without any)."""
        return Timing(tuple(self.seconds)) if self.seconds else None


def interleaved(contenders: list, warmup: int, device="cpu", each_round=None, bar=None) -> None:
    """Run every contender ``warmup + c.runs`` times, one after the other within each round (so all of them
    see the same state of the machine; one with fewer runs sits out the last rounds); keep the timed seconds
    and the first output of each. A contender that raises is dropped with its error kept (e.g. a cache type
    this transformers version lacks). ``each_round()``, if given, runs at the start of every timed round
    (the benchmark samples the memory bandwidth there). ``bar``, if given (a ``lib.progress.bar``), is reset
    to the number of runs and shows which one is running."""
    if bar is not None:
        bar.reset(total=sum(warmup + c.runs for c in contenders))
    for r in range(warmup + max(c.runs for c in contenders)):
        if each_round is not None and r >= warmup:
            each_round()
        for c in contenders:
            if c.error or r >= warmup + c.runs:
                if bar is not None and r < warmup + c.runs:  # a failed contender's runs are skipped: count them
                    bar.update()
                continue
            if bar is not None:
                bar.set_description_str(f"{c.name}, {'warm-up' if r < warmup else f'run {r - warmup + 1}/{c.runs}'}")
            try:
                seconds, seq = time_call(c.fn, device)
            except Exception as e:  # noqa: BLE001 - reported in the table, never hidden
                c.error = f"{type(e).__name__}: {e}".splitlines()[0][:200]
                continue
            finally:
                if bar is not None:
                    bar.update()
            if c.sequences is None:
                c.sequences = seq.detach().cpu()
            if r >= warmup:
                c.seconds.append(seconds)


def _seconds(x):
    """Seconds rounded to 1 µs (finer digits are noise); None stays None."""
    return None if x is None else round(x, 6)


def ranking(a: Timing | None, b: Timing | None, names=("a", "b")) -> dict:
    """``lib.timing.rank`` of two contenders' runs, rounded for the JSON (3 digits for ratios); a contender
    without runs (failed, or not installed) gives {"separated": False, "ratio": None, "why": "not measured"}."""
    if a is None or b is None:
        missing = [n for n, t in zip(names, (a, b)) if t is None]
        return {"separated": False, "faster": None, "ratio": None, "ratio_range": None, "runs": None,
                "why": f"not measured ({' and '.join(missing)} {'has' if len(missing) == 1 else 'have'} no runs)"}
    r = rank(a, b, names)
    return {**r, "ratio": None if r["ratio"] is None else round(r["ratio"], 3),
            "ratio_range": None if r["ratio_range"] is None else [round(x, 3) for x in r["ratio_range"]]}


def _first_difference(a, b):
    if a.shape != b.shape:
        return f"shapes {tuple(a.shape)} vs {tuple(b.shape)}"
    i = int((a != b).nonzero()[0, 1])
    return f"position {i}: {int(a[0, i])} vs {int(b[0, i])}"


# --------------------------------------------------------------------------------- 1. decode tokens/s

def generation_bytes(config, prompt_len: int, new_tokens: int, dtype=torch.float32) -> int:
    """Bytes a cached generation moves: per forward pass of ``lib.costs.generation_steps``, the weights
    streamed once plus the KV cache read and written (``lib.costs.pass_cost``)."""
    return sum(pass_cost(config, r["n_fed"], r["n_past"], 1, dtype).bytes
               for r in generation_steps(config, prompt_len, new_tokens, use_cache=True))


def with_sdpa(model):
    """A copy of ``model`` whose attention takes lib's fused fast path (``attn_impl="sdpa"``, same weights)."""
    config = model.config.replace(attn_impl="sdpa")
    with torch.device("meta"):  # shapes only (no random init, the global random stream stays untouched)
        fast = MiniTransformer(config)
    fast = fast.to_empty(device=model.device).to(dtype=model.dtype)
    if config.tie_embeddings:
        fast.lm_head.weight = fast.tok_emb.weight  # to_empty made two tensors of the tied pair
    fast.load_state_dict(model.state_dict())
    return fast.eval()


def decode_contenders(hf, model, ids, new_tokens: int, runs: int = 1, uncached_runs: int = 1,
                      shards: int | None = None) -> list:
    """lib with its cache (attention written out; lib's sdpa attention; ``FastDecoder`` with ``shards``
    slices, default one per torch thread) and without (plain, FastDecoder); transformers with its dynamic
    cache, its static cache and without. A cache speedup compares one implementation with itself."""
    sdpa = with_sdpa(model)
    packed = FastDecoder(model, shards)
    fd = f"FastDecoder ({packed.shards} shard{'s' * (packed.shards > 1)})"
    out = [Contender("lib, KV cache", "lib", True, lambda: generate(model, ids, new_tokens).sequences, runs),
           Contender("lib, KV cache, sdpa", "lib", True, lambda: generate(sdpa, ids, new_tokens).sequences, runs),
           Contender(f"lib, KV cache, {fd}", "lib", True,
                     lambda: generate(packed, ids, new_tokens).sequences, runs)]
    if hf is not None:
        kw = dict(attention_mask=torch.ones_like(ids), max_new_tokens=new_tokens, do_sample=False)
        out += [Contender("transformers, dynamic cache", "transformers", True,
                          lambda: hf.generate(ids, **kw), runs),
                Contender("transformers, static cache", "transformers", True,
                          lambda: hf.generate(ids, cache_implementation="static", **kw), runs)]
    out += [Contender("lib, no cache", "lib", False,
                      lambda: generate(model, ids, new_tokens, use_cache=False).sequences, uncached_runs),
            Contender(f"lib, no cache, {fd}", "lib", False,
                      lambda: generate(packed, ids, new_tokens, use_cache=False).sequences, uncached_runs)]
    if hf is not None:
        out.append(Contender("transformers, no cache", "transformers", False,
                             lambda: hf.generate(ids, use_cache=False, **kw), uncached_runs))
    return out


FAST = "lib, KV cache, FastDecoder"  # the start of that contender's name (its shard count follows)
FAST_UNCACHED = "lib, no cache, FastDecoder"

# The ranked pairs of section 1: (label, a, b), read "a is ratio times as fast as b" (contender names, or the
# start of FastDecoder's). The first is the headline.
COMPARISONS = (
    ("lib FastDecoder / transformers (dynamic cache)", FAST, "transformers, dynamic cache"),
    ("lib FastDecoder / transformers (static cache)", FAST, "transformers, static cache"),
    ("lib FastDecoder / lib plain model", FAST, "lib, KV cache"),
    ("lib FastDecoder cache speedup", FAST, FAST_UNCACHED),
    ("lib / transformers (dynamic cache)", "lib, KV cache", "transformers, dynamic cache"),
    ("lib sdpa / transformers (dynamic cache)", "lib, KV cache, sdpa", "transformers, dynamic cache"),
    ("lib / transformers (static cache)", "lib, KV cache", "transformers, static cache"),
    ("lib / transformers (no cache)", "lib, no cache", "transformers, no cache"),
    ("lib cache speedup", "lib, KV cache", "lib, no cache"),
    ("transformers cache speedup", "transformers, dynamic cache", "transformers, no cache"),
)


@torch.no_grad()
def decode_section(hf, model, s: Settings, each_round=None, bar=None) -> dict:
    """Section 1. ``each_round()``, if given, runs once per timed round (the bandwidth samples); ``bar``: a
    progress bar over the runs (``interleaved``)."""
    ids = prompt_ids(model)
    contenders = decode_contenders(hf, model, ids, s.new_tokens, s.runs, s.uncached_runs)
    # uncached ones in the first rounds only: fewer runs, same moments
    interleaved(contenders, s.warmup, each_round=each_round, bar=bar)
    reference = contenders[0].sequences
    for c in contenders:
        if c.sequences is not None and not torch.equal(c.sequences, reference):
            raise AssertionError(f"{c.name} generated different tokens than lib with its cache "
                                 f"({_first_difference(c.sequences, reference)}); the comparison is void")
    moved = generation_bytes(model.config, len(PROMPT), s.new_tokens)
    rows, rankings = decode_rows(contenders, s.new_tokens, moved)
    return {"new_tokens": s.new_tokens, "prompt_len": len(PROMPT), "bytes_per_generation": moved,
            "same_tokens": True, "rows": rows,
            # tokens/s of a ÷ tokens/s of b, only where the two are separated (None otherwise: see rankings)
            "ratios": {label: r["ratio"] if r["separated"] else None for label, r in rankings.items()},
            "rankings": rankings}


def decode_rows(contenders: list, new_tokens: int, bytes_per_generation: int) -> tuple[list, dict]:
    """Section 1's table from the contenders' timed runs: one row per contender (median, range, tokens/s,
    GB/s moved; MBU is filled in later) and a ranking (``lib.timing.rank``) per pair of ``COMPARISONS``."""
    moved = bytes_per_generation
    rows = []
    for c in contenders:
        t = c.timing
        row = {"name": c.name, "impl": c.impl, "cached": c.cached, "runs": len(c.seconds), "error": c.error,
               "seconds": [_seconds(x) for x in c.seconds], "median_s": None, "min_s": None, "max_s": None,
               "tokens_per_s": None, "tokens_per_s_range": None, "ms_per_token": None, "achieved_gbs": None,
               "mbu": None}
        if t is not None:
            med = _seconds(t.median)
            row.update(median_s=med, min_s=_seconds(t.min), max_s=_seconds(t.max),
                       tokens_per_s=round(new_tokens / med, 2),
                       tokens_per_s_range=[round(new_tokens / t.max, 2), round(new_tokens / t.min, 2)],
                       ms_per_token=round(1e3 * med / new_tokens, 3))
            if c.cached:  # bytes the generation must move / its time (uncached runs are compute-bound)
                row["achieved_gbs"] = round(moved / med / 1e9, 2)
        rows.append(row)
    timings = {c.name: c.timing for c in contenders}

    def full_name(name):  # a contender's name, or the start of FastDecoder's (its shard count follows)
        return name if name in timings else next((n for n in timings if n.startswith(name)), name)

    rankings = {}
    for label, a, b in COMPARISONS:  # every run of one faster than every run of the other, or no ranking
        a, b = full_name(a), full_name(b)
        rankings[label] = {"a": a, "b": b, **ranking(timings.get(a), timings.get(b), (a, b))}
    return rows, rankings


# ------------------------------------------------------------------- 2. cached vs uncached per token

def _positions_interleaved(model, lengths, modes, runs: int, warmup: int, threads: int, bar=None) -> dict:
    """Per mode, a ``Timing`` per context length of ``runs`` passes of ``lib.measure.time_at_positions``
    (one pass per mode per round, modes interleaved) of one step at each length. ``bar``: a progress bar
    over the passes."""
    runs_by_mode = {m: [] for m in modes}
    if bar is not None:
        bar.reset(total=(warmup + runs) * len(modes))
    for r in range(warmup + runs):
        for m in modes:
            if bar is not None:
                bar.set_description_str(f"{m}, {'warm-up' if r < warmup else f'pass {r - warmup + 1}/{runs}'} "
                                        f"over contexts {lengths[0]}-{lengths[-1]}")
            secs = time_at_positions(model, list(lengths), m, repeats=1, warmup=0, threads=threads)
            if bar is not None:
                bar.update()
            if r >= warmup:
                runs_by_mode[m].append(secs)
    return {m: [Timing(col) for col in zip(*rs)] for m, rs in runs_by_mode.items()}


def _per_length(timings: dict, fast: str, slow: str) -> dict:
    """Medians, ranges and the ranked ratio slow/fast at each length: {"seconds", "ranges", "ratio", "why"}
    (a ratio only where ``lib.timing.rank`` separates the two; None elsewhere, "why" says why)."""
    ranked = [ranking(a, b, (fast, slow)) for a, b in zip(timings[fast], timings[slow])]
    return {"seconds": {m: [_seconds(t.median) for t in ts] for m, ts in timings.items()},
            "ranges": {m: [[_seconds(t.min), _seconds(t.max)] for t in ts] for m, ts in timings.items()},
            "ratio": [r["ratio"] if r["separated"] else None for r in ranked], "why": [r["why"] for r in ranked]}


def lengths_section(model, s: Settings, threads: int, bar=None) -> dict:
    per = _per_length(_positions_interleaved(model, s.lengths, ("static", "no cache"), s.position_runs, s.warmup,
                                             threads, bar), "static", "no cache")
    secs = per["seconds"]
    slopes = {m: round(fit_loglog_slope(list(s.lengths), v), 2) for m, v in secs.items()}
    # speedup: uncached time / cached time, where the two are separated (None where their ranges overlap)
    speedup = [None if x is None else round(x, 2) for x in per["ratio"]]
    return {"lengths": list(s.lengths), "seconds": secs, "ranges": per["ranges"], "slopes": slopes,
            "speedup": speedup, "speedup_why": per["why"], "tail_fraction": 0.5}


# -------------------------------------------------------------- 3. preallocated vs torch.cat cache

@torch.no_grad()
def concat_bytes_copied(model, context: int, seed: int = 0) -> int:
    """Bytes a ``ConcatKVCache`` copies in the one decode step that brings it to ``context`` positions
    (measured: its ``bytes_copied`` before and after the step)."""
    ids = torch.randint(0, model.config.vocab_size, (1, context), generator=torch.Generator().manual_seed(seed))
    cache = ConcatKVCache(model.config, 1, context, dtype=model.dtype)
    if context > 1:
        model(ids[:, :context - 1], cache=cache)
    before = cache.bytes_copied
    model(ids[:, context - 1:], cache=cache)
    return cache.bytes_copied - before


def cache_kinds_section(model, s: Settings, threads: int, bar=None) -> dict:
    c = model.config
    per = _per_length(_positions_interleaved(model, s.long_lengths, ("static", "concat"), s.position_runs,
                                             s.warmup, threads, bar), "static", "concat")
    secs = per["seconds"]
    copied = [concat_bytes_copied(model, t, s.seed) for t in s.long_lengths]
    expected = [kv_cache_bytes(c, t, 1, model.dtype) for t in s.long_lengths]
    if copied != expected:
        raise AssertionError(f"ConcatKVCache copied {copied} bytes, lib.costs.kv_cache_bytes says {expected}")
    n = max(s.long_lengths)
    return {"lengths": list(s.long_lengths), "seconds": secs, "ranges": per["ranges"],
            # concat time / static time, where the two are separated (None where their ranges overlap)
            "concat_over_static": per["ratio"], "concat_over_static_why": per["why"],
            "concat_bytes_copied_per_step": copied,
            "static_bytes_written_per_step": kv_bytes_per_token(c, model.dtype),
            "concat_bytes_copied_generating_to": {"tokens": n,
                                                  "bytes": sum(kv_cache_bytes(c, t, 1, model.dtype)
                                                               for t in range(1, n + 1))}}


# --------------------------------------------------------------------------------- 4. bandwidth (MBU)

def matvec_gbs(weight: torch.Tensor, repeats: int = 20, shards: int | None = None) -> float:
    """GB/s of one one-token product over ``weight`` (out, in): its bytes ÷ the best time of ``repeats``.
    ``shards=None``: ``F.linear``, as the plain model runs it; a number: ``FastDecoder``'s packed product
    (``lib.fastdecode.PackedLinear``, cut into that many column slices)."""
    x = torch.randn(1, weight.shape[1], dtype=weight.dtype, device=weight.device)
    if shards is None:
        fn = lambda: F.linear(x, weight)  # noqa: E731
    else:
        packed = PackedLinear([weight], [None], shards)
        fn = lambda: packed(x)  # noqa: E731
    with torch.no_grad():
        best = benchmark(fn, weight.device, min_runs=repeats).min  # the best run: the least disturbed
    return weight.numel() * weight.element_size() / best / 1e9


# ------------------------------------------------------------------------------------ 5. CUDA, bf16

@torch.no_grad()
def _decode_loop(step, model, ids, new_tokens: int):
    """Greedy generation with a preallocated cache: the prefill eagerly, then ``step(token, cache)`` (the model
    itself, or its compiled version) per new token, with ``checked=True`` as ``lib.generate`` passes it (the
    tokens are the model's own choices: nothing is read back from the device, so nothing breaks the compiled
    graph). Same tokens as ``lib.generate``."""
    cache = KVCache(model.config, 1, ids.shape[1] + new_tokens - 1, device=model.device, dtype=model.dtype)
    token = model(ids, cache=cache, last_only=True)[:, -1].argmax(-1, keepdim=True)  # (1, 1)
    out = [token]
    for _ in range(new_tokens - 1):
        token = step(token, cache=cache, last_only=True, checked=True)[:, -1].argmax(-1, keepdim=True)  # (1, 1)
        out.append(token)
    return torch.cat([ids] + out, dim=1)


def accelerator_section(hf, model, s: Settings, device: str, bar=None) -> dict:
    """lib's decode in bf16 on ``device``: lib.generate, the plain decode loop eager and compiled, and
    transformers' generate; MBU against the bandwidth measured there. Skipped cleanly without the device
    (or with ``device=None``)."""
    if device is None:
        return {"skipped": "not asked for (--accelerator none)"}
    try:
        from lib.device import resolve_device
        dev = resolve_device(device)
    except ValueError as e:
        return {"skipped": str(e)}
    bandwidth = [round(measure_bandwidth_gbs(dev, nbytes=s.bandwidth_bytes if dev.type == "cpu" else None,
                                             repeats=s.bandwidth_repeats), 1) for _ in range(3)]
    best_bw = max(bandwidth)
    m = copy.deepcopy(model).to(device=dev, dtype=torch.bfloat16).eval()
    ids = prompt_ids(m)
    n = s.new_tokens
    packed = FastDecoder(m, 1)  # one slice: a GPU runs each product on all of its cores anyway
    contenders = [Contender("lib.generate, bf16", "lib", True, lambda: generate(m, ids, n).sequences, s.runs),
                  Contender("lib.generate, FastDecoder, bf16", "lib", True,
                            lambda: generate(packed, ids, n).sequences, s.runs),
                  Contender("lib decode loop, eager", "lib", True, lambda: _decode_loop(m, m, ids, n), s.runs)]
    compiled = torch.compile(m, dynamic=True)
    with_compile = Contender("lib decode loop, torch.compile", "lib", True, lambda: _decode_loop(compiled, m, ids, n),
                             s.runs)
    t_compile = None
    try:
        t_compile = round(time_call(with_compile.fn, dev)[0], 2)  # the first call compiles
    except Exception as e:  # noqa: BLE001 - e.g. no C++ compiler for inductor: reported, not hidden
        with_compile.error = f"{type(e).__name__}: {e}".splitlines()[0][:200]
    contenders.append(with_compile)
    if hf is not None:
        h = copy.deepcopy(hf).to(device=dev, dtype=torch.bfloat16).eval()
        kw = dict(attention_mask=torch.ones_like(ids), max_new_tokens=n, do_sample=False)
        contenders += [Contender("transformers, dynamic cache", "transformers", True, lambda: h.generate(ids, **kw),
                                 s.runs),
                       Contender("transformers, static cache", "transformers", True,
                                 lambda: h.generate(ids, cache_implementation="static", **kw), s.runs)]
    interleaved(contenders, s.warmup, dev, bar=bar)
    moved = generation_bytes(m.config, len(PROMPT), n, torch.bfloat16)
    reference = contenders[0].sequences
    rows = []
    for c in contenders:
        t = c.timing
        med = None if t is None else _seconds(t.median)
        rows.append({"name": c.name, "error": c.error, "runs": len(c.seconds),
                     "same_tokens_as_lib": None if c.sequences is None else bool(torch.equal(c.sequences, reference)),
                     "seconds": [_seconds(x) for x in c.seconds], "median_s": med,
                     "min_s": None if t is None else _seconds(t.min), "max_s": None if t is None else _seconds(t.max),
                     "tokens_per_s": None if med is None else round(n / med, 1),
                     "mbu": None if med is None else round(moved / med / 1e9 / best_bw, 3)})
    from lib.device import describe_device
    return {"device": describe_device(dev), "dtype": "bf16", "new_tokens": n, "bandwidth_gbs_samples": bandwidth,
            "bandwidth_gbs": best_bw, "bytes_per_generation": moved, "compile_first_call_s": t_compile,
            "rows": rows}


# --------------------------------------------------------------------------------------------- report

def _fmt(x, spec=""):
    return "-" if x is None else format(x, spec)


def _span(pair, spec):
    """'1.23–1.31' from [low, high], '-' for None."""
    return "-" if pair is None or None in pair else f"{pair[0]:{spec}}–{pair[1]:{spec}}"


def _ranked(r: dict) -> str:
    """One comparison as a line: the ratio and what the ranges allow, only where the two are separated."""
    if r["separated"]:
        return f"{r['ratio']:.2f}x (ranges allow {_span(r['ratio_range'], '.2f')}x; {r['why']})"
    if r["why"].startswith("not measured"):
        return "- (not measured)"
    return f"no ranking: {r['why']}"


def _ratio_cell(x, spec=".1f"):
    return "not separated" if x is None else f"{x:{spec}}x"


def report(result: dict) -> str:
    """The benchmark as text tables."""
    from lib.text import fmt_bytes, text_table

    m, d = result["machine"], result["decode"]
    shape = (f"GPT-2-124M shape (lib.PRESETS['gpt2'], vocab {result['model']['vocab_size']:,})"
             if result["model"]["shape"] == "gpt2" else "a custom shape")
    lines = [f"KV Cache Lab decode benchmark ({'quick' if result['quick'] else 'full'}): {m['command']}",
             f"machine: {m['cpu']}, {m['cpu_count']} CPUs, torch {m['torch']} with {m['threads']} thread(s), "
             f"transformers {m['transformers'] or 'not installed'}",
             f"model: {shape}, random weights, {result['model']['parameters']:,} parameters, fp32; streamed per step "
             f"{fmt_bytes(result['model']['streamed_weight_bytes'])}",
             f"memory reads, GB/s: sum over {fmt_bytes(result['settings']['bandwidth_bytes'] or 256 * 2 ** 20)} "
             f"{m['bandwidth_gbs_samples']}; FastDecoder's product over lm_head {m['packed_product_gbs_samples']} "
             f"-> fastest {m['bandwidth_gbs']} GB/s ({m['bandwidth_from']}); F.linear's product over lm_head "
             f"{m['matvec_gbs']} GB/s",
             "",
             f"1. decode, batch 1, {d['prompt_len']}-token prompt, {d['new_tokens']} new tokens, greedy "
             f"(median and range of the runs; same tokens from every contender: {d['same_tokens']})"]
    rows = [(r["name"], f"{r['runs']}", _fmt(r["median_s"], ".3f"), _span([r["min_s"], r["max_s"]], ".3f"),
             _fmt(r["tokens_per_s"], ".1f"), _span(r["tokens_per_s_range"], ".1f"),
             _fmt(r["ms_per_token"], ".2f"), _fmt(r["achieved_gbs"], ".1f"),
             "-" if r["mbu"] is None else f"{r['mbu']:.0%}", r["error"][:60] or "")
            for r in d["rows"]]
    lines.append(text_table(rows, ["contender", "runs", "median s", "min–max s", "tok/s", "tok/s range", "ms/tok",
                                   "GB/s", "MBU", "note"]))
    lines.append(f"  ranked only where every run of one is faster than every run of the other "
                 f"(at least {MIN_RUNS_TO_RANK} runs each):")
    lines += [f"  {label}: {_ranked(r)}" for label, r in d["rankings"].items()]
    g = result["lengths"]
    ms = lambda pair: _span([1e3 * pair[0], 1e3 * pair[1]], ".2f")  # noqa: E731
    lines += ["", f"2. one step at each context length (lib, median and range of "
              f"{result['settings']['position_runs']} passes; log-log slope over the last half: "
              f"cached {g['slopes']['static']}, uncached {g['slopes']['no cache']})"]
    lines.append(text_table(header=["context", "cached ms", "range", "uncached ms", "range", "speedup"], rows=
                              [(t, f"{1e3 * a:.2f}", ms(ra), f"{1e3 * b:.2f}", ms(rb), _ratio_cell(x))
                               for t, a, ra, b, rb, x in
                               zip(g["lengths"], g["seconds"]["static"], g["ranges"]["static"],
                                   g["seconds"]["no cache"], g["ranges"]["no cache"], g["speedup"])]))
    k = result["cache_kinds"]
    lines += ["", "3. preallocated (KVCache) vs torch.cat (ConcatKVCache) cache, one decode step (median and range)"]
    lines.append(text_table(header=["context", "static ms", "range", "concat ms", "range", "concat/static",
                                    "concat copies", "static writes"], rows=
                              [(t, f"{1e3 * a:.2f}", ms(ra), f"{1e3 * b:.2f}", ms(rb), _ratio_cell(x, ".2f"),
                                fmt_bytes(cb), fmt_bytes(k["static_bytes_written_per_step"]))
                               for t, a, ra, b, rb, x, cb in
                               zip(k["lengths"], k["seconds"]["static"], k["ranges"]["static"],
                                   k["seconds"]["concat"], k["ranges"]["concat"], k["concat_over_static"],
                                   k["concat_bytes_copied_per_step"])]))
    tot = k["concat_bytes_copied_generating_to"]
    lines.append(f"  generating {tot['tokens']} tokens, the torch.cat cache copies {fmt_bytes(tot['bytes'])} in all")
    lines += ["", f"4. bandwidth utilisation: bytes per generation {fmt_bytes(d['bytes_per_generation'])} "
              f"(weights + KV, lib.costs.pass_cost) / median time / fastest read {m['bandwidth_gbs']} GB/s "
              f"-> the MBU column of table 1"]
    a = result["accelerator"]
    if "skipped" in a:
        lines += ["", f"5. accelerator: skipped ({a['skipped']})"]
    else:
        lines += ["", f"5. {a['device']}, bf16, {a['new_tokens']} new tokens; bandwidth {a['bandwidth_gbs_samples']} "
                  f"GB/s -> {a['bandwidth_gbs']}; torch.compile's first call {a['compile_first_call_s']} s"]
        lines.append(text_table(header=["contender", "runs", "median s", "min–max s", "tok/s", "MBU",
                                        "same tokens", "note"], rows=
                                  [(r["name"], r["runs"], _fmt(r["median_s"], ".4f"),
                                    _span([r["min_s"], r["max_s"]], ".4f"), _fmt(r["tokens_per_s"], ".1f"),
                                    "-" if r["mbu"] is None else f"{r['mbu']:.0%}", str(r["same_tokens_as_lib"]),
                                    r["error"][:60]) for r in a["rows"]]))
    return "\n".join(lines)


def plot(result: dict, path: Path) -> Path:
    """Four panels: tokens/s, time per step vs context (log-log), static vs torch.cat, MBU."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from lib.widgets import style
    with matplotlib.rc_context():  # the course's fonts, palette and constrained layout, for this figure only
        style.apply_matplotlib()
        # lib's implementations vs the others: the first two palette colours, the others also hatched (a second cue);
        # the cache kinds are the course's concepts: KV cache = "cached", no cache = "recomputed" (every step again)
        impl = {True: dict(color=style.CATEGORICAL[0], hatch=None), False: dict(color=style.CATEGORICAL[1], hatch="//")}
        cue = {"static": style.concept("cached"), "no cache": style.concept("recomputed"),
               "concat": style.concept("computed")}

        def bars(ax, rows, values, **kw):
            drawn = ax.barh([r["name"] for r in rows], values, edgecolor=style.INK, linewidth=0.5,
                            color=[impl[r["impl"] == "lib"]["color"] for r in rows], **kw)
            for bar, r in zip(drawn, rows):
                bar.set_hatch(impl[r["impl"] == "lib"]["hatch"])

        d, g, k = result["decode"], result["lengths"], result["cache_kinds"]
        fig, axes = plt.subplots(2, 2, figsize=(1.6 * style.FIGURE_WIDTH, 8))
        ok = [r for r in d["rows"] if r["tokens_per_s"]]
        ax = axes[0, 0]
        bars(ax, ok, [r["tokens_per_s"] for r in ok],
             xerr=[[r["tokens_per_s"] - r["tokens_per_s_range"][0] for r in ok],
                   [r["tokens_per_s_range"][1] - r["tokens_per_s"] for r in ok]], capsize=3)
        ax.invert_yaxis()
        ax.set_xlabel("tokens / s (median; bars: slowest to fastest run)")
        shape = "GPT-2-124M shape" if result["model"]["shape"] == "gpt2" else "custom shape"
        ax.set_title(f"1. decode {d['new_tokens']} tokens, {shape}, fp32 CPU")
        ax = axes[0, 1]
        for mode, label in (("static", "KV cache"), ("no cache", "no cache")):
            ax.loglog(g["lengths"], [1e3 * x for x in g["seconds"][mode]], color=cue[mode].colour,
                      marker=cue[mode].marker, ls=cue[mode].linestyle, label=f"{label} (slope {g['slopes'][mode]})")
        ax.set_xlabel("context length (tokens)")
        ax.set_ylabel("ms per step")
        ax.set_title("2. one decode step vs context (lib)")
        ax.legend()
        ax = axes[1, 0]
        for mode in ("static", "concat"):
            ax.plot(k["lengths"], [1e3 * x for x in k["seconds"][mode]], color=cue[mode].colour,
                    marker=cue[mode].marker, ls=cue[mode].linestyle, label=f"{mode} cache: ms per step")
        ax.set_xlabel("context length (tokens)")
        ax.set_ylabel("ms per step")
        ax2 = ax.twinx()
        ref = style.concept("reference")
        ax2.plot(k["lengths"], [b / 2 ** 20 for b in k["concat_bytes_copied_per_step"]], color=ref.colour,
                 marker=ref.marker, ls=ref.linestyle, label="torch.cat: MiB copied per step")
        ax2.set_ylabel("MiB copied per step")
        ax.legend(loc="upper left")
        ax2.legend(loc="lower right")
        ax.set_title("3. preallocated vs torch.cat cache")
        ax = axes[1, 1]
        cached = [r for r in d["rows"] if r["mbu"] is not None]
        bars(ax, cached, [100 * r["mbu"] for r in cached])
        m = result["machine"]
        ax.axvline(100 * m["matvec_gbs"] / m["bandwidth_gbs"], color=ref.colour, ls=ref.linestyle,
                   label="one-token F.linear over lm_head")
        ax.invert_yaxis()
        ax.set_xlim(0, 100)
        ax.set_xlabel(f"% of {m['bandwidth_gbs']} GB/s, the fastest read of the run")
        ax.set_title("4. bandwidth utilisation (MBU)")
        ax.legend(loc="upper right")
        fig.savefig(path, dpi=100)
        plt.close(fig)
    return path


# ------------------------------------------------------------------------------------------------ run

def _available_cpus() -> int:
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()


def run(settings: Settings = FULL, threads: int | None = None, accelerator: str = "cuda", quick: bool = False,
        command: str = "python -m tools.bench", log=print, twins=None, show: bool | None = False) -> dict:
    """Every section; returns the result dict (what bench.json holds). ``twins``: an ``(hf_model or None,
    lib_model)`` pair to use instead of ``twin_models()`` (the tests run the whole pipeline on a tiny one).
    ``show``: progress bars on stderr over the sections and the runs of each (True, False, or None: as
    ``lib.progress.show_progress`` decides); ``log`` should then be ``lib.progress.write``."""
    threads = threads or _available_cpus()
    transformers = _transformers()
    show = progress.show_progress() if show is None else show
    with progress.bar(total=5, desc="bench", unit="section", show=show) as sections, \
            progress.bar(desc="runs", unit="run", leave=False, show=show) as runs:
        return _run(settings, threads, accelerator, quick, command, log, twins, transformers, sections, runs)


def _run(settings, threads, accelerator, quick, command, log, twins, transformers, sections, runs) -> dict:
    """``run``'s body; ``sections`` and ``runs`` are its two progress bars (disabled ones draw nothing)."""
    def section(title):  # the header line, and the sections bar's current item
        log(title)
        sections.set_description_str(title.split(" ...")[0])

    def bandwidth(device="cpu"):  # GB/s to 0.1 (finer digits are noise); MBU divides by the best of them
        return round(measure_bandwidth_gbs(device, nbytes=settings.bandwidth_bytes,
                                           repeats=settings.bandwidth_repeats), 1)

    with fixed_threads(threads), torch.inference_mode():
        log(f"threads fixed at {threads}; building the GPT-2-124M-shaped twins ...")
        hf, model = twin_models(settings.seed) if twins is None else twins
        lm_head = model.lm_head.weight.detach()
        sums, products = [], []

        def sample():  # one read of each kind (section 4)
            sums.append(bandwidth())
            products.append(round(matvec_gbs(lm_head, settings.bandwidth_repeats, shards=threads), 1))

        sample()
        section("1. decode tokens/s ...")
        with steady(threads):
            decode = decode_section(hf, model, settings, each_round=sample, bar=runs)
        sample()
        sections.update()
        section("2. cached vs uncached across lengths ...")
        lengths = lengths_section(model, settings, threads, bar=runs)
        sections.update()
        section("3. preallocated vs torch.cat ...")
        kinds = cache_kinds_section(model, settings, threads, bar=runs)
        sample()
        sections.update()
        sections.set_description_str("4. bandwidth utilisation")
        best = max(sums + products)
        for r in decode["rows"]:  # 4. MBU: achieved GB/s against the fastest read of the whole run
            if r["achieved_gbs"] is not None:
                r["mbu"] = round(decode["bytes_per_generation"] / r["median_s"] / 1e9 / best, 3)
        matvec = matvec_gbs(lm_head)
        sections.update()
    section("5. accelerator ...")
    runs.reset(total=0)
    accel = accelerator_section(hf, model, settings, accelerator, bar=runs)
    sections.update()
    return {"command": command, "quick": quick, "settings": asdict(settings),
            "machine": {"command": command, "cpu": cpu_name(), "cpu_count": os.cpu_count(), "threads": threads,
                        "torch": torch.__version__, "python": platform.python_version(),
                        "transformers": getattr(transformers, "__version__", None),
                        "bandwidth_gbs_samples": sums, "packed_product_gbs_samples": products,
                        "bandwidth_gbs": best, "bandwidth_from": "sum" if best in sums else "packed product",
                        "matvec_gbs": round(matvec, 1), "matvec_packed_gbs": max(products)},
            "model": {"shape": "gpt2" if model.config == PRESETS["gpt2"] else "custom",
                      "vocab_size": model.config.vocab_size, "parameters": model.num_parameters(),
                      "streamed_weight_bytes": streamed_weight_bytes(model.config, torch.float32)},
            "decode": decode, "lengths": lengths, "cache_kinds": kinds, "accelerator": accel}


def profile_decode(steps: int = 20, threads: int | None = None, row_limit: int = 15) -> str:
    """torch.profiler's tables of the ops in a generation of ``steps`` tokens (a 4-token prefill, then
    cached decode steps) on the GPT-2 shape: the plain model, then ``FastDecoder``."""
    from torch.profiler import ProfilerActivity, profile

    threads = threads or _available_cpus()
    tables = []
    with fixed_threads(threads), torch.inference_mode():
        _, model = twin_models()
        ids = prompt_ids(model)
        for name, m in (("the plain model (lib.model)", model), ("FastDecoder", FastDecoder(model, threads))):
            generate(m, ids, 3)
            with profile(activities=[ProfilerActivity.CPU]) as prof:
                generate(m, ids, steps)
            tables.append(f"{name}, {steps} tokens, {threads} thread(s):\n"
                          + prof.key_averages().table(sort_by="self_cpu_time_total", row_limit=row_limit))
    return "\n\n".join(tables)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tools.bench", description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="fewer tokens, lengths and runs (a minute or two)")
    parser.add_argument("--out", default="bench-results", help="folder for bench.json and bench.png")
    parser.add_argument("--threads", type=int, default=None, help="torch threads (default: every CPU available)")
    parser.add_argument("--runs", type=int, default=None, help="timed runs per cached contender")
    parser.add_argument("--new-tokens", type=int, default=None, help="tokens per generation in section 1")
    parser.add_argument("--accelerator", default="cuda",
                        help="device for section 5 (default cuda; skipped if absent; 'none' skips it)")
    parser.add_argument("--profile", action="store_true", help="only print torch.profiler's tables of lib's decode (plain, FastDecoder)")
    args = parser.parse_args(argv)
    if args.profile:
        print(profile_decode(threads=args.threads))
        return 0
    settings = copy.deepcopy(QUICK if args.quick else FULL)
    for name, value in (("runs", args.runs), ("new_tokens", args.new_tokens)):
        if value is not None:
            if value < 1:
                parser.error(f"--{name.replace('_', '-')} must be at least 1, got {value}")
            setattr(settings, name, value)
    command = "python -m tools.bench " + " ".join(argv if argv is not None else sys.argv[1:])
    accelerator = None if args.accelerator.lower() == "none" else args.accelerator
    result = run(settings, args.threads, accelerator, args.quick, command.strip(), log=progress.write, show=None)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    (out / "bench.json").write_text(json.dumps(result, indent=1))
    plot(result, out / "bench.png")
    print(report(result))
    print(f"\nwrote {out / 'bench.json'} and {out / 'bench.png'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

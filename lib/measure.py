"""Measured cost of generation: wall time per generated token vs position, with and without a KV cache.

``lib.costs`` counts FLOPs on paper; this module times the real model so the two can be put side by side.

Public API (plain data in, plain data out):

    MODES = ("no cache", "static", "concat")
        "no cache": every step feeds the whole sequence again; "static": the preallocated ``KVCache``
        (written in place); "concat": ``ConcatKVCache`` (copies the whole history at every step)
    larger_config(d_model=256, n_layers=4, n_heads=4, max_seq_len=512, vocab_size=131) -> ModelConfig
        a bigger shape than the demo models, so the cache's effect stands out from Python overhead
    random_model(config=None, seed=0, device=None, dtype=None) -> MiniTransformer
        seeded random weights (eval mode); config=None means larger_config()
    log_positions(max_len, count=12) -> list[int]
        about ``count`` context lengths from 1 to max_len, evenly spaced on a log axis
    time_per_step(model, prompt_len, n_new, use_cache=True, cache_kind="static", repeats=3, warmup=1,
                  threads=1, seed=0, reduce="min") -> list[float]
        seconds of each of the n_new steps of one ``lib.generate`` run (TraceStep.seconds), best of repeats
    time_at_positions(model, positions, mode="static", repeats=3, warmup=1, threads=1, seed=0,
                      reduce="min", clock="wall") -> list[float]
        seconds of one generation step at each given context length, without running the whole loop;
        clock="cpu" counts this thread's CPU time instead (steadier on a busy machine; CPU, threads=1)
    measure_generation(model, n_new, prompt_len=1, modes=MODES, ...) -> dict
        every step of a full generation per mode: per-step and cumulative seconds and their log-log slopes
    measure_positions(model, positions, modes=MODES, ..., clock="wall") -> dict
        the same per-step view at chosen positions only (cheap enough for long contexts on a big model)
    fit_loglog_slope(xs, ys, tail_fraction=0.5) -> float
        least-squares slope of log y against log x over the last part of the curve: ~1 linear, ~2 quadratic
    cumulative(ys) -> list
        running sums

Both ``measure_*`` results are dicts with "positions" (context length after each step: the same x as
``lib.costs.generation_steps(...)[s]["n_keys"]``), "seconds" {mode: [...]}, "ranges" {mode: [[min, max], ...]}
(the fastest and slowest of the runs at each position), "slopes" {mode: {"per_step": k, ...}}, "modes", "config"
(the model's ModelConfig as a dict), "kind", "clock", "repeats", "warmup", "threads", "reduce";
``measure_generation`` adds "cumulative" {mode: [...]} and a "cumulative" slope.

"A step at context length t" means: with a cache, t − 1 positions are cached and one new token is fed;
without a cache, all t tokens are fed. Times are rounded to 1 µs. The clocks, the device synchronisation and
the timing setting (a fixed number of torch threads, the garbage collector paused, both restored afterwards)
are ``lib.timing``'s. By default each time is the best (``reduce="min"``) of ``repeats`` runs, timeit's advice
on a shared machine: other processes only ever add time, so the minimum is the least-disturbed measurement;
``reduce="median"`` is available. Times vary run to run and machine to machine: never assert on them.
"""
from __future__ import annotations

import math
from itertools import accumulate

import numpy as np
import torch

from . import checks, progress
from .cache import CACHE_KINDS
from .config import ModelConfig
from .costs import generation_steps
from .generate import generate
from .model import MiniTransformer, eval_mode
from .timing import CLOCKS, Stopwatch, Timing, steady

MODES = ("no cache", "static", "concat")
REDUCERS = ("min", "median")  # the Timing statistic each reported time is
SECONDS_DIGITS = 6  # times are rounded to 1 µs: finer digits are noise
SLOPE_DIGITS = 2


# ------------------------------------------------------------------------------------- the larger model

def larger_config(d_model: int = 256, n_layers: int = 4, n_heads: int = 4, max_seq_len: int = 512,
                  vocab_size: int = 131) -> ModelConfig:
    """A bigger shape than the demo models (d_model 256 vs 64, context 512 vs 64), same vocabulary size.

    At d_model 64 a decode step is mostly Python overhead and the cache saves little wall time; at 256 the
    matrix products dominate and the measured curves start to look like the analytic ones."""
    return ModelConfig(vocab_size=vocab_size, n_layers=n_layers, d_model=d_model, n_heads=n_heads,
                       max_seq_len=max_seq_len)


def random_model(config: ModelConfig | None = None, seed: int = 0, device=None, dtype=None) -> MiniTransformer:
    """A ``MiniTransformer`` with seeded random weights (eval mode). Its text is gibberish; its cost is real."""
    config = larger_config() if config is None else config
    if not isinstance(config, ModelConfig):
        raise TypeError(f"random_model needs a lib.ModelConfig (or None for larger_config()), "
                        f"got {type(config).__name__}")
    state = torch.random.get_rng_state()
    try:
        torch.manual_seed(seed)
        model = MiniTransformer(config)
    finally:
        torch.random.set_rng_state(state)  # leave the notebook's own random stream where it was
    if device is not None or dtype is not None:
        model = model.to(device=device, dtype=dtype)
    return model.eval()


def log_positions(max_len: int, count: int = 12) -> list[int]:
    """About ``count`` distinct context lengths from 1 to ``max_len``, evenly spaced on a log axis
    (fewer when max_len is small: [1, 2, 3, 4] for max_len=4)."""
    max_len = checks.integer(max_len, "max_len", 1)
    count = checks.integer(count, "count", 2)
    return sorted({round(max_len ** (i / (count - 1))) for i in range(count)})


# --------------------------------------------------------------------------------------------- checks

def _check_model(model, fn: str):
    if not isinstance(model, MiniTransformer):
        raise TypeError(f"{fn}() needs a lib.MiniTransformer (e.g. lib.load_demo('chat')[0] or random_model()), "
                        f"got {type(model).__name__}")


def _check_timing(repeats, warmup, threads, reduce):
    checks.integer(repeats, "repeats", 1)
    checks.integer(warmup, "warmup", 0)
    checks.integer(threads, "threads", 1)
    if reduce not in REDUCERS:
        raise ValueError(f"reduce={reduce!r} is not known; allowed: {', '.join(REDUCERS)}")


def _check_clock(model, clock, threads):
    if clock not in CLOCKS:
        raise ValueError(f"clock={clock!r} is not known; allowed: {', '.join(CLOCKS)}")
    if clock == "cpu" and (model.device.type != "cpu" or threads != 1):
        raise ValueError(f"clock='cpu' counts the CPU time of this one thread, so it needs a model on the CPU and "
                         f"threads=1 (got device {model.device.type}, threads={threads}); use clock='wall'")


def _check_modes(modes) -> tuple:
    modes = (modes,) if isinstance(modes, str) else tuple(modes)
    if not modes:
        raise ValueError(f"modes is empty; choose one or more of: {', '.join(MODES)}")
    for mode in modes:
        _mode_args(mode)
    return modes


def _mode_args(mode) -> tuple[bool, str]:
    """(use_cache, cache_kind) for a mode name."""
    if mode not in MODES:
        raise ValueError(f"unknown mode {mode!r}; allowed: {', '.join(MODES)}")
    return (False, "static") if mode == "no cache" else (True, mode)


def _check_positions(model, positions) -> list[int]:
    positions = list(positions)
    if not positions:
        raise ValueError("positions is empty; give context lengths such as log_positions(256)")
    positions = [checks.integer(t, "each position (context length)", 1) for t in positions]
    if any(b <= a for a, b in zip(positions, positions[1:])):
        raise ValueError(f"positions must be strictly increasing, got {positions}")
    if positions[-1] > model.config.max_seq_len:
        raise ValueError(f"position {positions[-1]} is past the model's context window "
                         f"(max_seq_len={model.config.max_seq_len}); allowed: 1..{model.config.max_seq_len}")
    return positions


# --------------------------------------------------------------------------------------------- timing

def _tokens(model, n: int, seed: int) -> torch.Tensor:
    """(1, n) random token ids; with random weights the text does not matter, only its length."""
    gen = torch.Generator().manual_seed(seed)
    return torch.randint(0, model.config.vocab_size, (1, n), generator=gen).to(model.device)


def _columns(runs: list[list[float]]) -> list[Timing]:
    """Per column (step or position) a Timing of its runs."""
    return [Timing(tuple(col)) for col in zip(*runs)]


def _reduce(timings: list[Timing], reduce: str) -> list[float]:
    """Per column the min or median over the runs, rounded to 1 µs."""
    return [round(getattr(t, reduce), SECONDS_DIGITS) for t in timings]


def _ranges(timings: list[Timing]) -> list[list[float]]:
    """Per column [fastest, slowest] run, rounded to 1 µs."""
    return [[round(t.min, SECONDS_DIGITS), round(t.max, SECONDS_DIGITS)] for t in timings]


def time_per_step(model, prompt_len: int, n_new: int, use_cache: bool = True, cache_kind: str = "static",
                  repeats: int = 3, warmup: int = 1, threads: int = 1, seed: int = 0,
                  reduce: str = "min") -> list[float]:
    """Seconds of each of the ``n_new`` steps of ``lib.generate`` (greedy, no early stop), as recorded in
    ``TraceStep.seconds`` (forward pass + choosing the token), reduced over ``repeats`` runs after ``warmup``
    untimed ones. Entry s is the step that ends at context length ``prompt_len + s``; with a cache entry 0 is
    the prefill of the whole prompt."""
    return _reduce(_step_timings(model, prompt_len, n_new, use_cache, cache_kind, repeats, warmup, threads, seed,
                                 reduce), reduce)


def _step_timings(model, prompt_len, n_new, use_cache, cache_kind, repeats, warmup, threads, seed,
                  reduce) -> list[Timing]:
    """``time_per_step``'s runs, one Timing per step."""
    _check_model(model, "time_per_step")
    checks.flag(use_cache, "use_cache")
    if cache_kind not in CACHE_KINDS:
        raise ValueError(f"cache_kind={cache_kind!r} is not known; allowed: {', '.join(CACHE_KINDS)}")
    prompt_len = checks.integer(prompt_len, "prompt_len", 1)
    n_new = checks.integer(n_new, "n_new (tokens to generate)", 1)
    _check_timing(repeats, warmup, threads, reduce)
    room = model.config.max_seq_len - prompt_len + 1
    if n_new > room:
        raise ValueError(f"prompt_len={prompt_len} and n_new={n_new} do not fit the model's context window "
                         f"(max_seq_len={model.config.max_seq_len}): at most {room} new token(s) fit")
    ids = _tokens(model, prompt_len, seed)
    runs = []
    with steady(threads):
        for r in range(warmup + repeats):
            out = generate(model, ids, n_new, use_cache=use_cache, cache_kind=cache_kind, trace=True)
            if r >= warmup:
                runs.append([s.seconds for s in out.trace])  # timed inside generate(), per step
    return _columns(runs)


@torch.no_grad()
def _one_step_seconds(model, ids, t: int, cache, clock) -> float:
    """Time the step that ends at context length t: feed ids[:, t-1] on top of a cache holding t-1
    positions, or (cache=None) feed all t tokens; then pick the next token, as generate() does. ``clock``:
    a ``lib.timing.CLOCKS`` name."""
    fed = ids[:, t - 1:t] if cache is not None else ids[:, :t]
    with Stopwatch(model.device, clock) as sw:
        logits = model(fed, cache=cache, last_only=True)[:, -1, :]  # (1, vocab): lm_head on the last position only
        torch.argmax(logits, dim=-1)
    return sw.seconds


@torch.no_grad()
def _run_positions(model, ids, positions, mode, clock) -> list[float]:
    """One pass over increasing positions: with a cache, fill it up to t-1 (untimed, in one chunk from the
    previous position), time one decode step, then crop the step's token off again."""
    use_cache, kind = _mode_args(mode)
    if not use_cache:
        return [_one_step_seconds(model, ids, t, None, clock) for t in positions]
    cache = CACHE_KINDS[kind](model.config, 1, positions[-1], device=model.device, dtype=model.dtype)
    out = []
    for t in positions:
        if t - 1 > cache.seq_len:
            model(ids[:, cache.seq_len:t - 1], cache=cache)  # untimed: bring the cache to t - 1 positions
        out.append(_one_step_seconds(model, ids, t, cache, clock))
        cache.crop(t - 1)
    return out


def time_at_positions(model, positions, mode: str = "static", repeats: int = 3, warmup: int = 1,
                      threads: int = 1, seed: int = 0, reduce: str = "min", clock: str = "wall") -> list[float]:
    """Seconds of one generation step at each context length in ``positions`` (strictly increasing,
    1..max_seq_len), reduced over ``repeats`` passes after ``warmup`` untimed ones.

    Same step as inside ``lib.generate`` (forward + argmax), without generating everything in between:
    "no cache" feeds t tokens; "static" / "concat" feed one token on top of a cache holding t − 1.

    clock="wall" times with ``time.perf_counter`` (what a user waits); clock="cpu" with ``time.thread_time``,
    the CPU seconds this thread spent (CPU model, threads=1 only): on a busy shared machine it leaves out the
    time other processes held the core, so it shows what the wall time would be on an idle one."""
    return _reduce(_position_timings(model, positions, mode, repeats, warmup, threads, seed, reduce, clock), reduce)


def _position_timings(model, positions, mode, repeats, warmup, threads, seed, reduce, clock) -> list[Timing]:
    """``time_at_positions``'s runs, one Timing per position."""
    _check_model(model, "time_at_positions")
    _mode_args(mode)
    _check_timing(repeats, warmup, threads, reduce)
    _check_clock(model, clock, threads)
    positions = _check_positions(model, positions)
    ids = _tokens(model, positions[-1], seed)
    runs = []
    with eval_mode(model), steady(threads):
        for r in range(warmup + repeats):
            secs = _run_positions(model, ids, positions, mode, clock)
            if r >= warmup:
                runs.append(secs)
    return _columns(runs)


# ----------------------------------------------------------------------------------- whole experiments

def _meta(model, modes, repeats, warmup, threads, reduce, kind) -> dict:
    return {"kind": kind, "modes": list(modes), "config": model.config.to_dict(), "repeats": repeats,
            "warmup": warmup, "threads": threads, "reduce": reduce}


def _slope(xs, ys, tail_fraction) -> float:
    return round(fit_loglog_slope(xs, ys, tail_fraction), SLOPE_DIGITS)


def measure_generation(model, n_new: int, prompt_len: int = 1, modes=MODES, repeats: int = 3, warmup: int = 1,
                       threads: int = 1, seed: int = 0, reduce: str = "min", tail_fraction: float = 0.5) -> dict:
    """Time every step of generating ``n_new`` tokens in each mode (``time_per_step``):

    {"positions": [prompt_len, ..., prompt_len + n_new - 1], "seconds": {mode: per-step seconds},
     "ranges": {mode: per-step [fastest, slowest] run},
     "cumulative": {mode: running totals}, "slopes": {mode: {"per_step": k, "cumulative": k}}, "prompt_len",
     "n_new", "kind": "generation", "modes", "config", "repeats", "warmup", "threads", "reduce"}

    The per-step slope leaves out step 0 (with a cache it is the prefill, a different kind of step); the
    cumulative slope keeps every step. Slopes are fitted over the last ``tail_fraction`` of the points."""
    _check_model(model, "measure_generation")
    modes = _check_modes(modes)
    if isinstance(n_new, int) and not isinstance(n_new, bool) and 1 <= n_new < 3:
        raise ValueError(f"measure_generation needs n_new >= 3 (a slope needs 2 steps after the first), "
                         f"got n_new={n_new}")
    positions = None
    result = {"positions": None, "seconds": {}, "ranges": {}, "cumulative": {}, "slopes": {}}
    for mode in modes:
        use_cache, kind = _mode_args(mode)
        timings = _step_timings(model, prompt_len, n_new, use_cache, kind, repeats, warmup, threads, seed, reduce)
        if positions is None:  # arguments are valid now: _step_timings checked them
            positions = [r["n_keys"] for r in generation_steps(model.config, prompt_len, n_new, True)]
        secs = _reduce(timings, reduce)
        cum = [round(x, SECONDS_DIGITS) for x in cumulative(secs)]
        result["seconds"][mode], result["cumulative"][mode] = secs, cum
        result["ranges"][mode] = _ranges(timings)
        result["slopes"][mode] = {"per_step": _slope(positions[1:], secs[1:], tail_fraction),
                                  "cumulative": _slope(positions, cum, tail_fraction)}
    result["positions"] = positions
    return {**result, "prompt_len": prompt_len, "n_new": n_new, "clock": "wall",
            **_meta(model, modes, repeats, warmup, threads, reduce, "generation")}


def measure_positions(model, positions, modes=MODES, repeats: int = 3, warmup: int = 1, threads: int = 1,
                      seed: int = 0, reduce: str = "min", clock: str = "wall", tail_fraction: float = 0.5) -> dict:
    """Time one step at each context length in ``positions``, in each mode (``time_at_positions``):

    {"positions": [...], "seconds": {mode: [...]}, "ranges": {mode: [[fastest, slowest], ...]},
     "slopes": {mode: {"per_step": k}}, "kind": "positions",
     "clock", "modes", "config", "repeats", "warmup", "threads", "reduce"}

    Cheap enough for long contexts on the larger model: it never runs the steps in between."""
    _check_model(model, "measure_positions")
    modes = _check_modes(modes)
    _check_clock(model, clock, threads)
    positions = _check_positions(model, positions)
    if len(positions) < 2:
        raise ValueError(f"measure_positions needs at least 2 positions to fit a slope, got {positions}")
    seconds, ranges, slopes = {}, {}, {}
    for mode in progress.bar(modes, desc="timing positions", unit="mode"):  # a bar where it is long
        timings = _position_timings(model, positions, mode, repeats, warmup, threads, seed, reduce, clock)
        seconds[mode], ranges[mode] = _reduce(timings, reduce), _ranges(timings)
        slopes[mode] = {"per_step": _slope(positions, seconds[mode], tail_fraction)}
    return {"positions": positions, "seconds": seconds, "ranges": ranges, "slopes": slopes, "clock": clock,
            **_meta(model, modes, repeats, warmup, threads, reduce, "positions")}


# ------------------------------------------------------------------------------------------- analysis

def cumulative(ys) -> list:
    """Running sums: [y0, y0 + y1, ...] (ints stay ints)."""
    return list(accumulate(ys))


def fit_loglog_slope(xs, ys, tail_fraction: float = 0.5) -> float:
    """Least-squares slope k of log y = k·log x + c over the last ``tail_fraction`` of the points (at least 2).

    y = c·x^k gives exactly k. Fitting only the tail reads the exponent that wins for large x: per-step
    FLOPs a·t + b·t² look linear at first and quadratic only once the t² term dominates."""
    if len(xs) != len(ys):
        raise ValueError(f"xs and ys must have the same length, got {len(xs)} xs and {len(ys)} ys")
    if len(xs) < 2:
        raise ValueError(f"a slope needs at least 2 points, got {len(xs)}")
    tail_fraction = checks.number(tail_fraction, "tail_fraction", maximum=1, above=0, allowed=(
        "a number in (0, 1] (the share of points, counted from the end, that the fit uses)"))
    n = max(2, math.ceil(len(xs) * tail_fraction))
    x = np.asarray(xs[len(xs) - n:], dtype=np.float64)  # float64: exact for counts below 2**53
    y = np.asarray(ys[len(ys) - n:], dtype=np.float64)
    bad = ~((x > 0) & (y > 0) & np.isfinite(x) & np.isfinite(y))
    if bad.any():
        i = int(np.argmax(bad))
        raise ValueError(f"a log-log fit needs positive, finite x and y; {int(bad.sum())} fitted point(s) are "
                         f"not, the first is (x, y) = ({xs[len(xs) - n + i]}, {ys[len(ys) - n + i]})")
    lx, ly = np.log(x), np.log(y)
    dx = lx - lx.mean()
    sxx = float(dx @ dx)
    if sxx == 0:
        raise ValueError(f"a slope needs at least 2 different x values in the fitted tail, got x = {x.tolist()}")
    return float(dx @ (ly - ly.mean())) / sxx

"""Requests that arrive over time, and what the arrival rate does to throughput and latency (the knee where the
queue starts to grow).

    poisson_arrivals(n, rate, seed) -> [t0, t1, ...]        a Poisson process: gaps drawn from an exponential of
                                                            mean 1 / rate (seeded), the first request at 0
    arrivals(tokenizer, n, rate, ...) -> [Arrival]          those times with prompts: held-out text (or given
                                                            ones), optionally after one shared system prompt
    run_arrivals(engine, arrivals, clock=...) -> LoadPoint  the engine stepped on a clock, each request added when
                                                            the clock reaches its arrival; latencies on that clock
    rate_sweep(model, tokenizer, rates, ...) -> [LoadPoint] static and continuous batching at each rate

The clock, in seconds (``clock=``):
    "measured"   each step costs what it took on this machine (``StepEvents.seconds``: the scheduler, the pass,
                 the bookkeeping); while the engine has nothing to do the clock jumps to the next arrival (no
                 sleeping), so a sweep takes the time of its passes only. Timings vary run to run.
    "predicted"  each step costs what its pass would take on ``machine`` (default the H100 SXM) for ``priced_as``
                 (a config or a model, default the model served; e.g. ``lib.PRESETS["llama-3-8b"]``: the same
                 requests' lengths on a real model's shapes), priced by the roofline (``pass_seconds``). The same
                 on every run: a deterministic twin of the measured curve, a lower bound (every kernel at its roof).

What a point reports (``LoadPoint``): tokens made per second of the clock (from the first arrival to the last
finish); time to first token (TTFT: arrival to first token, queueing included) and time per output token (TPOT:
first token to last over the tokens between), each as mean and p90 over requests; the queue (requests waiting
after each step: mean and most); the prefix cache's hits (blocks a prompt took from it instead of computing them,
and the share of prefill tokens they supplied).
"""
from __future__ import annotations

import math
import random
import statistics
from dataclasses import dataclass

import torch

from .. import checks
from ..memo import memoised
from ..text import sig
from .batching import text_requests
from .engine import Engine
from .latency import pass_seconds

CLOCKS = ("measured", "predicted")


@dataclass(frozen=True)
class Arrival:
    """A request and when it arrives (seconds of the run's clock)."""

    at: float
    prompt: list
    max_new_tokens: int


def poisson_arrivals(n: int, rate: float, seed: int = 0) -> list[float]:
    """``n`` arrival times of a Poisson process of ``rate`` requests per second: the first at 0, then gaps drawn
    from an exponential distribution of mean 1 / rate (Python's ``random``, seeded)."""
    n = checks.integer(n, "n", 1)
    rate = checks.number(rate, "rate", above=0, allowed="a finite number > 0 (requests per second)")
    rng, t, out = random.Random(checks.integer(seed, "seed")), 0.0, []
    for _ in range(n):
        out.append(t)
        t += rng.expovariate(rate)
    return out


def arrivals(tokenizer, n: int, rate: float, seed: int = 0, prompts=None, system_prompt: str | None = None,
             max_prompt: int = 64, max_new_tokens: int = 32) -> list[Arrival]:
    """``n`` requests arriving as ``poisson_arrivals(n, rate, seed)``. Prompts: held-out text (``text_requests``:
    <s>, a passage cut to ``max_prompt`` tokens, a blank line; each may make as many tokens as the passage after
    it has, at most ``max_new_tokens``), or ``prompts`` (strings, taken in turn; each makes ``max_new_tokens``).
    ``system_prompt``: one text put after <s> in front of every prompt, as a chat service puts its instructions,
    so prefix caching has something to share."""
    times = poisson_arrivals(n, rate, seed)
    if prompts is None:
        reqs = [(r.prompt, r.max_new_tokens) for r in text_requests(tokenizer, n, max_prompt, max_new_tokens)]
    else:
        prompts = [checks.text(p, f"prompts[{i}]") for i, p in enumerate(prompts)]
        if not prompts:
            raise ValueError("prompts is empty: give at least one prompt, or None for held-out text")
        n_new = checks.integer(max_new_tokens, "max_new_tokens", 1)
        reqs = [([tokenizer.bos_id] + tokenizer.encode(prompts[i % len(prompts)]), n_new) for i in range(n)]
    shared = [] if system_prompt is None else tokenizer.encode(checks.text(system_prompt, "system_prompt"))
    return [Arrival(t, ids[:1] + shared + ids[1:], n_new) for t, (ids, n_new) in zip(times, reqs)]


@dataclass(frozen=True)
class LoadPoint:
    """One run of requests arriving at ``rate`` per second, on one clock (``CLOCKS``); times in seconds."""

    policy: str
    rate: float
    clock: str
    requests: int
    tokens: int
    seconds: float  # from the first arrival to the last finish
    ttft: list  # per request, in arrival order: arrival to first token
    tpot: list  # per request that made two tokens or more: (last token - first token) / (tokens - 1)
    queue: list  # per step: requests waiting after it
    steps: int
    prefill_tokens: int  # tokens prefills fed (recomputations included)
    prefix_hit_tokens: int  # prompt tokens the prefix cache supplied instead (whole blocks)

    @property
    def tokens_per_second(self) -> float:
        return self.tokens / self.seconds if self.seconds > 0 else float("nan")

    @property
    def prefix_hit_rate(self) -> float:
        """Of every prompt token a prefill needed, the share the prefix cache supplied."""
        needed = self.prefix_hit_tokens + self.prefill_tokens
        return self.prefix_hit_tokens / needed if needed else float("nan")

    def row(self) -> dict:
        """The point as a table row (times in ms, 3 significant digits)."""
        return {"policy": self.policy, "rate (req/s)": sig(self.rate), "clock": self.clock,
                "tokens/s": sig(self.tokens_per_second), "TTFT mean (ms)": _ms(statistics.mean, self.ttft),
                "TTFT p90 (ms)": _ms(p90, self.ttft), "TPOT mean (ms)": _ms(statistics.mean, self.tpot),
                "TPOT p90 (ms)": _ms(p90, self.tpot), "mean queue": sig(statistics.mean(self.queue or [0])),
                "max queue": max(self.queue, default=0), "prefix hit rate": sig(self.prefix_hit_rate)}


def _ms(stat, seconds: list) -> float:
    return sig(1e3 * stat(seconds)) if seconds else float("nan")


def p90(xs) -> float:
    """The 90th percentile (linear between the two nearest values, numpy's default rule, as ``lib.timing``)."""
    xs = list(xs)
    return statistics.quantiles(xs, n=10, method="inclusive")[8] if len(xs) > 1 else xs[0]


def run_arrivals(engine: Engine, requests, rate: float = float("nan"), clock: str = "measured", priced_as=None,
                 machine=None, dtype=torch.float16) -> LoadPoint:
    """Step ``engine`` until every one of ``requests`` (``Arrival`` objects, in order of arrival) has arrived
    and finished, each added when the clock reaches its arrival time. ``rate``: what to call the point."""
    clock = checks.choice(clock, "clock", CLOCKS)
    requests = sorted(requests, key=lambda a: a.at)
    price = engine.model.config if priced_as is None else priced_as
    t, i, times, queue = 0.0, 0, {}, []  # times: rid -> [arrival, first token, last token]
    while i < len(requests) or engine.has_unfinished():
        if not engine.has_unfinished():
            t = max(t, requests[i].at)  # nothing to run: the clock jumps to the next arrival
        while i < len(requests) and requests[i].at <= t:
            a = requests[i]
            times[engine.add_request(a.prompt, a.max_new_tokens)] = [a.at, float("nan"), float("nan")]
            i += 1
        ev = engine.step()
        t += ev.seconds if clock == "measured" else pass_seconds([ev.fed], price, machine, dtype)[0]
        for rid in ev.tokens:  # a token made at the end of this step
            if math.isnan(times[rid][1]):
                times[rid][1] = t
            times[rid][2] = t
        queue.append(len(engine.scheduler.waiting))
    res = engine.result()
    made = {s.rid: len(s.tokens) for s in res.records}
    return LoadPoint(res.policy, rate, clock, len(times), sum(made.values()),
                     max((last for _, _, last in times.values()), default=0.0) - min(a.at for a in requests),
                     [first - at for at, first, _ in times.values()],
                     [(last - first) / (made[rid] - 1) for rid, (_, first, last) in times.items() if made[rid] > 1],
                     queue, res.steps, res.prefill_tokens, res.prefix_hit_blocks * engine.pool.block_size)


@memoised(when=lambda a: a["clock"] != "measured")  # a measured clock is not a pure function
def rate_sweep(model, tokenizer, rates, policies=("static", "continuous"), n: int = 24, seed: int = 0,
               clock: str = "measured", priced_as=None, machine=None, prompts=None, system_prompt: str | None = None,
               max_prompt: int = 64, max_new_tokens: int = 32, **engine_settings) -> list[LoadPoint]:
    """For each policy and each arrival rate (requests per second of the clock), ``n`` requests
    (``arrivals(tokenizer, n, rate, seed, ...)``: the same prompts at every rate) served by a fresh ``Engine``
    (``engine_settings``: max_batch, n_blocks, prefix_cache, ...) on ``clock``; one ``LoadPoint`` each, policies
    outer, rates inner."""
    rates = [checks.number(r, "every rate", above=0, allowed="a finite number > 0 (requests per second)")
             for r in rates]
    out = []
    for policy in policies:
        for rate in rates:
            engine = Engine(model, tokenizer, policy=policy, **engine_settings)
            reqs = arrivals(tokenizer, n, rate, seed, prompts, system_prompt, max_prompt, max_new_tokens)
            out.append(run_arrivals(engine, reqs, rate, clock, priced_as, machine))
    return out

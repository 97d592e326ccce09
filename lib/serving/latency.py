"""Prefill vs decode as a user feels them: time to first token (TTFT: the prefill of the prompt) and time per
output token (TPOT: one decode step), measured on a real model here and predicted by the roofline for a
reference GPU.

    measure_latency(model, prompt_len, n_new=16, repeats=3, threads=1) -> Latency
        ``lib.measure.time_per_step`` on ``model`` (its step 0 is the prefill): TTFT = the prefill's time, TPOT =
        the median of the decode steps (each the best of ``repeats`` runs)
    predicted_latency(model, prompt_len, n_new=16, machine=None, dtype=torch.float16) -> Latency
        ``lib.costs.prefill_cost`` / ``decode_cost`` priced by ``Machine.seconds`` (max(FLOPs / peak, bytes /
        bandwidth)): the prefill feeds many tokens per weight read (compute-bound once the prompt is long enough),
        a decode step one (memory-bound)

A ``Latency`` holds both times, the prompt length, and (predicted) which roof bounds each.

    pass_seconds(passes, model, machine=None, dtype=torch.float16) -> list[float]
        the one pricing of a serving run's forward passes (``SimResult`` and ``ServeResult.step_seconds``): each
        pass {(n_new, context): sequences} by the roofline, the weights read once per pass
"""
from __future__ import annotations

import statistics
from dataclasses import dataclass

import torch

from .. import checks, costs
from ..roofline import DEFAULT_GPU, as_machine
from ..text import sig


@dataclass(frozen=True)
class Latency:
    prompt_len: int
    ttft_seconds: float  # time to first token: the prefill
    tpot_seconds: float  # time per output token: a decode step (median over the generation)
    ttft_bound: str = ""  # predicted: "compute" or "memory"
    tpot_bound: str = ""

    @property
    def ratio(self) -> float:
        """TTFT / TPOT: how many decode steps one prefill of this prompt costs."""
        return self.ttft_seconds / self.tpot_seconds

    def row(self, name: str) -> dict:
        out = {"run": name, "prompt": self.prompt_len, "TTFT (ms)": sig(1e3 * self.ttft_seconds, 3),
               "TPOT (ms)": sig(1e3 * self.tpot_seconds, 3), "TTFT / TPOT": sig(self.ratio, 3)}
        if self.ttft_bound:
            out |= {"prefill bound": self.ttft_bound, "decode bound": self.tpot_bound}
        return out


def measure_latency(model, prompt_len: int, n_new: int = 16, repeats: int = 3, threads: int = 1) -> Latency:
    """TTFT and TPOT of ``model`` measured here: one ``lib.generate`` run per repeat on a prompt of ``prompt_len``
    tokens, every step timed (``lib.measure.time_per_step``, best of ``repeats``); TTFT is step 0 (the prefill),
    TPOT the median of the ``n_new - 1`` decode steps. Times vary run to run."""
    from ..measure import time_per_step

    n_new = checks.integer(n_new, "n_new", 2, allowed="an integer >= 2 (a prefill and at least one decode step)")
    steps = time_per_step(model, prompt_len, n_new, repeats=repeats, threads=threads)
    return Latency(prompt_len, steps[0], statistics.median(steps[1:]))


def predicted_latency(model, prompt_len: int, n_new: int = 16, machine=None, dtype=torch.float16) -> Latency:
    """TTFT and TPOT of ``model`` (a config, a preset or a model) on ``machine`` (default the H100 SXM) by the
    roofline: the prefill of ``prompt_len`` tokens, and the mean of the ``n_new - 1`` decode steps after it."""
    machine = as_machine(machine, default=DEFAULT_GPU)
    prompt_len = checks.integer(prompt_len, "prompt_len", 1)
    n_new = checks.integer(n_new, "n_new", 2, allowed="an integer >= 2 (a prefill and at least one decode step)")
    prefill = costs.prefill_cost(model, prompt_len, 1, dtype)
    decodes = [costs.decode_cost(model, prompt_len + i, 1, dtype) for i in range(1, n_new)]
    tpot = statistics.mean(machine.seconds(c) for c in decodes)
    return Latency(prompt_len, machine.seconds(prefill), tpot, machine.bound(prefill.intensity),
                   machine.bound(decodes[-1].intensity))


def pass_seconds(passes, model, machine=None, dtype=torch.float16) -> list[float]:
    """Each forward pass's time on ``machine`` (default the H100 SXM) for ``model`` (a config or a model): a pass is
    {(n_new, context): sequences}, every sequence feeding n_new tokens over context positions; priced by the
    roofline (max(FLOPs / peak, bytes / bandwidth)) with the weights read once per pass and each sequence's K/V
    read and written (``lib.costs.step_cost``). The one pricing of ``SimResult`` and ``ServeResult``."""
    machine = as_machine(machine, default=DEFAULT_GPU)
    weights = costs.streamed_weight_bytes(model, dtype)
    per_seq = {}  # (n_new, context) -> (FLOPs, K/V bytes) of one sequence: the costs of lib.costs.step_cost
    out = []
    for fed in passes:
        flops = kv = 0
        for (n_new, context), n in fed.items():
            if (n_new, context) not in per_seq:
                c = costs.step_cost(model, context, n_new, 1, dtype)
                per_seq[n_new, context] = (c.flops, c.kv_read_bytes + c.kv_write_bytes)
            f, b = per_seq[n_new, context]
            flops, kv = flops + n * f, kv + n * b
        out.append(max(flops / (machine.peak_gflops * 1e9), (weights + kv) / (machine.bandwidth_gbs * 1e9)))
    return out

"""Timing, in one place: lib's measurements and its benchmark time through here, as a median AND a spread.

Two ways to time a piece of work, both with the device synchronised (``lib.device.synchronize``), so that a
GPU's queued kernels are counted, not only their launch:

    benchmark(fn, device="cpu", threads=None, min_runs=5, min_run_time=0.1) -> Timing
        PyTorch's ``torch.utils.benchmark.Timer`` (``blocked_autorange``): a warm-up, a block size chosen so
        the clock's own cost vanishes, a fixed torch thread count, as many runs as fit in ``min_run_time``
        (at least ``min_runs``). For work whose result is thrown away: a matrix product, a memory read, one
        forward pass, a whole ``generate()`` timed as a unit.
    time_call(fn, device="cpu", clock="wall") -> (seconds, result)
        one call, its result kept: a ``generate()`` whose tokens are then compared, a decode step that
        changes its cache. ``Stopwatch`` is the same as a ``with`` block (a step inside a loop).

A ``Timing`` holds the seconds of every run and reports ``median``, ``min``/``max`` and the quartiles;
``rank(a, b)`` says which of two is faster only when their ranges (min..max) do not overlap.
``steady(threads)`` is the setting every timing loop runs in: a fixed torch thread count, the garbage
collector paused. Times vary run to run and machine to machine: tests never assert on them.
"""
from __future__ import annotations

import gc
import math
import statistics
from contextlib import contextmanager
from dataclasses import dataclass
from time import perf_counter, thread_time

from . import checks
from .device import fixed_threads, synchronize
from .text import fmt_sig

CLOCKS = {"wall": perf_counter, "cpu": thread_time}  # cpu: CPU seconds of this thread (CPU work, one thread)
# Two equally fast things look apart by chance: with 2 runs each 1 time in 3, with 3 each 1 in 10, 5 each 1 in 126
MIN_RUNS_TO_RANK = 3


def _clock(clock: str):
    if clock not in CLOCKS:
        raise ValueError(f"clock={clock!r} is not known; allowed: {', '.join(CLOCKS)}")
    return CLOCKS[clock]


# ------------------------------------------------------------------------------------------- a Timing

@dataclass(frozen=True)
class Timing:
    """The seconds of every timed run of one thing (for ``benchmark``: per call, averaged over a block)."""

    seconds: tuple

    def __post_init__(self):
        secs = tuple(self.seconds)
        if not secs:
            raise ValueError("a Timing needs the seconds of at least one run, got none")
        bad = [s for s in secs if isinstance(s, bool) or not isinstance(s, (int, float)) or not math.isfinite(s)
               or s < 0]
        if bad:
            raise ValueError(f"a Timing holds seconds: finite numbers >= 0, got {bad[0]!r}")
        object.__setattr__(self, "seconds", tuple(float(s) for s in secs))

    def __len__(self) -> int:
        return len(self.seconds)

    @property
    def runs(self) -> int:
        return len(self.seconds)

    @property
    def median(self) -> float:
        return statistics.median(self.seconds)

    @property
    def min(self) -> float:
        """The fastest run: the least disturbed one (other processes only ever add time)."""
        return min(self.seconds)

    @property
    def max(self) -> float:
        return max(self.seconds)

    def _quartiles(self) -> tuple[float, float]:
        if len(self.seconds) == 1:
            return self.seconds[0], self.seconds[0]
        q1, _, q3 = statistics.quantiles(self.seconds, n=4, method="inclusive")  # numpy's default rule
        return q1, q3

    @property
    def q1(self) -> float:
        return self._quartiles()[0]

    @property
    def q3(self) -> float:
        return self._quartiles()[1]

    @property
    def iqr(self) -> float:
        """Interquartile range q3 − q1: the spread of the middle half of the runs."""
        q1, q3 = self._quartiles()
        return q3 - q1

    def to_dict(self, digits: int = 6) -> dict:
        """Plain data (for JSON): every run and the summary, rounded to ``digits`` decimals of a second."""
        r = lambda x: round(x, digits)  # noqa: E731
        return {"runs": self.runs, "seconds": [r(s) for s in self.seconds], "median": r(self.median),
                "min": r(self.min), "max": r(self.max), "q1": r(self.q1), "q3": r(self.q3)}

    def summary(self) -> str:
        """'27.3 ms (26.9–28.1 ms, 8 runs)': the median, then the range of the runs."""
        scale, unit = _unit(self.median)
        return (f"{_sig3(self.median * scale)} {unit} ({_sig3(self.min * scale)}–{_sig3(self.max * scale)} {unit}, "
                f"{self.runs} run{'s' * (self.runs != 1)})")


def _unit(seconds: float) -> tuple[float, str]:
    if seconds >= 1:
        return 1.0, "s"
    if seconds >= 1e-3:
        return 1e3, "ms"
    return 1e6, "µs"


def _sig3(x: float) -> str:
    """A time shown with three significant digits, trailing zeros kept: 1.00, 27.3, 0.452 (``lib.text.fmt_sig``)."""
    return fmt_sig(x, 3, zeros=True)


def as_timing(x) -> Timing:
    """A Timing, or the seconds of its runs (a list or tuple) made into one."""
    return x if isinstance(x, Timing) else Timing(tuple(x))


# ---------------------------------------------------------------------------------------- ranking two

def rank(a, b, names=("a", "b"), min_runs: int = MIN_RUNS_TO_RANK) -> dict:
    """How ``a``'s time compares with ``b``'s (Timings, or lists of per-run seconds), honestly:

    {"separated": bool, "faster": a's or b's name or None, "ratio": b.median / a.median or None,
     "ratio_range": [b.min / a.max, b.max / a.min] or None, "runs": [len(a), len(b)], "why": str}

    Separated means every run of one is faster than every run of the other (the ranges min..max do not
    overlap), each with at least ``min_runs`` runs. Only then is there a ranking: ``ratio`` is how many times
    faster ``a`` is (> 1: ``a`` is faster; for the same work also the ratio of the rates, tokens/s) and
    ``ratio_range`` the least and most the ranges allow. Otherwise ``faster``, ``ratio`` and ``ratio_range``
    are None and ``why`` says what is missing: runs, or ranges that do not overlap."""
    a, b = as_timing(a), as_timing(b)
    min_runs = checks.integer(min_runs, "min_runs", 1, allowed="a positive integer")
    scale, unit = _unit(min(a.median, b.median))
    span = lambda t: f"{_sig3(t.min * scale)}–{_sig3(t.max * scale)} {unit}"  # noqa: E731
    out = {"separated": False, "faster": None, "ratio": None, "ratio_range": None, "runs": [a.runs, b.runs]}
    if a.runs < min_runs or b.runs < min_runs:
        return {**out, "why": f"not ranked: {a.runs} and {b.runs} run(s), a ranking needs at least {min_runs} "
                              f"of each"}
    if a.max < b.min or b.max < a.min:
        fast, slow = (a, b) if a.max < b.min else (b, a)
        positive = a.min > 0 and b.min > 0
        return {**out, "separated": True, "faster": names[0] if fast is a else names[1],
                "ratio": b.median / a.median if positive else None,
                "ratio_range": [b.min / a.max, b.max / a.min] if positive else None,
                "why": f"separated: every run of {names[0] if fast is a else names[1]} is faster "
                       f"({span(fast)} vs {span(slow)})"}
    return {**out, "why": f"not separated after {a.runs} and {b.runs} runs: the ranges overlap "
                          f"({span(a)} vs {span(b)})"}


# ------------------------------------------------------------------------------------------- clocks

class Stopwatch:
    """``with Stopwatch(device) as sw: ...`` then ``sw.seconds``: the block's time, the device synchronised
    before and after. ``clock="cpu"`` counts this thread's CPU time instead (CPU work only)."""

    def __init__(self, device="cpu", clock: str = "wall"):
        self.device, self._now, self.seconds = device, _clock(clock), None

    def __enter__(self):
        synchronize(self.device)
        self._t0 = self._now()
        return self

    def __exit__(self, *exc):
        synchronize(self.device)
        self.seconds = self._now() - self._t0
        return False


def time_call(fn, device="cpu", clock: str = "wall"):
    """``(seconds, result)`` of one call of ``fn()``, the device synchronised before and after."""
    with Stopwatch(device, clock) as sw:
        out = fn()
    return sw.seconds, out


@contextmanager
def steady(threads: int | None = None):
    """A fixed torch thread count (None: the current one) and no garbage collection while timing; both
    restored afterwards, also after an error."""
    gc_was_on = gc.isenabled()
    with fixed_threads(threads) as n:
        gc.collect()
        gc.disable()
        try:
            yield n
        finally:
            if gc_was_on:
                gc.enable()


def benchmark(fn, device="cpu", threads: int | None = None, min_runs: int = 5, min_run_time: float = 0.1) -> Timing:
    """Time ``fn()`` with ``torch.utils.benchmark.Timer(...).blocked_autorange``: a warm-up, a block size at
    which the clock's overhead vanishes, ``threads`` torch threads (None: the current number), runs until
    ``min_run_time`` seconds have passed and at least ``min_runs`` runs are in. Each run's seconds are
    per call (a block's time ÷ its calls). The device is synchronised at every clock reading."""
    from torch.utils.benchmark import Timer

    min_runs = checks.integer(min_runs, "min_runs", 1, allowed="a positive integer")
    checks.number(min_run_time, "min_run_time", above=0, allowed="a positive number of seconds")
    with fixed_threads(threads) as n:
        def now():
            synchronize(device)
            return perf_counter()

        timer = Timer(stmt="fn()", globals={"fn": fn}, timer=now, num_threads=n)
        times: list[float] = []
        while len(times) < min_runs:  # usually once; again (with a new warm-up) if too few runs fitted
            times += timer.blocked_autorange(min_run_time=min_run_time).times
    return Timing(tuple(times))


__all__ = ["CLOCKS", "MIN_RUNS_TO_RANK", "Stopwatch", "Timing", "as_timing", "benchmark", "rank", "steady",
           "time_call"]

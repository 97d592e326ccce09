"""lib.timing: the one home of timing. Statistics and rankings on made-up seconds; clocks on a fake clock;
real timings only for their shape (never their values)."""
import gc
import math

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from lib import timing
from lib.timing import MIN_RUNS_TO_RANK, Stopwatch, Timing, benchmark, rank, steady, time_call

# ------------------------------------------------------------------------------------------- a Timing


def test_timing_statistics_match_numpy():
    secs = [3.0, 1.0, 2.0, 10.0]
    t = Timing(secs)
    assert t.seconds == (3.0, 1.0, 2.0, 10.0) and len(t) == t.runs == 4  # every run kept, in order
    assert (t.median, t.min, t.max) == (2.5, 1.0, 10.0)
    q1, q3 = np.percentile(secs, [25, 75])  # numpy's default (linear) rule
    assert (t.q1, t.q3) == pytest.approx((q1, q3)) == (1.75, 4.75)
    assert t.iqr == pytest.approx(3.0)


@settings(max_examples=50, deadline=None)
@given(st.lists(st.floats(0, 10, allow_nan=False), min_size=1, max_size=30))
def test_timing_quartiles_are_numpy_s_and_lie_inside_the_range(secs):
    t = Timing(secs)
    assert (t.q1, t.median, t.q3) == pytest.approx(tuple(np.percentile(secs, [25, 50, 75])), abs=1e-12)
    assert t.min <= t.q1 <= t.median <= t.q3 <= t.max and t.iqr >= 0


def test_one_run_has_no_spread():
    t = Timing([0.5])
    assert t.median == t.min == t.max == t.q1 == t.q3 == 0.5 and t.iqr == 0


@pytest.mark.parametrize("secs, message", [
    ([], "a Timing needs the seconds of at least one run, got none"),
    ([1.0, -0.1], "a Timing holds seconds: finite numbers >= 0, got -0.1"),
    ([math.nan], "finite numbers >= 0, got nan"),
    ([math.inf], "finite numbers >= 0, got inf"),
    ([True], "finite numbers >= 0, got True"),
    (["1"], "finite numbers >= 0, got '1'"),
])
def test_timing_refuses_what_is_not_seconds(secs, message):
    with pytest.raises(ValueError) as e:
        Timing(secs)
    assert message in str(e.value)


def test_timing_as_plain_data_and_as_text():
    t = Timing([0.0273, 0.0269, 0.0281])
    assert t.to_dict() == {"runs": 3, "seconds": [0.0273, 0.0269, 0.0281], "median": 0.0273, "min": 0.0269,
                           "max": 0.0281, "q1": 0.0271, "q3": 0.0277}
    assert Timing([1 / 3]).to_dict(digits=3)["seconds"] == [0.333]
    assert t.summary() == "27.3 ms (26.9–28.1 ms, 3 runs)"
    assert Timing([1.0, 1.2, 1.5]).summary() == "1.20 s (1.00–1.50 s, 3 runs)"
    assert Timing([4.5e-7]).summary() == "0.450 µs (0.450–0.450 µs, 1 run)"
    assert timing.as_timing([1, 2]) == Timing((1.0, 2.0)) and timing.as_timing(t) is t


# ---------------------------------------------------------------------------------------- ranking two

def test_rank_separated_ranges():
    r = rank([1.0, 1.1, 1.2], [1.5, 1.6, 1.7], names=("fast", "slow"))
    assert r["separated"] is True and r["faster"] == "fast" and r["runs"] == [3, 3]
    assert r["ratio"] == pytest.approx(1.6 / 1.1)  # how many times faster a is: b's median / a's
    assert r["ratio_range"] == pytest.approx([1.5 / 1.2, 1.7 / 1.0])
    assert r["why"] == "separated: every run of fast is faster (1.00–1.20 s vs 1.50–1.70 s)"
    r = rank([1.5, 1.6, 1.7], [1.0, 1.1, 1.2], names=("x", "y"))  # b faster: a ratio below 1
    assert r["faster"] == "y" and r["ratio"] == pytest.approx(1.1 / 1.6) and r["ratio_range"][1] < 1
    assert r["why"] == "separated: every run of y is faster (1.00–1.20 s vs 1.50–1.70 s)"


def test_rank_refuses_overlapping_ranges():
    """The quick benchmark's trap: medians 1.10 vs 1.25 s look like a ranking, the runs do not."""
    r = rank([1.0, 1.1, 1.3], [1.2, 1.25, 1.4])
    assert r["separated"] is False and r["faster"] is r["ratio"] is r["ratio_range"] is None
    assert r["why"] == "not separated after 3 and 3 runs: the ranges overlap (1.00–1.30 s vs 1.20–1.40 s)"
    touching = rank([1.0, 1.1, 1.2], [1.2, 1.3, 1.4])  # one run of each took the same time: not separated
    assert touching["separated"] is False and touching["why"].startswith("not separated after 3 and 3 runs")


def test_rank_needs_enough_runs_of_each():
    assert MIN_RUNS_TO_RANK == 3
    r = rank([1.0, 1.1], [2.0, 2.1, 2.2])  # far apart, but 2 runs: 1 time in 3 two equal things look apart
    assert r["separated"] is False and r["ratio"] is None
    assert r["why"] == "not ranked: 2 and 3 run(s), a ranking needs at least 3 of each"
    assert rank([1.0, 1.1], [2.0, 2.1], min_runs=2)["separated"] is True
    for bad in (0, 1.5, True, "3"):
        with pytest.raises(ValueError, match=r"min_runs must be a positive integer, got"):
            rank([1.0], [2.0], min_runs=bad)


@settings(max_examples=60, deadline=None)
@given(a=st.lists(st.floats(1e-6, 10), min_size=1, max_size=8), b=st.lists(st.floats(1e-6, 10), min_size=1,
                                                                             max_size=8))
def test_rank_is_symmetric_and_only_ranks_what_every_run_agrees_on(a, b):
    ab, ba = rank(a, b, names=("a", "b")), rank(b, a, names=("b", "a"))
    assert ab["separated"] == ba["separated"] and ab["faster"] == ba["faster"]
    if ab["separated"]:
        fast, slow = (a, b) if ab["faster"] == "a" else (b, a)
        assert max(fast) < min(slow) and min(len(a), len(b)) >= MIN_RUNS_TO_RANK
        assert ab["ratio"] * ba["ratio"] == pytest.approx(1)
        low, high = ab["ratio_range"]
        assert low <= ab["ratio"] <= high and (low > 1) == (ab["faster"] == "a")
    else:
        assert ab["ratio"] is None and ab["faster"] is None


# ------------------------------------------------------------------------------------------- clocks

@pytest.fixture
def fake_clock(monkeypatch):
    """The wall clock reads 10, 12.5, 20, ...; every device synchronisation is recorded."""
    ticks, synced = iter([10.0, 12.5, 20.0, 21.0]), []
    monkeypatch.setitem(timing.CLOCKS, "wall", lambda: next(ticks))
    monkeypatch.setattr(timing, "synchronize", lambda device: synced.append(str(device)))
    return synced


def test_stopwatch_synchronises_before_and_after(fake_clock):
    with Stopwatch("cuda:1") as sw:
        assert fake_clock == ["cuda:1"]  # queued work finished before the clock starts
    assert sw.seconds == 2.5 and fake_clock == ["cuda:1", "cuda:1"]
    assert time_call(lambda: "result", "cpu") == (1.0, "result")


def test_clock_names():
    assert set(timing.CLOCKS) == {"wall", "cpu"}
    with Stopwatch(clock="cpu") as sw:
        sum(range(1000))
    assert sw.seconds >= 0
    with pytest.raises(ValueError, match=r"clock='gpu' is not known; allowed: wall, cpu"):
        Stopwatch(clock="gpu")


def test_steady_fixes_threads_pauses_gc_and_restores_both_after_an_error():
    threads, gc_on = torch.get_num_threads(), gc.isenabled()
    with pytest.raises(RuntimeError, match="boom"):
        with steady(1) as n:
            assert n == 1 and torch.get_num_threads() == 1 and not gc.isenabled()
            raise RuntimeError("boom")
    assert torch.get_num_threads() == threads and gc.isenabled() == gc_on
    with steady() as n:  # None: the current thread count
        assert n == threads


def test_benchmark_uses_torch_utils_benchmark_and_reports_every_run(monkeypatch):
    calls, synced = [], []
    monkeypatch.setattr(timing, "synchronize", lambda device: synced.append(device))
    threads = torch.get_num_threads()
    t = benchmark(lambda: calls.append(1), "cpu", threads=1, min_runs=7, min_run_time=0.01)
    assert isinstance(t, Timing) and t.runs >= 7 and all(s > 0 for s in t.seconds)
    assert len(calls) > t.runs  # the warm-up (Timer's block-size estimate) ran it too
    assert synced and set(synced) == {"cpu"}  # at every clock reading
    assert torch.get_num_threads() == threads


@pytest.mark.parametrize("kw, message", [
    (dict(min_runs=0), "min_runs must be a positive integer, got 0"),
    (dict(min_runs=2.0), "min_runs must be a positive integer, got 2.0"),
    (dict(min_run_time=0), "min_run_time must be a positive number of seconds, got 0"),
    (dict(threads=0), "threads must be a positive integer"),
])
def test_benchmark_errors(kw, message):
    with pytest.raises(ValueError) as e:
        benchmark(lambda: None, **kw)
    assert message in str(e.value)

"""lib.measure: slope fits, timing helpers' shapes and arguments (never the times themselves)."""
import gc
import math

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

import lib
from lib import measure
from lib.costs import generation_steps
from lib.measure import (MODES, cumulative, fit_loglog_slope, larger_config, log_positions, measure_generation,
                         measure_positions, random_model, time_at_positions, time_per_step)

SMALL = lib.ModelConfig(vocab_size=20, n_layers=1, d_model=16, n_heads=2, max_seq_len=24)


@pytest.fixture(scope="module")
def small():
    return random_model(SMALL, seed=1)


# ------------------------------------------------------------------------------------------ slopes

@settings(max_examples=40, deadline=None)
@given(k=st.floats(-2, 4), c=st.floats(1e-3, 1e6), start=st.integers(1, 50), count=st.integers(2, 60))
def test_slope_recovers_exponent_of_power_law(k, c, start, count):
    xs = list(range(start, start + count))
    ys = [c * x ** k for x in xs]
    assert fit_loglog_slope(xs, ys, tail_fraction=1.0) == pytest.approx(k, abs=1e-9)


def test_slope_reads_the_winning_exponent_in_the_tail():
    xs = list(range(1, 20001))
    ys = [x + x * x / 1000 for x in xs]  # linear for x << 1000, quadratic for x >> 1000
    head = fit_loglog_slope(xs[:100], ys[:100], tail_fraction=1.0)
    tail = fit_loglog_slope(xs, ys, tail_fraction=0.1)
    assert head == pytest.approx(1.0, abs=0.05)
    assert tail == pytest.approx(2.0, abs=0.1)
    assert head < fit_loglog_slope(xs, ys, tail_fraction=1.0) < tail


def test_slope_uses_only_the_tail():
    xs = [1, 2, 3, 4, 10, 20]
    ys = [5, 5, 5, 5, 100, 400]  # junk at the start, y = x² on the last two points
    assert fit_loglog_slope(xs, ys, tail_fraction=0.3) == pytest.approx(2.0)
    assert fit_loglog_slope(xs, ys, tail_fraction=0.01) == pytest.approx(2.0)  # never fewer than 2 points


@pytest.mark.parametrize("xs, ys, kw, message", [
    ([1, 2, 3], [1, 2], {}, "xs and ys must have the same length, got 3 xs and 2 ys"),
    ([1], [1], {}, "a slope needs at least 2 points, got 1"),
    ([1, 2], [1, 2], {"tail_fraction": 0}, "tail_fraction must be a number in (0, 1]"),
    ([1, 2], [1, 2], {"tail_fraction": 1.5}, "got 1.5"),
    ([1, 2, 3], [1, 0, 2], {"tail_fraction": 1}, "needs positive, finite x and y; 1 fitted point(s) are not, "
                                                   "the first is (x, y) = (2, 0)"),
    ([1, 2], [1, math.inf], {}, "positive, finite"),
    ([3, 3], [1, 2], {}, "at least 2 different x values"),
])
def test_slope_errors(xs, ys, kw, message):
    with pytest.raises(ValueError) as e:
        fit_loglog_slope(xs, ys, **kw)
    assert message in str(e.value)


def test_cumulative():
    assert cumulative([1, 2, 3]) == [1, 3, 6]
    assert cumulative([]) == []
    assert all(isinstance(v, int) for v in cumulative([1, 2]))


def test_log_positions():
    p = log_positions(512, 10)
    assert p == [1, 2, 4, 8, 16, 32, 64, 128, 256, 512]
    assert log_positions(4, 12) == [1, 2, 3, 4]
    assert log_positions(1, 5) == [1]
    with pytest.raises(ValueError, match="max_len must be an integer >= 1, got 0"):
        log_positions(0)
    with pytest.raises(ValueError, match=r"count must be an integer >= 2, got 1"):
        log_positions(10, 1)


# ----------------------------------------------------------------------------------- the larger model

def test_larger_config_and_random_model():
    c = larger_config()
    assert (c.d_model, c.n_layers, c.n_heads, c.max_seq_len) == (256, 4, 4, 512)
    assert c.vocab_size == lib.load_demo("chat")[1].vocab_size
    torch.manual_seed(123)
    before = torch.random.get_rng_state()
    a, b = random_model(SMALL, seed=3), random_model(SMALL, seed=3)
    assert torch.equal(torch.random.get_rng_state(), before)  # the caller's random stream is left alone
    assert all(torch.equal(x, y) for x, y in zip(a.state_dict().values(), b.state_dict().values()))
    assert not torch.equal(random_model(SMALL, seed=4).tok_emb.weight, a.tok_emb.weight)
    assert not a.training
    assert random_model(SMALL, dtype=torch.float64).dtype == torch.float64
    with pytest.raises(TypeError, match="random_model needs a lib.ModelConfig"):
        random_model("larger")


# ------------------------------------------------------------------------------------------- timing

@pytest.mark.parametrize("use_cache, kind", [(True, "static"), (True, "concat"), (False, "static")])
def test_time_per_step_shape(small, use_cache, kind):
    threads = torch.get_num_threads()
    secs = time_per_step(small, prompt_len=3, n_new=5, use_cache=use_cache, cache_kind=kind, repeats=2, warmup=1)
    assert len(secs) == 5
    assert all(isinstance(s, float) and s >= 0 and s == round(s, 6) for s in secs)
    assert torch.get_num_threads() == threads  # restored
    assert gc.isenabled()


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("clock", ["wall", "cpu"])
def test_time_at_positions_shape(small, mode, clock):
    secs = time_at_positions(small, [1, 2, 5, 24], mode=mode, repeats=2, reduce="median", clock=clock)
    assert len(secs) == 4 and all(isinstance(s, float) and s >= 0 for s in secs)


@pytest.mark.parametrize("mode", ["static", "concat"])
def test_time_at_positions_times_one_token_on_a_cache_of_t_minus_1(small, mode, monkeypatch):
    seen = []
    real = measure._one_step_seconds

    def spy(model, ids, t, cache, clock):
        seen.append((t, cache.seq_len))
        out = real(model, ids, t, cache, clock)
        assert cache.seq_len == t  # the step appended exactly one position
        return out

    monkeypatch.setattr(measure, "_one_step_seconds", spy)
    time_at_positions(small, [1, 3, 4, 10], mode=mode, repeats=1, warmup=0)
    assert seen == [(1, 0), (3, 2), (4, 3), (10, 9)]


def test_timed_cached_step_computes_the_same_logits_as_the_uncached_one(small):
    ids = measure._tokens(small, 10, seed=0)
    cache = lib.KVCache(small.config, 1, 10)
    with torch.no_grad():
        small(ids[:, :9], cache=cache)
        cached = small(ids[:, 9:10], cache=cache)[:, -1]
        full = small(ids)[:, -1]
    torch.testing.assert_close(cached, full, atol=1e-5, rtol=1e-5)


def test_measure_generation_shape(small):
    r = measure_generation(small, n_new=6, prompt_len=2, repeats=1, warmup=0)
    assert r["positions"] == [row["n_keys"] for row in generation_steps(small.config, 2, 6, True)]
    assert r["positions"] == [2, 3, 4, 5, 6, 7]
    assert r["modes"] == list(MODES) and set(r["seconds"]) == set(MODES) == set(r["cumulative"])
    for mode in MODES:
        assert len(r["seconds"][mode]) == 6
        assert r["cumulative"][mode] == pytest.approx(cumulative(r["seconds"][mode]), abs=1e-6)
        assert [lo for lo, hi in r["ranges"][mode]] == r["seconds"][mode]  # reduce="min": the fastest run
        assert set(r["slopes"][mode]) == {"per_step", "cumulative"}
        assert all(isinstance(v, float) for v in r["slopes"][mode].values())
    assert r["config"] == small.config.to_dict()
    assert (r["kind"], r["clock"], r["repeats"], r["warmup"], r["threads"], r["reduce"]) == \
        ("generation", "wall", 1, 0, 1, "min")


def test_measure_positions_shape(small):
    r = measure_positions(small, [1, 2, 4, 8], modes="static", repeats=1, warmup=0, clock="cpu")
    assert r["positions"] == [1, 2, 4, 8] and r["modes"] == ["static"]
    assert len(r["seconds"]["static"]) == 4 and "cumulative" not in r
    assert len(r["ranges"]["static"]) == 4 and all(lo <= hi for lo, hi in r["ranges"]["static"])
    assert isinstance(r["slopes"]["static"]["per_step"], float)
    assert (r["kind"], r["clock"]) == ("positions", "cpu")


@pytest.mark.parametrize("call, message", [
    (lambda m: time_per_step(m, 1, 0), "n_new (tokens to generate) must be an integer >= 1, got 0"),
    (lambda m: time_per_step(m, 0, 3), "prompt_len must be an integer >= 1, got 0"),
    (lambda m: time_per_step(m, 5, 21), "prompt_len=5 and n_new=21 do not fit the model's context window "
                                        "(max_seq_len=24): at most 20 new token(s) fit"),
    (lambda m: time_per_step(m, 1, 3, cache_kind="ring"), "cache_kind='ring' is not known; allowed: static, concat, paged"),
    (lambda m: time_per_step(m, 1, 3, repeats=0), "repeats must be an integer >= 1, got 0"),
    (lambda m: time_per_step(m, 1, 3, reduce="mean"), "reduce='mean' is not known; allowed: min, median"),
    (lambda m: time_at_positions(m, [], "static"), "positions is empty"),
    (lambda m: time_at_positions(m, [4, 2], "static"), "positions must be strictly increasing, got [4, 2]"),
    (lambda m: time_at_positions(m, [0, 2], "static"), "each position (context length) must be an integer >= 1, got 0"),
    (lambda m: time_at_positions(m, [1, 25], "static"), "position 25 is past the model's context window "
                                                        "(max_seq_len=24); allowed: 1..24"),
    (lambda m: time_at_positions(m, [1, 2], "cached"), "unknown mode 'cached'; allowed: no cache, static, concat"),
    (lambda m: time_at_positions(m, [1, 2], clock="gpu"), "clock='gpu' is not known; allowed: wall, cpu"),
    (lambda m: time_at_positions(m, [1, 2], threads=2, clock="cpu"), "needs a model on the CPU and threads=1"),
    (lambda m: time_per_step(m, 1, 3, threads=0), "threads must be an integer >= 1, got 0"),
    (lambda m: measure_generation(m, 2), "measure_generation needs n_new >= 3"),
    (lambda m: measure_generation(m, 4, modes=[]), "modes is empty; choose one or more of: no cache, static, concat"),
    (lambda m: measure_positions(m, [3]), "measure_positions needs at least 2 positions"),
])
def test_errors(small, call, message):
    with pytest.raises(ValueError) as e:
        call(small)
    assert message in str(e.value)


def test_errors_for_wrong_types(small):
    with pytest.raises(TypeError, match=r"time_per_step\(\) needs a lib.MiniTransformer"):
        time_per_step(small.config, 1, 3)
    with pytest.raises(ValueError, match="use_cache must be True or False, got 'yes'"):
        time_per_step(small, 1, 3, use_cache="yes")
    with pytest.raises(ValueError, match="n_new \\(tokens to generate\\) must be an integer >= 1, got 2.0"):
        time_per_step(small, 1, 2.0)

"""tools.bench, the decode benchmark: its bookkeeping on a tiny GPT-2 twin pair, and its ranking rule on made-up
timings. Never a real timing assertion: real runs are checked for consistency, never for their values."""
import json

import pytest
import torch

import lib
from tools import bench
from tools.bench import (COMPARISONS, FULL, QUICK, Contender, Settings, decode_rows, interleaved, plot, report)
from lib.timing import MIN_RUNS_TO_RANK, Timing


def hf_gpt2(seed=0):
    """A small ``GPT2LMHeadModel`` with every parameter re-drawn (tests/test_hf.py's builder, so greedy tokens
    are far apart and lib and transformers agree on them); skips the test without transformers."""
    pytest.importorskip("transformers")
    from test_hf import build

    return build("gpt2", seed=seed)


def twins(seed=0):
    hf = hf_gpt2(seed)
    return hf, lib.from_hf(hf)


def tiny_settings(**kw):
    """Every section on a tiny model: enough runs to rank (3), few tokens and lengths."""
    return Settings(**{**dict(new_tokens=6, runs=3, uncached_runs=3, warmup=1, lengths=(8, 16, 32),
                              long_lengths=(16, 32), position_runs=3, bandwidth_repeats=1, bandwidth_bytes=1 << 20),
                       **kw})


@pytest.fixture(scope="module")
def bench_result():
    return bench.run(tiny_settings(), threads=1, accelerator=None, twins=twins(), log=lambda m: None)


# ------------------------------------------------------------------------- the whole run, on real twins

def test_bench_runs_every_section_on_identical_twins(bench_result):
    r = bench_result
    d = r["decode"]
    names = [row["name"] for row in d["rows"]]
    assert names == ["lib, KV cache", "lib, KV cache, sdpa", "lib, KV cache, FastDecoder (1 shard)",
                     "transformers, dynamic cache", "transformers, static cache", "lib, no cache",
                     "lib, no cache, FastDecoder (1 shard)", "transformers, no cache"]
    assert d["same_tokens"] is True and all(not row["error"] for row in d["rows"])
    assert r["model"]["shape"] == "custom" and r["accelerator"] == {"skipped": "not asked for (--accelerator none)"}
    best = r["machine"]["bandwidth_gbs"]
    m = r["machine"]  # samples: before, one per timed round of section 1 (3), after it, after section 3
    sums, products = m["bandwidth_gbs_samples"], m["packed_product_gbs_samples"]
    assert len(sums) == len(products) == 6 and best == max(sums + products) > 0
    assert m["bandwidth_from"] == ("sum" if best in sums else "packed product")
    for row in d["rows"]:  # every contender's runs, their median and their range
        secs = row["seconds"]
        assert row["runs"] == len(secs) == 3 and all(s > 0 for s in secs)
        assert row["median_s"] == sorted(secs)[1] and [row["min_s"], row["max_s"]] == [min(secs), max(secs)]
        assert row["tokens_per_s"] == round(6 / row["median_s"], 2)
        assert row["tokens_per_s_range"] == pytest.approx([6 / max(secs), 6 / min(secs)], rel=1e-3)  # secs: to 1 µs
        if row["cached"]:  # MBU = bytes one generation moves / its median time / the best bandwidth sample
            assert row["mbu"] == round(d["bytes_per_generation"] / row["median_s"] / 1e9 / best, 3)
        else:
            assert row["mbu"] is None
    by = {row["name"]: row for row in d["rows"]}
    assert list(d["rankings"]) == list(d["ratios"]) == [label for label, _, _ in COMPARISONS]
    assert d["rankings"]["lib FastDecoder / lib plain model"]["a"] == "lib, KV cache, FastDecoder (1 shard)"
    for label, rk in d["rankings"].items():  # a ratio only where every run of one beat every run of the other
        a, b = by[rk["a"]], by[rk["b"]]
        assert rk["runs"] == [3, 3]
        if a["max_s"] == b["min_s"] or b["max_s"] == a["min_s"]:
            continue  # the JSON's seconds are rounded to 1 µs: too close to tell from them
        apart = a["max_s"] < b["min_s"] or b["max_s"] < a["min_s"]
        assert rk["separated"] == apart
        if apart:  # the ranking's ratio is of the unrounded medians, itself rounded to 3 digits
            assert d["ratios"][label] == rk["ratio"] == pytest.approx(b["median_s"] / a["median_s"], rel=2e-3,
                                                                     abs=1e-3)
            assert rk["faster"] == (rk["a"] if a["max_s"] < b["min_s"] else rk["b"])
        else:
            assert d["ratios"][label] is None and rk["why"].startswith("not separated after 3 and 3 runs")


def test_bench_bytes_come_from_lib_costs(bench_result):
    from tools.bench import generation_bytes
    from lib.costs import pass_cost

    r = bench_result
    config = twins()[1].config
    # a 4-token prefill, then 5 decode steps reading 4..8 cached tokens
    expected = pass_cost(config, 4, 0, 1, torch.float32).bytes + sum(
        pass_cost(config, 1, past, 1, torch.float32).bytes for past in range(4, 9))
    assert generation_bytes(config, 4, 6) == expected == r["decode"]["bytes_per_generation"]
    k = r["cache_kinds"]
    assert k["concat_bytes_copied_per_step"] == [lib.kv_cache_bytes(config, t, 1, torch.float32) for t in (16, 32)]
    assert k["static_bytes_written_per_step"] == lib.kv_cache_bytes(config, 1, 1, torch.float32)
    assert k["concat_bytes_copied_generating_to"]["bytes"] == sum(
        lib.kv_cache_bytes(config, t, 1, torch.float32) for t in range(1, 33))
    g = r["lengths"]
    assert g["lengths"] == [8, 16, 32] and set(g["slopes"]) == {"static", "no cache"}
    for section, fast, slow, ratios in ((g, "static", "no cache", g["speedup"]),
                                        (k, "static", "concat", k["concat_over_static"])):
        for i, x in enumerate(ratios):  # each speedup only where the two ranges are apart
            (f0, f1), (s0, s1) = section["ranges"][fast][i], section["ranges"][slow][i]
            assert f0 <= section["seconds"][fast][i] <= f1 and s0 <= section["seconds"][slow][i] <= s1
            if f1 == s0 or s1 == f0:
                continue  # rounded to 1 µs: too close to tell
            if f1 < s0 or s1 < f0:
                assert x == pytest.approx(section["seconds"][slow][i] / section["seconds"][fast][i], rel=0.02)
            else:
                assert x is None


def test_bench_report_and_plot(bench_result, tmp_path):
    text = report(bench_result)
    assert "1. decode, batch 1, 4-token prompt, 6 new tokens" in text and "lib / transformers (dynamic cache)" in text
    assert "min–max s" in text and "tok/s range" in text  # the spread beside every median
    assert "ranked only where every run of one is faster than every run of the other (at least 3 runs each)" in text
    assert "5. accelerator: skipped (not asked for" in text
    import matplotlib
    before = dict(matplotlib.rcParams)
    png = plot(bench_result, tmp_path / "bench.png")
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert dict(matplotlib.rcParams) == before  # the course's style for this figure only: no global change
    json.dumps(bench_result)  # what bench.json holds: plain data


def test_bench_refuses_twins_that_disagree():
    other = lib.from_hf(hf_gpt2(seed=1))  # different weights: different tokens
    with pytest.raises(AssertionError, match=r"transformers, dynamic cache generated different tokens than lib"):
        bench.decode_section(hf_gpt2(), other, tiny_settings(runs=1, uncached_runs=1))


def test_bench_keeps_a_failing_contender_s_error():
    def boom():
        raise RuntimeError("no static cache here")

    calls = []
    ok = Contender("ok", "lib", True, lambda: calls.append("ok") or torch.zeros(1, 3, dtype=torch.long), runs=3)
    few = Contender("few", "lib", False, lambda: calls.append("few") or torch.zeros(1, 3, dtype=torch.long), runs=1)
    bad = Contender("bad", "transformers", True, boom, runs=3)
    interleaved([ok, few, bad], warmup=1)
    assert calls == ["ok", "few", "ok", "few", "ok", "ok"]  # round by round; `few` only in the first rounds
    assert len(ok.seconds) == 3 and len(few.seconds) == 1 and ok.sequences is not None
    assert bad.seconds == [] and bad.error == "RuntimeError: no static cache here" and bad.timing is None
    assert ok.timing == Timing(ok.seconds)


def test_bench_rejects_bad_arguments(capsys):
    with pytest.raises(SystemExit):
        bench.main(["--runs", "0"])
    assert "--runs must be at least 1, got 0" in capsys.readouterr().err


def test_bench_without_transformers_times_lib_alone():
    result = bench.run(tiny_settings(), threads=1, accelerator=None, twins=(None, twins()[1]), log=lambda m: None)
    d = result["decode"]
    assert [row["name"] for row in d["rows"]] == ["lib, KV cache", "lib, KV cache, sdpa",
                                                  "lib, KV cache, FastDecoder (1 shard)", "lib, no cache",
                                                  "lib, no cache, FastDecoder (1 shard)"]
    for label in ("lib / transformers (dynamic cache)", "lib FastDecoder / transformers (dynamic cache)"):
        assert d["ratios"][label] is None
        assert d["rankings"][label]["why"] == "not measured (transformers, dynamic cache has no runs)"
    for label in ("lib cache speedup", "lib FastDecoder cache speedup"):  # lib with and without its cache
        assert d["rankings"][label]["runs"] == [3, 3]
    assert "lib / transformers (dynamic cache): - (not measured)" in bench.report(result)


def test_bench_accelerator_section_runs_on_any_device(monkeypatch, bench_result):
    """Section 5's bookkeeping on the CPU (the figures that matter come from a CUDA machine); torch.compile
    is replaced by one that fails, as it does without a C++ compiler: the row keeps the error, the rest runs."""
    def no_compile(model, **kw):  # like torch.compile: wrapping works, the first call fails
        def compiled(*a, **k):
            raise RuntimeError("inductor needs a C++ compiler")
        return compiled

    monkeypatch.setattr(torch, "compile", no_compile)
    hf, model = twins()
    with torch.inference_mode():
        a = bench.accelerator_section(hf, model, tiny_settings(runs=1), "cpu")
    assert a["dtype"] == "bf16" and len(a["bandwidth_gbs_samples"]) == 3
    by = {row["name"]: row for row in a["rows"]}
    assert list(by) == ["lib.generate, bf16", "lib.generate, FastDecoder, bf16", "lib decode loop, eager",
                        "lib decode loop, torch.compile", "transformers, dynamic cache", "transformers, static cache"]
    assert by["lib decode loop, torch.compile"]["error"] == "RuntimeError: inductor needs a C++ compiler"
    assert a["compile_first_call_s"] is None
    for name in ("lib.generate, FastDecoder, bf16", "lib decode loop, eager"):
        row = by[name]
        assert row["same_tokens_as_lib"] is True and row["tokens_per_s"] > 0
        assert row["min_s"] == row["max_s"] == row["median_s"] == row["seconds"][0]  # one run: no spread
    text = bench.report({**bench_result, "accelerator": a})
    assert "5. cpu (1 threads), bf16, 6 new tokens" in text and "inductor needs a C++ compiler" in text
    assert bench.accelerator_section(hf, model, tiny_settings(), "cuda:7")["skipped"].startswith("device")


# ------------------------------------------------------------- the ranking rule, on made-up timings

def fake(name, seconds, cached=True, impl="lib"):
    """A contender that already ran: its seconds are made up."""
    c = Contender(name, impl, cached, fn=None, runs=len(seconds))
    c.seconds = list(seconds)
    return c


FAKE = [fake("lib, KV cache", [1.15, 1.25, 1.30]),
        fake("lib, KV cache, FastDecoder (2 shards)", [1.00, 1.10, 1.20]),
        fake("transformers, dynamic cache", [1.50, 1.60, 1.70], impl="transformers"),
        fake("transformers, static cache", [1.50, 1.60], impl="transformers"),  # one run short
        fake("lib, no cache", [7.0, 7.5, 8.0], cached=False),
        fake("lib, no cache, FastDecoder (2 shards)", [6.0, 6.5, 7.0], cached=False)]


def test_decode_rows_rank_only_separated_contenders():
    rows, rankings = decode_rows(FAKE, new_tokens=24, bytes_per_generation=10 ** 9)
    by = {r["name"]: r for r in rows}
    fast = by["lib, KV cache, FastDecoder (2 shards)"]
    assert (fast["median_s"], fast["min_s"], fast["max_s"], fast["runs"]) == (1.1, 1.0, 1.2, 3)
    assert fast["tokens_per_s"] == round(24 / 1.1, 2) and fast["tokens_per_s_range"] == [20.0, 24.0]
    assert fast["achieved_gbs"] == round(1 / 1.1, 2) and by["lib, no cache"]["achieved_gbs"] is None
    head = rankings["lib FastDecoder / transformers (dynamic cache)"]  # every FastDecoder run is faster
    assert head["separated"] and head["faster"] == "lib, KV cache, FastDecoder (2 shards)"
    assert head["ratio"] == round(1.6 / 1.1, 3) and head["ratio_range"] == [round(1.5 / 1.2, 3), 1.7]
    plain = rankings["lib FastDecoder / lib plain model"]  # medians 1.10 vs 1.25 s, but the runs overlap
    assert (plain["a"], plain["b"]) == ("lib, KV cache, FastDecoder (2 shards)", "lib, KV cache")
    assert not plain["separated"] and plain["ratio"] is None and plain["faster"] is None
    assert plain["why"] == "not separated after 3 and 3 runs: the ranges overlap (1.00–1.20 s vs 1.15–1.30 s)"
    static = rankings["lib FastDecoder / transformers (static cache)"]
    assert static["ratio"] is None and static["why"] == ("not ranked: 3 and 2 run(s), a ranking needs at least 3 "
                                                         "of each")
    assert rankings["lib / transformers (no cache)"]["why"] == "not measured (transformers, no cache has no runs)"
    speedup = rankings["lib FastDecoder cache speedup"]
    assert speedup["separated"] and speedup["ratio"] == round(6.5 / 1.1, 3)


def test_report_prints_a_ratio_only_for_separated_contenders(bench_result):
    rows, rankings = decode_rows(FAKE, new_tokens=24, bytes_per_generation=10 ** 9)
    decode = {**bench_result["decode"], "rows": rows, "rankings": rankings}
    text = report({**bench_result, "decode": decode})
    lines = {line.split(":", 1)[0].strip(): line.split(":", 1)[1].strip() for line in text.splitlines()
             if line.startswith("  lib") or line.startswith("  transformers")}
    assert round(1.6 / 1.1, 3) == 1.455  # the JSON's ratio, printed to 2 digits
    assert lines["lib FastDecoder / transformers (dynamic cache)"] == (
        "1.46x (ranges allow 1.25–1.70x; separated: every run of lib, KV cache, FastDecoder (2 shards) is faster "
        "(1.00–1.20 s vs 1.50–1.70 s))")
    assert lines["lib FastDecoder / lib plain model"] == (
        "no ranking: not separated after 3 and 3 runs: the ranges overlap (1.00–1.20 s vs 1.15–1.30 s)")
    assert lines["lib FastDecoder / transformers (static cache)"] == (
        "no ranking: not ranked: 3 and 2 run(s), a ranking needs at least 3 of each")
    assert lines["lib / transformers (no cache)"] == "- (not measured)"
    assert "1.00–1.20" in text and "20.0–24.0" in text  # the FastDecoder row's range, in s and tok/s


def test_speedups_per_length_only_where_separated():
    timings = {"static": [Timing([1e-3, 1.1e-3, 1.2e-3]), Timing([1e-3, 2e-3, 3e-3])],
               "no cache": [Timing([5e-3, 5e-3, 6e-3]), Timing([2.5e-3, 2.6e-3, 2.7e-3])]}
    per = bench._per_length(timings, "static", "no cache")
    assert per["seconds"] == {"static": [0.0011, 0.002], "no cache": [0.005, 0.0026]}
    assert per["ranges"] == {"static": [[0.001, 0.0012], [0.001, 0.003]], "no cache": [[0.005, 0.006],
                                                                                      [0.0025, 0.0027]]}
    assert per["ratio"] == [round(5 / 1.1, 3), None]
    assert per["why"][1] == "not separated after 3 and 3 runs: the ranges overlap (1.00–3.00 ms vs 2.50–2.70 ms)"
    assert bench._ratio_cell(None) == "not separated" and bench._ratio_cell(4.545) == "4.5x"


def test_every_mode_has_enough_runs_to_rank():
    """Quick included: a mode whose runs are too few to rank would only ever say "not ranked"."""
    for s in (FULL, QUICK):
        assert min(s.runs, s.uncached_runs, s.position_runs) >= MIN_RUNS_TO_RANK

"""lib.memo: a slow pure measurement is computed once per run (KVLAB_MEMO) and read back, keyed by everything that
decides it; without the variable nothing is stored."""
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
import torch

from lib import memo

CALLS = []


@memo.memoised
def measured(x: torch.Tensor, scale: float = 2.0, settings=((1, 0),)):
    CALLS.append((x.clone(), scale, settings))
    return {"sum": float(x.sum() * scale), "rows": x.tolist()}


@memo.memoised(when=lambda a: a["clock"] != "measured")
def timed(n: int, clock: str = "predicted"):
    CALLS.append(clock)
    return n * 2


@pytest.fixture
def folder(tmp_path, monkeypatch):
    monkeypatch.setenv(memo.ENV, str(tmp_path))
    CALLS.clear()
    return tmp_path


def test_without_the_variable_every_call_computes(monkeypatch):
    monkeypatch.delenv(memo.ENV, raising=False)
    CALLS.clear()
    x = torch.arange(4.0)
    assert measured(x) == measured(x) and len(CALLS) == 2


def test_a_second_call_reads_the_first_ones_result(folder):
    x = torch.arange(4.0)
    first = measured(x)
    assert measured(x) == first and measured(x, 2.0) == first and measured(x=x) == first  # one key however called
    assert len(CALLS) == 1 and len(list(folder.glob("*.pt"))) == 1


def test_the_key_holds_every_argument_and_the_values_of_tensors_and_weights(folder):
    x = torch.arange(4.0)
    measured(x)
    measured(x, 3.0)
    measured(x, settings=((1, 0), (2, 0)))
    measured(torch.arange(4.0).flip(0))
    measured(torch.arange(4, dtype=torch.float64))  # same values, another dtype
    assert len(CALLS) == 5
    model = torch.nn.Linear(2, 2)
    a = memo.canonical(model)
    with torch.no_grad():
        model.weight[0, 0] += 1  # changed in place: the model's key follows it
    assert memo.canonical(model) != a
    with pytest.raises(memo.Unkeyable):
        memo.canonical(object())


def test_calls_that_measure_time_are_never_cached(folder):
    assert timed(3, "measured") == timed(3, "measured") == 6 and CALLS == ["measured", "measured"]
    timed(3), timed(3)
    assert CALLS == ["measured", "measured", "predicted"]


def test_a_change_in_lib_s_source_makes_every_result_stale(folder, monkeypatch):
    x = torch.arange(4.0)
    measured(x)
    monkeypatch.setattr(memo, "lib_source_digest", lambda: "another lib")
    measured(x)
    assert len(CALLS) == 2


def test_another_process_reads_what_this_one_computed(folder):
    """nbval's Chinese kernel reads what the English one computed: the real drift sweep, bit for bit."""
    code = textwrap.dedent("""
        import sys, torch, lib
        from lib.sinks import drift_sweep
        torch.manual_seed(0)
        model = lib.MiniTransformer(lib.ModelConfig(vocab_size=20, d_model=16, n_heads=2, n_layers=1, max_seq_len=32))
        x = torch.randint(0, 20, (2, 24), generator=torch.Generator().manual_seed(1))
        out = drift_sweep(model.eval(), x, [(None, 0), (8, 0), (8, 2)])
        torch.save(out, sys.argv[1])
        print(len(list(__import__("pathlib").Path(sys.argv[2]).glob("*.pt"))))
    """)
    env = {**os.environ, memo.ENV: str(folder), "PYTHONPATH": str(Path(memo.__file__).parents[1])}
    runs = [subprocess.run([sys.executable, "-c", code, str(folder / f"out{i}.bin"), str(folder)], env=env,
                           capture_output=True, text=True, check=True) for i in range(2)]
    assert [r.stdout.strip() for r in runs] == ["1", "1"]  # the second run stored nothing new
    first, second = (torch.load(folder / f"out{i}.bin", weights_only=False) for i in range(2))
    assert first == second and first[1]["window"] == 8 and first[2]["sinks"] == 2

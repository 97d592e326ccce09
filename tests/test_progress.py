"""lib.progress, the one rule for progress bars, and the bars of ``make bench``, ``make train`` and
``make notebooks``: drawn on a terminal, never under CI or into a log (there the plain lines as before), forced
by KVLAB_PROGRESS; and the bars change nothing that is computed. No timing assertions."""
import io

import nbformat
import pytest
import torch

import lib.train
from lib import progress
from tools import bench
from tools.bench import Contender, interleaved
from tools import runner


class FakeTTY(io.StringIO):
    """A text stream that says it is a terminal."""

    def isatty(self):
        return True


class Closed(io.StringIO):
    def isatty(self):
        raise ValueError("I/O operation on closed file")


@pytest.fixture
def env(monkeypatch):
    """No CI and no KVLAB_PROGRESS unless a test sets them."""
    monkeypatch.delenv("CI", raising=False)
    monkeypatch.delenv(progress.FORCE, raising=False)
    return monkeypatch


# ------------------------------------------------------------------------------------------ the rule

def test_a_terminal_outside_ci_shows_bars(env):
    assert progress.show_progress(FakeTTY()) is True


@pytest.mark.parametrize("ci", ["true", "1", "TRUE", "yes", "github-actions"])
def test_ci_hides_the_bars_even_on_a_terminal(env, ci):
    env.setenv("CI", ci)
    assert progress.show_progress(FakeTTY()) is False


@pytest.mark.parametrize("ci", ["", "0", "false", "False", "no", "off"])
def test_ci_switched_off_is_not_ci(env, ci):
    env.setenv("CI", ci)
    assert progress.show_progress(FakeTTY()) is True


def test_a_log_file_or_pipe_gets_no_bars(env):
    assert progress.show_progress(io.StringIO()) is False  # not a terminal
    assert progress.show_progress(Closed()) is False  # a stream that cannot say
    assert progress.show_progress(object()) is False  # no isatty at all


def test_the_default_stream_is_stderr(env, capsys):
    assert progress.show_progress() is False  # pytest's captured stderr is not a terminal
    env.setattr("sys.stderr", FakeTTY())
    assert progress.show_progress() is True


@pytest.mark.parametrize("value, expected", [("1", True), ("yes", True), ("0", False), ("off", False)])
def test_kvlab_progress_forces_either_way(env, value, expected):
    env.setenv(progress.FORCE, value)
    env.setenv("CI", "true")
    assert progress.show_progress(io.StringIO()) is expected
    assert progress.show_progress(FakeTTY()) is expected


def test_an_explicit_environment_is_read_instead_of_os_environ(env):
    assert progress.show_progress(FakeTTY(), environ={"CI": "true"}) is False
    assert progress.show_progress(io.StringIO(), environ={progress.FORCE: "1"}) is True


# ------------------------------------------------------------------------------------------- the bar

def test_a_shown_bar_draws_its_item_count_and_postfix():
    out = FakeTTY()
    with progress.bar(total=4, desc="chat", unit="step", show=True, file=out) as b:
        assert not b.disable
        for i in range(4):
            b.set_postfix(loss=f"{1 / (i + 1):.4f}")
            b.update()
    text = out.getvalue()
    assert "chat" in text and "4/4" in text and "loss=0.2500" in text and "step" in text


def test_a_hidden_bar_accepts_every_call_and_writes_nothing(env):
    env.setenv("CI", "true")
    out = FakeTTY()
    with progress.bar(total=3, desc="hidden", file=out) as b:  # show=None: the rule decides (CI: no)
        assert b.disable
        b.set_description_str("x")
        b.set_postfix(loss="1")
        b.update()
        b.reset(total=5)
    assert out.getvalue() == ""


def test_the_bar_follows_the_rule_when_not_told(env):
    with progress.bar(total=1, file=FakeTTY()) as b:
        assert not b.disable
    with progress.bar(total=1, file=io.StringIO()) as b:
        assert b.disable


def test_write_prints_the_line_whether_or_not_a_bar_is_drawn():
    out = FakeTTY()
    progress.write("plain line", file=out)
    with progress.bar(total=2, desc="busy", show=True, file=out):
        progress.write("line under a bar", file=out)
    assert "plain line\n" in out.getvalue() and "line under a bar\n" in out.getvalue()


# --------------------------------------------------------------------------------------------- train

# The loop's output, not the recipe (tests/test_demo.py retrains every demo in full): 120 of tiny's 800 steps
# reach the "step 100" line and cost a sixth of the time.
STEPS = 120


def test_train_shows_its_loss_in_the_bar_on_a_terminal_and_learns_the_same(env, capsys):
    env.setenv(progress.FORCE, "1")
    model, _, info = lib.train.train("tiny", steps=STEPS)
    captured = capsys.readouterr()
    steps = STEPS
    assert f"{steps}/{steps}" in captured.err and "loss=" in captured.err and "tiny" in captured.err
    assert "step    0  loss" not in captured.out  # the bar replaces the loss lines
    assert "[tiny]" in captured.out and "parameters" in captured.out  # the summary line stays
    env.setenv(progress.FORCE, "0")
    quiet_model, _, quiet_info = lib.train.train("tiny", steps=STEPS)
    captured = capsys.readouterr()
    assert captured.err == ""
    assert "[tiny] step    0  loss" in captured.out and f"[tiny] step {steps - 1:4d}  loss" in captured.out
    assert info == quiet_info  # same final loss and settings
    shown, quiet = model.state_dict(), quiet_model.state_dict()
    assert shown.keys() == quiet.keys() and all(torch.equal(shown[k], quiet[k]) for k in shown)


def test_train_under_ci_prints_the_plain_lines(env, capsys):
    env.setenv("CI", "true")
    env.setattr("sys.stderr", FakeTTY())  # even on a terminal
    lib.train.train("tiny", steps=STEPS)
    out = capsys.readouterr().out
    assert "[tiny] step  100  loss" in out
    import sys
    assert sys.stderr.getvalue() == ""


def test_train_not_verbose_prints_nothing(env, capsys):
    env.setenv(progress.FORCE, "1")
    lib.train.train("tiny", verbose=False, steps=STEPS)
    assert capsys.readouterr() == ("", "")


# --------------------------------------------------------------------------------------------- bench

class RecordingBar:
    """What ``bench.interleaved`` tells its bar."""

    def __init__(self):
        self.total, self.n, self.items = None, 0, []

    def reset(self, total=None):
        self.total, self.n = total, 0

    def set_description_str(self, text, refresh=True):
        self.items.append(text)

    def update(self, n=1):
        self.n += n


def test_interleaved_counts_every_run_and_names_the_current_one():
    def boom():
        raise RuntimeError("no such cache")

    ok = Contender("ok", "lib", True, lambda: torch.zeros(1, 3), runs=3)
    few = Contender("few", "lib", False, lambda: torch.zeros(1, 3), runs=1)
    bad = Contender("bad", "lib", True, boom, runs=3)
    bar = RecordingBar()
    interleaved([ok, few, bad], warmup=1, bar=bar)
    assert bar.total == (1 + 3) + (1 + 1) + (1 + 3) and bar.n == bar.total  # the failed one's runs counted
    assert bar.items == ["ok, warm-up", "few, warm-up", "bad, warm-up", "ok, run 1/3", "few, run 1/1",
                         "ok, run 2/3", "ok, run 3/3"]
    assert len(ok.seconds) == 3 and len(few.seconds) == 1 and bad.error == "RuntimeError: no such cache"


def test_bench_draws_its_sections_and_runs_and_measures_the_same_things(capsys):
    from test_bench import tiny_settings, twins

    model = twins()[1]
    settings = tiny_settings(runs=1, uncached_runs=1, position_runs=1, lengths=(8, 16), long_lengths=(16, 32))
    lines = []
    shown = bench.run(settings, threads=1, accelerator=None, twins=(None, model), log=lines.append, show=True)
    err = capsys.readouterr().err
    for item in ("1. decode tokens/s", "2. cached vs uncached across lengths", "3. preallocated vs torch.cat",
                 "4. bandwidth utilisation", "5. accelerator", "lib, KV cache, run 1/1", "lib, no cache, warm-up",
                 "no cache, pass 1/1 over contexts 8-16", "concat, warm-up over contexts 16-32", "5/5"):
        assert item in err, item
    hidden = bench.run(settings, threads=1, accelerator=None, twins=(None, model), log=lines.append, show=False)
    assert capsys.readouterr().err == ""
    assert lines[:5] == lines[5:] and "1. decode tokens/s ..." in lines  # the same header lines either way

    def shape(r):  # everything but the measured times
        d = r["decode"]
        return (r.keys(), r["settings"], r["model"], d["new_tokens"], d["bytes_per_generation"],
                [(row["name"], row["runs"], row["error"]) for row in d["rows"]], r["lengths"]["lengths"],
                r["cache_kinds"]["concat_bytes_copied_per_step"], r["accelerator"])

    assert shape(shown) == shape(hidden)


# -------------------------------------------------------------------------------------------- runner

def test_the_runner_shows_the_notebook_and_its_cells_and_prints_its_line(env, tmp_path, capsys):
    env.setenv(progress.FORCE, "1")
    nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_markdown_cell("# a title"),
                                         nbformat.v4.new_code_cell("x = 6 * 7"),
                                         nbformat.v4.new_code_cell("print(x)")])
    path = tmp_path / "99_tiny.ipynb"
    nbformat.write(nb, path)
    assert runner.main([str(path)]) == 0
    captured = capsys.readouterr()
    assert "99_tiny" in captured.err and "3/3" in captured.err and "cell 3: code" in captured.err
    assert "1/1" in captured.err and "notebook" in captured.err
    assert captured.out.startswith("99_tiny.ipynb") and " s " in captured.out and "kB" in captured.out
    ran = nbformat.read(path, as_version=4)
    assert ran.cells[2].outputs[0]["text"] == "42\n"


def test_the_runner_in_a_log_prints_only_its_lines(env, tmp_path, capsys):
    env.setenv("CI", "true")
    path = tmp_path / "98_quiet.ipynb"
    nbformat.write(nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell("1 + 1")]), path)
    assert runner.main([str(path)]) == 0
    captured = capsys.readouterr()
    assert captured.err == "" and captured.out.startswith("98_quiet.ipynb")


# ------------------------------------------------------------------------------------------ in a notebook

class _Kernel:  # what IPython.get_ipython() returns in a Jupyter kernel: a shell with a kernel
    kernel = object()


@pytest.fixture
def kernel(env):
    """This process looks like a notebook's kernel (IPython's get_ipython returns a shell with a kernel)."""
    import types

    env.setitem(__import__("sys").modules, "IPython", types.SimpleNamespace(get_ipython=lambda: _Kernel()))
    return env


def test_a_notebook_cell_draws_a_widget_bar_that_waits_and_goes(kernel):
    from tqdm.notebook import tqdm as widget_bar

    assert progress.in_kernel()
    b = progress.bar(range(3), desc="window settings")
    assert isinstance(b, widget_bar) and not b.disable
    assert b.leave is False and b.delay == progress.NOTEBOOK_DELAY  # nothing for a quick call, gone when done
    assert list(b) == [0, 1, 2]  # it counts what it is given and changes nothing


@pytest.mark.parametrize("setting", [("KVLAB_PROGRESS", "0"), ("CI", "true")])
def test_no_notebook_bar_for_stored_outputs_or_ci(kernel, setting):
    kernel.setenv(*setting)
    assert progress.bar(range(3)).disable


def test_outside_a_kernel_the_terminal_rule_holds(env):
    assert not progress.in_kernel()  # pytest is no notebook
    assert progress.bar(range(3)).disable  # stderr is captured: no terminal
    assert not progress.bar(range(3), file=FakeTTY()).disable

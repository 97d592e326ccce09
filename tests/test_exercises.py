"""The exercise checker: every registered exercise's worked solution passes its hidden cases, and wrong answers
get a message that says what is wrong, with a hint, without printing the expected answer. Hints come one tier per
wrong try (a question, a pointer, the recipe); a worked solution's check marks nothing done; a reveal without a
prediction asks for one before it gives the answer."""
import pytest
import torch

import lib.exercises as ex

NAMES = ex.names()


@pytest.fixture(autouse=True)
def fresh_tries():
    ex.reset()
    yield
    ex.reset()


def test_exercises_are_registered():
    assert NAMES, "no exercise is registered under lib/exercises/"


@pytest.mark.parametrize("name", NAMES)
def test_the_worked_solution_passes(name, capsys):
    result = ex.check(name, ex.solution(name))
    assert result.passed, result.message
    assert result.n_cases >= 2, "an exercise needs at least two hidden cases"
    assert "✓" in capsys.readouterr().out


@pytest.mark.parametrize("name", NAMES)
def test_a_wrong_answer_fails_with_a_hint_and_without_the_answer(name):
    ex._load_all()
    cases = list(ex._REGISTRY[name].cases())

    def returns_nothing(*args, **kwargs):
        return None

    result = ex.check(name, returns_nothing, quiet=True)
    assert not result.passed and "\n  Hint 1 of 3 — a question: " in result.message and "case 1 of" in result.message
    assert ex._REGISTRY[name].hints[2] not in result.message  # a first wrong try gets no recipe
    for case in cases:
        want = case.expected
        if isinstance(want, (int, float)) and not isinstance(want, bool) and abs(want) >= 10:
            assert repr(want) not in result.message


@pytest.mark.parametrize("name", NAMES)
def test_an_unwritten_or_crashing_answer_is_a_message(name):
    def unwritten(*args, **kwargs):
        raise NotImplementedError

    def crashes(*args, **kwargs):
        raise IndexError("index 7 is out of bounds")

    unwritten_message = ex.check(name, unwritten, quiet=True).message
    assert "not written yet" in unwritten_message and "Hints come after a wrong try" in unwritten_message
    assert "Hint 1" not in unwritten_message and all(h not in unwritten_message for h in ex._REGISTRY[name].hints)
    assert ex.tries(name) == 0, "an unwritten cell is not a try"
    msg = ex.check(name, crashes, quiet=True).message
    assert "raised IndexError: index 7 is out of bounds" in msg and "Traceback" not in msg


@pytest.mark.parametrize("name", NAMES)
def test_hints_tier_up_one_per_wrong_try_and_a_pass_says_so_and_starts_over(name):
    hints = ex._REGISTRY[name].hints

    def wrong(*args, **kwargs):
        return None

    said = [ex.check(name, wrong, quiet=True).message for _ in range(4)]
    for k, (message, kind) in enumerate(zip(said, ("a question", "a pointer", "the recipe", "the recipe"))):
        tier = min(k, 2)
        assert f"\n  Hint {tier + 1} of 3 — {kind}: {hints[tier]}" in message, message
        assert all(h not in message for h in hints[tier + 1:]), "a later tier shown too early"
    assert ex.tries(name) == 4 and name not in ex.done()
    passed = ex.check(name, ex.solution(name), quiet=True)
    assert passed and passed.message.startswith("✓") and "Hint" not in passed.message
    assert ex.tries(name) == 0 and name in ex.done()
    assert "Hint 1 of 3 — a question" in ex.check(name, wrong, quiet=True).message  # a new slip: the question again
    ex.reset(name)
    assert ex.tries(name) == 0 and name not in ex.done()
    with pytest.raises(ValueError, match="unknown exercise 'nope'"):
        ex.reset("nope")


@pytest.mark.parametrize("name", NAMES)
def test_a_worked_solution_passes_without_marking_the_exercise_done(name):
    def wrong(*args, **kwargs):
        return None

    ex.check(name, wrong, quiet=True)
    result = ex.check(name, ex.solution(name), worked=True, quiet=True)
    assert result.passed and result.worked and name not in ex.done() and ex.tries(name) == 1
    assert "the worked solution passes" in result.message and "when you run your own cell above" in result.message
    assert "Hint" not in result.message
    with pytest.raises(TypeError, match="worked must be True"):
        ex.check(name, ex.solution(name), worked="yes")


def test_the_hints_of_an_exercise_are_three_texts():
    with pytest.raises(ValueError, match="hints must be a tuple of 3 texts"):
        ex.exercise("x", title="x", hints=("only the recipe",), solution=print)
    with pytest.raises(ValueError, match="hints must be a tuple of 3 texts"):
        ex.exercise("x", title="x", hints="a question", solution=print)


def test_compare_says_what_differs_without_the_expected_values():
    want = torch.tensor([[1.25, 2.5], [3.75, 5.0]])
    with pytest.raises(ex.Mismatch, match=r"shape \(2,\), which is not the expected shape"):
        ex.compare(torch.zeros(2), want)
    with pytest.raises(ex.Mismatch, match=r"largest difference is 5 \(at index \(1, 1\)") as info:
        ex.compare(torch.tensor([[1.25, 2.5], [3.75, 0.0]]), want)
    assert "3.75" not in str(info.value)
    with pytest.raises(ex.Mismatch, match="a tensor was expected"):
        ex.compare([1, 2], want)
    with pytest.raises(ex.Mismatch, match="item 1 of your result is 3, which is not the expected value"):
        ex.compare([1, 3], [1, 2])
    ex.compare(torch.tensor([1.0, 2.0]) + 1e-7, torch.tensor([1.0, 2.0]))


def test_unknown_names_and_non_functions():
    with pytest.raises(ValueError, match="unknown exercise 'nope'; the exercises are: "):
        ex.check("nope", print)
    if NAMES:
        assert "needs your function itself" in ex.check(NAMES[0], 42, quiet=True).message


def test_reveal_says_right_wrong_or_missing_then_the_answer(capsys):
    from lib.i18n import speaking
    r = ex.reveal(None, 4)
    out = capsys.readouterr().out
    assert not r and out.startswith("No prediction yet: write your guess in the cell above") and "the answer: 4" in out
    assert out.index("No prediction yet") < out.index("the answer: 4")  # it asks before it tells
    assert ex.reveal(4, 4) and "✓ Right." in capsys.readouterr().out
    r = ex.reveal(3, 4, why="each round adds one token")
    out = capsys.readouterr().out
    assert not r and "you said 3" in out and out.rstrip().endswith("each round adds one token")
    assert ex.reveal(0.83, 0.8, rel=0.05) and not ex.reveal(0.9, 0.8, rel=0.05)
    assert ex.reveal((2, 5), (2, 5)) and not ex.reveal((2, 4), (2, 5))
    assert ex.reveal(1_234_567, 1_234_567, what="bytes")
    assert "bytes: 1,234,567" in capsys.readouterr().out
    with speaking("zh"):
        ex.reveal(None, 4)
    out = capsys.readouterr().out
    assert "还没有预测" in out and "答案：4" in out
    with pytest.raises(ValueError, match="rel must be"):
        ex.reveal(1, 1, rel=2)


def test_reveal_without_a_prediction_in_a_notebook_folds_the_answer_under_the_request(monkeypatch):
    """In a kernel (a stored Run All output too) the request comes first and the answer sits in a closed
    <details> the learner opens; text/plain keeps both, in that order."""
    import IPython
    import IPython.display

    shown = []
    monkeypatch.setattr(IPython, "get_ipython", lambda: type("Kernel", (), {"kernel": object()})())
    monkeypatch.setattr(IPython.display, "display", lambda data, raw=False: shown.append((data, raw)))
    r = ex.reveal(None, 15, why="1 + 2 + 3 + 4 + 5 = 15 K/V per layer.")
    assert not r and r.printed and len(shown) == 1 and shown[0][1] is True
    html, plain = shown[0][0]["text/html"], shown[0][0]["text/plain"]
    assert html.index("No prediction yet") < html.index("<details>") < html.index("<summary")
    assert html.index("I skipped it: show the answer") < html.index("the answer: 15") < html.index("</details>")
    assert "<details open" not in html
    assert plain == r.message and plain.splitlines()[0].startswith("No prediction yet")
    assert ex.reveal(15, 15) and len(shown) == 1  # a prediction made: printed, nothing folded

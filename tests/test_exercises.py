"""The exercise checker: every registered exercise's worked solution passes its hidden cases, and wrong answers
get a message that says what is wrong, with a hint, without printing the expected answer."""
import pytest
import torch

import lib.exercises as ex

NAMES = ex.names()


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
    assert not result.passed and "Hint:" in result.message and "case 1 of" in result.message
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

    assert "not written yet" in ex.check(name, unwritten, quiet=True).message
    msg = ex.check(name, crashes, quiet=True).message
    assert "raised IndexError: index 7 is out of bounds" in msg and "Traceback" not in msg


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
    assert not r and "No prediction yet" in out and "the answer: 4" in out
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

"""Exercises that make the learner build a piece, checked against hidden cases.

A notebook cell holds a skeleton for the learner to fill in and one line that checks it::

    def append_kv(cache_k, new_k, ...):
        ...                                  # your code
    lib.exercises.check("append_kv", append_kv)

``check`` runs the exercise's hidden cases (built from lib's own, tested implementation) against the learner's
function and prints either "all N cases pass" or what went wrong in the first failing case — the case's
description, what differed (a shape, a dtype, how far off the values are, an exception) — and a hint. It never
prints the expected answer, and it never raises: a wrong try is a message, not a traceback.

Hints come in three tiers, shown one at a time and only after a wrong try: first a question that points the
learner's thinking, then a pointer to what to use, the recipe last. The first failing try of an exercise shows
the question, each further failing try of the same exercise (in this kernel) the next tier; a passing try says
so and starts the tiers over. A cell that still raises ``NotImplementedError`` is "not written yet": not a try,
and no hint yet. An exercise may watch *how* the answer was reached and name the mistake in the course's words
(``Case.compare``; ``Case.explain_error`` when the learner's function raised).

A worked solution sits in a collapsed cell after each exercise and ends in ``check(name, solution,
worked=True)``: it says that the worked solution passes, and touches neither the hint tiers nor ``done()``
(the exercises the learner's own function passed), so "Run All" does not mark the exercises done.

A *prediction* is asked before its answer is shown: the learner writes a guess into ``your_x = None`` in one cell
(its question in the markdown above); the answer is computed in a later cell whose source is collapsed and which
ends in ``lib.exercises.reveal(your_x, truth, ...)``: it says whether the guess was right (within a stated
tolerance) and then gives the answer. Without a guess (``None``) it asks for one first: in a notebook the answer
then sits folded under that request (an HTML ``<details>``: a click opens it), so a stored "Run All" output still
asks before it tells, and a learner who skipped the guess can still read the answer.

Each topic registers its exercises in its own module of this package (``lib/exercises/<topic>.py``) with the
``exercise`` decorator; ``check`` finds them all.
"""
from __future__ import annotations

import importlib
import pkgutil
from dataclasses import dataclass, field
from typing import Any, Callable, Iterable

import torch

from ..i18n import colon, say, t

__all__ = ["Case", "Result", "exercise", "check", "names", "solution", "compare", "Mismatch", "reveal", "done", "tries",
           "reset", "HINT_TIERS"]

HINT_TIERS = ("a question", "a pointer", "the recipe")  # the order a learner's wrong tries show an exercise's hints


@dataclass
class Case:
    """One hidden case: ``args``/``kwargs`` for the learner's function, the expected result, a description
    that says what situation the case is (never its answer), and optionally its own comparison."""
    description: str
    args: tuple = ()
    kwargs: dict = field(default_factory=dict)
    expected: Any = None
    compare: Callable[[Any, Any], str | None] | None = None
    explain_error: Callable[[Exception], str | None] | None = None  # the learner's function raised: name why


@dataclass
class _Exercise:
    name: str
    title: str
    hints: tuple  # (a question, a pointer, the recipe): HINT_TIERS
    cases: Callable[[], Iterable[Case]]
    solution: Callable


@dataclass
class Result:
    """What ``check`` found; ``bool(result)`` is whether every case passed."""
    name: str
    passed: bool
    n_cases: int
    message: str
    worked: bool = False  # the worked solution was checked (check(..., worked=True)): nothing is marked done

    def __bool__(self) -> bool:
        return self.passed

    printed: bool = False

    def __repr__(self) -> str:
        return f"Result(name={self.name!r}, passed={self.passed}, n_cases={self.n_cases}, worked={self.worked})"

    def _ipython_display_(self) -> None:
        """As a cell's last expression: the message, once (``check`` has usually printed it already)."""
        if not self.printed:
            print(self.message)


_REGISTRY: dict[str, _Exercise] = {}
_LOADED = False
_TRIES: dict[str, int] = {}  # failing tries of the learner's own function, per exercise, in this process
_DONE: set[str] = set()  # exercises the learner's own function passed in this process


def exercise(name: str, *, title: str, hints: tuple, solution: Callable):
    """Register ``cases()`` (a function that yields the hidden cases) as exercise ``name``. ``hints``: three
    texts, a question, a pointer and the recipe (``HINT_TIERS``), shown one per wrong try in that order.
    ``solution`` is a worked answer (the notebook's collapsed solution cell shows the same code); the tests check
    that it passes and that wrong answers fail without the expected values appearing in the message."""
    if (not isinstance(hints, tuple) or len(hints) != len(HINT_TIERS)
            or not all(isinstance(h, str) and h.strip() for h in hints)):
        raise ValueError(f"exercise {name!r}: hints must be a tuple of {len(HINT_TIERS)} texts "
                         f"({', '.join(HINT_TIERS)}), got {hints!r}")

    def register(cases):
        if name in _REGISTRY and _REGISTRY[name].cases is not cases:
            raise ValueError(f"exercise {name!r} is registered twice")
        _REGISTRY[name] = _Exercise(name, title, hints, cases, solution)
        return cases
    return register


def solution(name: str) -> Callable:
    """The registered worked solution of exercise ``name`` (for tests and for a teacher)."""
    return _exercise(name).solution


def _load_all() -> None:
    global _LOADED
    if not _LOADED:
        for info in pkgutil.iter_modules(__path__):
            importlib.import_module(f"{__name__}.{info.name}")
        _LOADED = True


def names() -> list[str]:
    """Every registered exercise, sorted."""
    _load_all()
    return sorted(_REGISTRY)


class Mismatch(Exception):
    """Raised by a comparison to say what differs (without the expected value)."""


def _describe(x) -> str:
    if isinstance(x, torch.Tensor):
        return t("a tensor of shape {shape} and dtype {dtype}", shape=tuple(x.shape), dtype=x.dtype)
    return t("a {kind}", kind=type(x).__name__)


def compare(got, want, *, atol: float = 1e-5, rtol: float = 1e-4, what: str | None = None) -> None:
    """Raise ``Mismatch`` saying how ``got`` differs from ``want`` — types, shapes, dtypes, how far off — never
    what ``want`` is. Tensors are compared with ``allclose``; lists, tuples and dicts element by element;
    everything else with ``==``. The message is for the learner: it speaks the notebook's language."""
    what = t("your result") if what is None else what
    if isinstance(want, torch.Tensor):
        if not isinstance(got, torch.Tensor):
            raise Mismatch(t("{what} is {got}; a tensor was expected", what=what, got=_describe(got)))
        if tuple(got.shape) != tuple(want.shape):
            raise Mismatch(t("{what} has shape {shape}, which is not the expected shape", what=what, shape=tuple(got.shape)))
        if want.dtype.is_floating_point != got.dtype.is_floating_point or (
                not want.dtype.is_floating_point and got.dtype != want.dtype):
            raise Mismatch(t("{what} has dtype {dtype}, which is not the expected dtype", what=what, dtype=got.dtype))
        g, w = got.detach().to("cpu", torch.float64), want.detach().to("cpu", torch.float64)
        if not torch.isfinite(g).all() and torch.isfinite(w).all():
            raise Mismatch(t("{what} holds NaN or inf", what=what))
        if not torch.allclose(g, w, atol=atol, rtol=rtol, equal_nan=True):
            diff = (g - w).abs().nan_to_num(float("inf"))
            where = tuple(int(i) for i in torch.unravel_index(diff.argmax(), diff.shape)) if diff.dim() else ()
            raise Mismatch(t("{what} has the right shape but its values are off: the largest difference is "
                             "{diff} (at index {where}; tolerance {atol})", what=what, diff=f"{float(diff.max()):.3g}",
                             where=where, atol=f"{atol:g}"))
        return
    if isinstance(want, (list, tuple)):
        if not isinstance(got, (list, tuple)):
            raise Mismatch(t("{what} is {got}; a {kind} was expected", what=what, got=_describe(got), kind=type(want).__name__))
        if len(got) != len(want):
            raise Mismatch(t("{what} has {n} items, which is not the expected number", what=what, n=len(got)))
        for i, (g, w) in enumerate(zip(got, want)):
            compare(g, w, atol=atol, rtol=rtol, what=t("item {i} of {what}", i=i, what=what))
        return
    if isinstance(want, dict):
        if not isinstance(got, dict) or set(got) != set(want):
            raise Mismatch(t("{what} should be a dict with the keys {keys}", what=what, keys=sorted(want)))
        for k in want:
            compare(got[k], want[k], atol=atol, rtol=rtol, what=f"{what}[{k!r}]")
        return
    if isinstance(want, bool) or isinstance(got, bool):
        if got is not want and not (isinstance(got, torch.Tensor) and got.numel() == 1 and bool(got) is want):
            raise Mismatch(t("{what} is {got}, which is not the expected answer", what=what, got=repr(got)))
        return
    if isinstance(want, float):
        try:
            ok = abs(float(got) - want) <= atol + rtol * abs(want)
        except (TypeError, ValueError):
            raise Mismatch(t("{what} is {got}; a number was expected", what=what, got=_describe(got))) from None
        if not ok:
            raise Mismatch(t("{what} is {got}, which is not the expected value", what=what, got=f"{float(got):.6g}"))
        return
    if isinstance(want, int):
        if isinstance(got, torch.Tensor) and got.numel() == 1:
            got = got.item()
        if not isinstance(got, (int, float)) or got != want:
            raise Mismatch(t("{what} is {got}, which is not the expected value", what=what, got=repr(got)))
        return
    if got != want:
        raise Mismatch(t("{what} is {got}, which is not the expected value", what=what, got=repr(got)))


def _exercise(name: str) -> _Exercise:
    _load_all()
    if name not in _REGISTRY:
        raise ValueError(f"unknown exercise {name!r}; the exercises are: {', '.join(sorted(_REGISTRY))}")
    return _REGISTRY[name]


def done() -> list[str]:
    """The exercises whose learner's own function passed in this kernel (a worked solution marks none), sorted."""
    return sorted(_DONE)


def tries(name: str) -> int:
    """Failing tries of exercise ``name`` since it last passed (or since the kernel started): the next wrong try
    shows hint tier ``min(tries, 2)`` (0 = the question)."""
    return _TRIES.get(_exercise(name).name, 0)


def reset(name: str | None = None) -> None:
    """Start exercise ``name`` over (every exercise: ``None``): no failing tries, not done."""
    if name is None:
        _TRIES.clear()
        _DONE.clear()
        return
    _TRIES.pop(_exercise(name).name, None)
    _DONE.discard(name)


def check(name: str, fn: Callable, *, quiet: bool = False, worked: bool = False) -> Result:
    """Run exercise ``name``'s hidden cases against ``fn``; print and return what was found. Never raises
    for a wrong ``fn`` (only for an unknown exercise name). A failing try shows the next hint tier (a question,
    then a pointer, then the recipe) and a passing one marks the exercise done (``done()``). ``worked=True``:
    ``fn`` is the notebook's worked solution; the message says it passes, and nothing is counted or marked."""
    if not isinstance(worked, bool):
        raise TypeError(f"worked must be True (the notebook's worked solution) or False, got {worked!r}")
    ex = _exercise(name)
    cases = list(ex.cases())
    result = _run(ex, fn, cases, worked=worked)
    if not quiet:
        print(result.message)
        result.printed = True
    return result


def _hint(ex: _Exercise, tier: int) -> str:
    """The hint line of tier ``tier`` (0: the question, 1: the pointer, 2: the recipe)."""
    return t("\n  Hint {k} of {m} — {kind}: {hint}", k=tier + 1, m=len(HINT_TIERS), kind=t(HINT_TIERS[tier]),
             hint=t(ex.hints[tier]))


def _run(ex: _Exercise, fn, cases: list[Case], *, worked: bool = False) -> Result:
    """The learner's messages, in the notebook's language (titles, hints and case descriptions go through t)."""
    n, title = len(cases), t(ex.title)
    if worked:
        failed = _first_failure(fn, cases)
        if failed is None:
            return Result(ex.name, True, n, t("✓ {title}: the worked solution passes the hidden case. Yours is "
                                              "checked, and marked done, when you run your own cell above.",
                                              title=title) if n == 1 else
                          t("✓ {title}: the worked solution passes all {n} hidden cases. Yours is checked, and "
                            "marked done, when you run your own cell above.", title=title, n=n), worked=True)
        i, case, problem = failed
        return Result(ex.name, False, n, t("✗ {title}, the worked solution — case {i} of {n} ({case}): {problem}",
                                           title=title, i=i, n=n, case=case.description, problem=problem),
                      worked=True)
    if not callable(fn):
        return Result(ex.name, False, n, t("✗ {title}: check() needs your function itself, got {got}.", title=title,
                                           got=_describe(fn)))
    failed = _first_failure(fn, cases)
    if failed is None:
        _TRIES.pop(ex.name, None)
        _DONE.add(ex.name)
        return Result(ex.name, True, n, t("✓ {title}: the hidden case passes.", title=title) if n == 1 else
                      t("✓ {title}: all {n} hidden cases pass.", title=title, n=n))
    i, case, problem = failed
    if problem is None:  # still `raise NotImplementedError`: not a try, and no hint before one
        return Result(ex.name, False, n, t("… {title}: not written yet — replace the `raise NotImplementedError` "
                                           "with your code and run the cell again. Hints come after a wrong try: a "
                                           "question first, the recipe last.", title=title))
    tier = min(_TRIES.get(ex.name, 0), len(HINT_TIERS) - 1)
    _TRIES[ex.name] = _TRIES.get(ex.name, 0) + 1
    return Result(ex.name, False, n, t("✗ {title} — case {i} of {n} ({case}): {problem}", title=title, i=i, n=n,
                                       case=case.description, problem=problem) + _hint(ex, tier))


def _first_failure(fn, cases: list[Case]):
    """``None`` when ``fn`` passes every case, else (case number from 1, the case, what went wrong): ``None``
    as what went wrong when ``fn`` raised NotImplementedError (not written yet)."""
    for i, case in enumerate(cases, 1):
        args = tuple(a.clone() if isinstance(a, torch.Tensor) else a for a in case.args)
        try:
            got = fn(*args, **case.kwargs)
        except NotImplementedError:
            return i, case, None
        except Exception as e:  # the learner's bug: report it as a message, not a traceback
            named = case.explain_error(e) if case.explain_error is not None else None
            return i, case, named or t("your function raised {error}: {e}", error=type(e).__name__, e=e)
        try:
            if case.compare is not None:
                problem = case.compare(got, case.expected)
                if problem:
                    raise Mismatch(problem)
            else:
                compare(got, case.expected)
        except Mismatch as m:
            return i, case, str(m)
    return None


def _show(x) -> str:
    if isinstance(x, bool):
        return str(x)
    if isinstance(x, float):
        return f"{x:,.4g}" if abs(x) >= 1e-3 or x == 0 else f"{x:.3g}"
    if isinstance(x, int):
        return f"{x:,}"
    if isinstance(x, (tuple, list)):
        return "(" + ", ".join(_show(v) for v in x) + ")" if isinstance(x, tuple) else "[" + ", ".join(_show(v) for v in x) + "]"
    return str(x)


def _close(got, want, rel: float) -> bool:
    if isinstance(want, (tuple, list)):
        return isinstance(got, (tuple, list)) and len(got) == len(want) and all(_close(g, w, rel) for g, w in zip(got, want))
    if isinstance(want, bool) or isinstance(got, bool):
        return got is want
    if isinstance(want, (int, float)):
        try:
            g = float(got)
        except (TypeError, ValueError):
            return False
        return abs(g - want) <= rel * abs(want) if rel else g == want
    return got == want


def reveal(yours, truth, *, rel: float = 0.0, why: str | None = None, what: str | None = None) -> Result:
    """The answer cell of a prediction: compare the learner's guess ``yours`` (``None`` = no guess made) with
    ``truth`` (a number, a string, a bool or a tuple of them), ``rel`` the relative tolerance for numbers
    (0 = exact), and print the verdict followed by the answer and ``why`` (one sentence that explains it: through
    ``t``, or written in the cell in English, which ``lib.i18n.say`` puts in the notebook's language here). The
    message is written in the notebook's language before it is printed. Never raises for a wrong guess.

    Without a guess it asks for one first: in a notebook kernel the answer and ``why`` come folded under that
    request (an HTML ``<details>`` the learner opens with a click, so a stored output asks before it tells); the
    text form (a terminal, ``Result.message``) has the request, then the answer."""
    if not isinstance(rel, (int, float)) or isinstance(rel, bool) or not 0 <= rel < 1:
        raise ValueError(f"rel must be a relative tolerance in [0, 1), got {rel!r}")
    what = t("the answer") if what is None else what
    answer = "\n".join(x for x in (what + colon() + _show(truth), why and say(why)) if x)
    if yours is None:
        ask = t("No prediction yet: write your guess in the cell above and run it, then run this cell again.")
        result = Result("prediction", False, 1, ask + "\n" + answer)
        if not _show_folded(ask, t("I skipped it: show the answer"), answer):
            print(result.message)
        result.printed = True
        return result
    if _close(yours, truth, rel):
        verdict, passed = (t("✓ Right.") if not rel else
                           t("✓ Right, within {pct}.", pct=f"{rel:.0%}")), True
    else:
        verdict, passed = t("✗ Not quite: you said {yours}.", yours=_show(yours)), False
    message = verdict + "\n" + answer
    print(message)
    result = Result("prediction", passed, 1, message)
    result.printed = True
    return result


def _show_folded(text: str, summary: str, folded: str) -> bool:
    """In a notebook kernel, show ``text`` with ``folded`` under a closed ``<details>`` (its ``summary`` the line
    to click; text/plain holds all of it, in order); ``False`` (nothing shown) outside a kernel."""
    try:
        from IPython import get_ipython
        from IPython.display import display
    except ImportError:
        return False
    ip = get_ipython()
    if ip is None or not hasattr(ip, "kernel"):
        return False
    from html import escape
    block = 'style="margin:0.2em 0;white-space:pre-wrap;font-family:var(--jp-code-font-family, monospace)"'
    html = (f"<div {block}>{escape(text)}</div><details><summary style=\"cursor:pointer\">{escape(summary)}"
            f"</summary><div {block}>{escape(folded)}</div></details>")
    display({"text/plain": f"{text}\n{folded}", "text/html": html}, raw=True)
    return True

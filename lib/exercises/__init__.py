"""Exercises that make the learner build a piece, checked against hidden cases.

A notebook cell holds a skeleton for the learner to fill in and one line that checks it::

    def append_kv(cache_k, new_k, ...):
        ...                                  # your code
    lib.exercises.check("append_kv", append_kv)

``check`` runs the exercise's hidden cases (built from lib's own, tested implementation) against the learner's
function and prints either "all N cases pass" or what went wrong in the first failing case — the case's
description, what differed (a shape, a dtype, how far off the values are, an exception) — and a hint. It never
prints the expected answer, and it never raises: a wrong try is a message, not a traceback. A worked solution
sits in a collapsed cell after each exercise.

A *prediction* is asked before its answer is shown: the learner writes a guess into ``your_x = None`` in one cell
(its question in the markdown above); the answer is computed in a later cell whose source is collapsed and which
ends in ``lib.exercises.reveal(your_x, truth, ...)``: it says whether the guess was right (within a stated
tolerance) and then gives the answer, so a learner who skipped the guess still learns it.

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

__all__ = ["Case", "Result", "exercise", "check", "names", "solution", "compare", "Mismatch", "reveal"]


@dataclass
class Case:
    """One hidden case: ``args``/``kwargs`` for the learner's function, the expected result, a description
    that says what situation the case is (never its answer), and optionally its own comparison."""
    description: str
    args: tuple = ()
    kwargs: dict = field(default_factory=dict)
    expected: Any = None
    compare: Callable[[Any, Any], str | None] | None = None


@dataclass
class _Exercise:
    name: str
    title: str
    hint: str
    cases: Callable[[], Iterable[Case]]
    solution: Callable


@dataclass
class Result:
    """What ``check`` found; ``bool(result)`` is whether every case passed."""
    name: str
    passed: bool
    n_cases: int
    message: str

    def __bool__(self) -> bool:
        return self.passed

    printed: bool = False

    def __repr__(self) -> str:
        return f"Result(name={self.name!r}, passed={self.passed}, n_cases={self.n_cases})"

    def _ipython_display_(self) -> None:
        """As a cell's last expression: the message, once (``check`` has usually printed it already)."""
        if not self.printed:
            print(self.message)


_REGISTRY: dict[str, _Exercise] = {}
_LOADED = False


def exercise(name: str, *, title: str, hint: str, solution: Callable):
    """Register ``cases()`` (a function that yields the hidden cases) as exercise ``name``. ``solution`` is a
    worked answer (the notebook's collapsed solution cell shows the same code); the tests check that it passes
    and that wrong answers fail without the expected values appearing in the message."""
    def register(cases):
        if name in _REGISTRY and _REGISTRY[name].cases is not cases:
            raise ValueError(f"exercise {name!r} is registered twice")
        _REGISTRY[name] = _Exercise(name, title, hint, cases, solution)
        return cases
    return register


def solution(name: str) -> Callable:
    """The registered worked solution of exercise ``name`` (for tests and for a teacher)."""
    _load_all()
    if name not in _REGISTRY:
        raise ValueError(f"unknown exercise {name!r}; the exercises are: {', '.join(sorted(_REGISTRY))}")
    return _REGISTRY[name].solution


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


def check(name: str, fn: Callable, *, quiet: bool = False) -> Result:
    """Run exercise ``name``'s hidden cases against ``fn``; print and return what was found. Never raises
    for a wrong ``fn`` (only for an unknown exercise name)."""
    _load_all()
    if name not in _REGISTRY:
        raise ValueError(f"unknown exercise {name!r}; the exercises are: {', '.join(sorted(_REGISTRY))}")
    ex = _REGISTRY[name]
    cases = list(ex.cases())
    result = _run(ex, fn, cases)
    if not quiet:
        print(result.message)
        result.printed = True
    return result


def _run(ex: _Exercise, fn, cases: list[Case]) -> Result:
    """The learner's messages, in the notebook's language (titles, hints and case descriptions go through t)."""
    n, title, hint = len(cases), t(ex.title), t(ex.hint)
    if not callable(fn):
        return Result(ex.name, False, n, t("✗ {title}: check() needs your function itself, got {got}.", title=title,
                                           got=_describe(fn)))
    for i, case in enumerate(cases, 1):
        args = tuple(a.clone() if isinstance(a, torch.Tensor) else a for a in case.args)
        try:
            got = fn(*args, **case.kwargs)
        except NotImplementedError:
            return Result(ex.name, False, n, t("… {title}: not written yet — replace the `raise NotImplementedError` "
                                               "with your code and run the cell again.\n  Hint: {hint}", title=title,
                                               hint=hint))
        except Exception as e:  # the learner's bug: report it as a message, not a traceback
            return Result(ex.name, False, n, t("✗ {title} — case {i} of {n} ({case}): your function raised "
                                               "{error}: {e}\n  Hint: {hint}", title=title, i=i, n=n,
                                               case=case.description, error=type(e).__name__, e=e, hint=hint))
        try:
            if case.compare is not None:
                problem = case.compare(got, case.expected)
                if problem:
                    raise Mismatch(problem)
            else:
                compare(got, case.expected)
        except Mismatch as m:
            return Result(ex.name, False, n, t("✗ {title} — case {i} of {n} ({case}): {problem}\n  Hint: {hint}",
                                               title=title, i=i, n=n, case=case.description, problem=m, hint=hint))
    return Result(ex.name, True, n, t("✓ {title}: the hidden case passes.", title=title) if n == 1 else
                  t("✓ {title}: all {n} hidden cases pass.", title=title, n=n))


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
    message is written in the notebook's language before it is printed. Never raises for a wrong guess."""
    if not isinstance(rel, (int, float)) or isinstance(rel, bool) or not 0 <= rel < 1:
        raise ValueError(f"rel must be a relative tolerance in [0, 1), got {rel!r}")
    what = t("the answer") if what is None else what
    answer = what + colon() + _show(truth)
    if yours is None:
        verdict, passed = t("No prediction yet (set it in the cell above and run this one again)."), False
    elif _close(yours, truth, rel):
        verdict, passed = (t("✓ Right.") if not rel else
                           t("✓ Right, within {pct}.", pct=f"{rel:.0%}")), True
    else:
        verdict, passed = t("✗ Not quite: you said {yours}.", yours=_show(yours)), False
    message = "\n".join(x for x in (verdict, answer, why and say(why)) if x)
    print(message)
    result = Result("prediction", passed, 1, message)
    result.printed = True
    return result

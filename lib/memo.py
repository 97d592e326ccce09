"""Measured once, read back after: a disk cache for the course's few slow, deterministic measurements.

``make test`` runs every notebook more than once in one run: nbval runs the English and the Chinese edition (the
same code cells but for their words), and the browser test runs the English notebooks again in JupyterLab. The
slowest cells are measurements that are pure functions of their inputs (a perplexity sweep over cache windows,
a serving engine on a predicted clock): the same model, the same text, the same settings give the same numbers,
bit for bit. With ``KVLAB_MEMO`` naming a folder, a function marked ``@memoised`` stores its result there under a
key made of everything that decides it — the function, every argument (tensors and a model's weights by their
bytes), and the source of ``lib`` itself — and a later call with the same key, in any process, reads it back
instead of computing it again. A process that asks for a key another one is computing waits for it (a file lock),
so each is computed once per run.

Unset (the default, and what a learner has), nothing is stored and every call computes: ``make test`` sets it to a
new empty folder for its own run and removes it after, so every stored number is still computed in that run, once.
Only functions whose result depends on nothing but their arguments are marked (no clock, no random state they do
not seed themselves, no argument they change); ``when`` leaves out the calls that measure time.
"""
from __future__ import annotations

import contextlib
import dataclasses
import fcntl
import functools
import hashlib
import inspect
import os
from pathlib import Path

import torch

ENV = "KVLAB_MEMO"  # a folder: results are stored there; unset or empty: nothing is cached
_LIB = Path(__file__).resolve().parent


class Unkeyable(TypeError):
    """An argument whose value the key cannot capture (the call then computes, uncached)."""


@functools.cache
def lib_source_digest() -> str:
    """SHA-1 of every ``lib`` source file: a change anywhere in lib makes every stored result stale."""
    h = hashlib.sha1(torch.__version__.encode())
    for path in sorted(_LIB.rglob("*.py")):
        h.update(str(path.relative_to(_LIB)).encode() + b"\0" + path.read_bytes() + b"\0")
    return h.hexdigest()


_MODULE_DIGESTS: dict[int, tuple[tuple, str]] = {}  # id(module) -> (its tensors' versions, digest)


def _tensor_digest(t: torch.Tensor) -> str:
    shape, t = tuple(t.shape), t.detach().cpu().contiguous().reshape(-1)
    return hashlib.sha1(str((t.dtype, shape)).encode() + t.view(torch.uint8).numpy().tobytes()).hexdigest()


def _module_digest(m: torch.nn.Module) -> str:
    """A model's weights and buffers by their bytes, its class and config; computed again only when a tensor of it
    was changed in place (``Tensor._version``) or replaced."""
    state = m.state_dict(keep_vars=True)
    versions = tuple((k, id(v), v._version) for k, v in state.items())
    kept = _MODULE_DIGESTS.get(id(m))
    if kept is None or kept[0] != versions:
        h = hashlib.sha1(f"{type(m).__module__}.{type(m).__qualname__} {getattr(m, 'config', '')!r} "
                         f"training={m.training}".encode())
        for k, v in state.items():
            h.update(k.encode() + _tensor_digest(v).encode())
        kept = _MODULE_DIGESTS[id(m)] = (versions, h.hexdigest())
    return kept[1]


def canonical(value) -> str:
    """A text that is equal for two arguments exactly when the memoised function cannot tell them apart."""
    if value is None or isinstance(value, (bool, int, float, str, bytes)):
        return f"{type(value).__name__}:{value!r}"
    if isinstance(value, torch.Tensor):
        return f"tensor:{_tensor_digest(value)}"
    if isinstance(value, torch.nn.Module):
        return f"module:{_module_digest(value)}"
    if isinstance(value, (list, tuple)):
        return f"{type(value).__name__}[" + ",".join(canonical(v) for v in value) + "]"
    if isinstance(value, dict):
        return "dict{" + ",".join(f"{canonical(k)}={canonical(v)}" for k, v in value.items()) + "}"
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return f"{type(value).__qualname__}(" + ",".join(
            f"{f.name}={canonical(getattr(value, f.name))}" for f in dataclasses.fields(value)) + ")"
    if hasattr(value, "to_json"):  # the tokenizers: their whole vocabulary
        return f"{type(value).__qualname__}:{value.to_json()}"
    raise Unkeyable(f"{type(value).__qualname__} cannot be keyed")


def key(fn, bound: inspect.BoundArguments) -> str:
    text = f"{fn.__module__}.{fn.__qualname__}|{lib_source_digest()}|" + canonical(dict(bound.arguments))
    return hashlib.sha1(text.encode()).hexdigest()


@contextlib.contextmanager
def _locked(path: Path):
    with open(path.with_suffix(".lock"), "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # another process computing this key: wait for it
        try:
            yield
        finally:
            fcntl.flock(lock, fcntl.LOCK_UN)


def memoised(fn=None, *, when=None):
    """Mark ``fn`` as a pure measurement: under ``KVLAB_MEMO`` its result is stored and read back by key.
    ``when(arguments) -> bool`` (the bound arguments, defaults filled in): only those calls are cached."""
    if fn is None:
        return functools.partial(memoised, when=when)
    signature = inspect.signature(fn)

    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        folder = os.environ.get(ENV, "").strip()
        if not folder:
            return fn(*args, **kwargs)
        bound = signature.bind(*args, **kwargs)
        bound.apply_defaults()
        if when is not None and not when(bound.arguments):
            return fn(*args, **kwargs)
        try:
            path = Path(folder) / f"{fn.__module__}.{fn.__qualname__}-{key(fn, bound)}.pt"
        except Unkeyable:
            return fn(*args, **kwargs)
        path.parent.mkdir(parents=True, exist_ok=True)
        with _locked(path):
            if path.is_file():
                return torch.load(path, weights_only=False)  # written by this run's own processes
            result = fn(*args, **kwargs)
            part = path.with_suffix(f".part{os.getpid()}")
            torch.save(result, part)
            os.replace(part, path)
            return result

    wrapper.uncached = fn
    return wrapper

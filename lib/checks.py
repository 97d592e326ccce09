"""Argument checks, written once: every public entry point of lib checks its arguments with these, so a wrong
value gets an error that names the argument, says what was given and what is allowed — never a traceback
from deep inside torch, never a silent truncation (2.5 tokens is refused, not rounded).

Where an integer is meant, Python ints, numpy integers and 0-d integer tensors are accepted (a value read
from a tensor or an array is an integer too); bools are refused, and so are floats, even 2.0.
"""
from __future__ import annotations

import functools
import math
import numbers
import os

import torch

from . import i18n  # a message a notebook asks the learner to read is in the notebook's language


def _describe(value) -> str:
    return repr(value) if isinstance(value, (int, float, str, type(None), numbers.Number)) \
        else f"{type(value).__name__} {value!r}"


def as_int(value):
    """``value`` as an int when it is an integer (int, numpy integer, 0-d integer tensor), else None."""
    if isinstance(value, torch.Tensor):
        ok = value.dim() == 0 and not value.dtype.is_floating_point and not value.dtype.is_complex \
            and value.dtype != torch.bool
        return int(value) if ok else None
    if isinstance(value, bool) or not isinstance(value, numbers.Integral):
        return None
    return int(value)


def as_number(value):
    """``value`` as a float when it is a real number (int, float, numpy number, 0-d real tensor; not a bool,
    not a string), else None. NaN and inf are numbers here; ``number`` refuses them."""
    if isinstance(value, torch.Tensor):
        ok = value.dim() == 0 and value.dtype != torch.bool and not value.dtype.is_complex
        return float(value) if ok else None
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        return None
    return float(value)


def _range(minimum, maximum, kind) -> str:
    if minimum is not None and maximum is not None:
        return f"{kind} from {minimum} to {maximum}"
    if minimum is not None:
        return f"{kind} >= {minimum}"
    return f"{kind} <= {maximum}" if maximum is not None else kind


def integer(value, name: str, minimum: int | None = None, maximum: int | None = None, *,
            allowed: str | None = None) -> int:
    """``value`` as an int, or a ValueError: "<name> must be an integer >= 1, got 2.5" (``allowed``: other
    words for what is allowed)."""
    v = as_int(value)
    if v is None or (minimum is not None and v < minimum) or (maximum is not None and v > maximum):
        raise ValueError(f"{name} must be {allowed or _range(minimum, maximum, 'an integer')}, got {_describe(value)}")
    return v


def number(value, name: str, minimum: float | None = None, maximum: float | None = None, *,
           above: float | None = None, below: float | None = None, allowed: str | None = None) -> float:
    """``value`` as a finite float within the bounds (``above`` / ``below``: strictly), or a ValueError.
    Python and numpy numbers and 0-d real tensors are numbers; bools and strings are not."""
    v = as_number(value)
    ok = v is not None and math.isfinite(v)
    if ok:
        ok = ((minimum is None or v >= minimum) and (maximum is None or v <= maximum) and
              (above is None or v > above) and (below is None or v < below))
    if not ok:
        low = f">= {minimum}" if above is None and minimum is not None else (f"> {above}" if above is not None else "")
        high = f"<= {maximum}" if below is None and maximum is not None else (f"< {below}" if below is not None else "")
        bounds = allowed or "a finite number" + (f" {low}" if low else "") + (" and" if low and high else "") + \
            (f" {high}" if high else "")
        raise ValueError(f"{name} must be {bounds}, got {_describe(value)}")
    return v


def choice(value, name: str, allowed):
    """``value`` if it is one of ``allowed`` (of the same type: 1 is not True, 4.0 is not 4), else a ValueError
    listing them."""
    if not any(type(value) is type(a) and value == a for a in allowed):
        raise ValueError(f"{name}={value!r} is not supported; allowed: {', '.join(map(str, allowed))}")
    return value


def flag(value, name: str) -> bool:
    """True or False, nothing else ("no", 1 and None are refused: they would silently mean something)."""
    if not isinstance(value, bool):
        raise ValueError(f"{name} must be True or False, got {_describe(value)}")
    return value


def text(value, name: str) -> str:
    """A str (a prompt, a name); anything else is a TypeError that says what was given."""
    if not isinstance(value, str):
        raise TypeError(f"{name} must be a str, got {_describe(value)}")
    return value


class IndexOutOfRange(IndexError, ValueError):
    """An index outside 0..n-1: an ``IndexError``, as Python's own sequences raise, and a ``ValueError``, as every
    other argument lib refuses (so a widget that shows a refused value as a message shows this one too)."""


def index(value, name: str, n: int, context: str, allow_all: bool = False):
    """An index into ``n`` things, from 0 to n - 1 (no negative indices: -1 is a slip, not "the last"), or the
    string "all" where ``allow_all``; else an ``IndexOutOfRange`` that says what is allowed, ``context`` saying
    where n comes from ("the model has 4 layers")."""
    if allow_all and isinstance(value, str) and value == "all":
        return value
    v = as_int(value)
    if v is None or not 0 <= v < n:
        extra = ' or "all"' if allow_all else ""
        raise IndexOutOfRange(f"{name} must be an integer from 0 to {n - 1}{extra} ({context}), got {_describe(value)}")
    return v


def trace_at(trace, layer=0, head=0, batch=0) -> tuple[int, int, int]:
    """(layer, head, batch) checked against a ``lib.Trace`` (IndexError naming the one out of range)."""
    return (index(layer, "layer", trace.n_layers, f"the model has {trace.n_layers} layers"),
            index(head, "head", trace.n_heads, f"the model has {trace.n_heads} query heads"),
            index(batch, "batch", len(trace.prompt_ids), f"the trace holds {len(trace.prompt_ids)} sequence(s)"))


def token_id(value, name: str, vocab_size: int) -> int:
    """A token id of a model with ``vocab_size`` tokens."""
    v = as_int(value)
    if v is None or not 0 <= v < vocab_size:
        raise ValueError(f"{name}={value!r} is not a token id of this model (an integer from 0 to {vocab_size - 1})")
    return v


def token_ids(ids, name: str, vocab_size: int, *, empty: bool = False, single: bool = False) -> list[int]:
    """A sequence of token ids (list, tuple, 1-D integer tensor or array) as a list of ints, each from 0 to
    vocab_size - 1; ``single=True`` also takes one id (an int, a numpy integer, a 0-d tensor) as [id].
    Floats are refused, not truncated; an empty sequence only with ``empty=True``."""
    if single and as_int(ids) is not None:
        ids = [ids]
    elif isinstance(ids, torch.Tensor) or type(ids).__module__ == "numpy":
        integral = ids.dtype.kind in "iu" if type(ids).__module__ == "numpy" else \
            not ids.dtype.is_floating_point and not ids.dtype.is_complex and ids.dtype != torch.bool
        if getattr(ids, "ndim", None) != 1 or not integral:
            raise ValueError(f"{name} must be a 1-D sequence of integer token ids, got shape {tuple(ids.shape)}, "
                             f"dtype {ids.dtype}")
        ids = ids.tolist()
    if not isinstance(ids, (list, tuple)):
        raise TypeError(f"{name} must be a list of token ids, got {_describe(ids)}")
    if not ids and not empty:
        raise ValueError(f"{name} is empty: give at least one token id")
    out = [as_int(t) for t in ids]
    bad = [t for t, v in zip(ids, out) if v is None or not 0 <= v < vocab_size]
    if bad:
        raise ValueError(f"token id {_describe(bad[0])} is not in this vocabulary (ids 0..{vocab_size - 1}); {name} "
                         f"must hold integer token ids (encode text with the tokenizer first)")
    return out


def logits(value, name: str = "logits") -> torch.Tensor:
    """A (batch, vocab) floating-point tensor without NaN or +inf (-inf marks a token that cannot be chosen,
    but not every token of a row)."""
    if not isinstance(value, torch.Tensor) or value.dim() != 2 or not value.dtype.is_floating_point:
        got = f"shape {tuple(value.shape)}, dtype {value.dtype}" if isinstance(value, torch.Tensor) \
            else _describe(value)
        hint = " (for one row use logits[None])" if isinstance(value, torch.Tensor) and value.dim() == 1 else ""
        raise ValueError(f"{name} must be a (batch, vocab) floating-point tensor, got {got}{hint}")
    if bool(torch.isfinite(value.sum())):  # the usual case, in one cheap reduction: nothing is NaN or inf
        return value
    bad = torch.isnan(value) | torch.isposinf(value) | torch.isneginf(value).all(dim=-1, keepdim=True)
    if bool(bad.any()):
        row = int(bad.any(dim=-1).nonzero()[0, 0])
        raise ValueError(f"{name} hold non-finite values (row {row}: NaN, +inf, or -inf for every token); "
                         f"nothing can be chosen from them")
    return value


def finite_logits(logits: torch.Tensor, model, where: str) -> None:
    """Raise a ValueError that says where they came from when a model's logits hold NaN or inf: the parameters
    that are not finite, or, when every parameter is finite, an overflow in the model's dtype."""
    if bool(torch.isfinite(logits.sum())) or bool(torch.isfinite(logits).all()):  # (a cheap reduction first)
        return
    net = model if hasattr(model, "named_parameters") else model.model  # a FastDecoder holds the model
    bad = [n for n, p in net.named_parameters() if not bool(torch.isfinite(p).all())]
    cause = (f"the model's weights hold NaN or inf in {', '.join(bad[:5])}{' and more' if len(bad) > 5 else ''} "
             f"(load a finite checkpoint: lib.load_checkpoint refuses one that is not)" if bad else
             f"the model's weights are finite, so its {model.dtype} arithmetic overflowed on this input "
             f"(try float32)")
    raise ValueError(f"the logits at {where} hold NaN or inf, so no next token can be chosen: {cause}")


def probabilities(value, name: str) -> torch.Tensor:
    """A 1-D tensor of probabilities over a vocabulary: finite, non-negative, summing to 1 (within 1e-4)."""
    if not isinstance(value, torch.Tensor) or value.dim() != 1 or not value.dtype.is_floating_point:
        got = f"shape {tuple(value.shape)}" if isinstance(value, torch.Tensor) else _describe(value)
        raise ValueError(f"{name} must be a 1-D float tensor of probabilities over the vocabulary, got {got}")
    if not bool(torch.isfinite(value).all()) or bool((value < 0).any()) or abs(float(value.sum()) - 1.0) > 1e-4:
        raise ValueError(f"{name} must be a probability distribution (finite, non-negative, summing to 1), got "
                         f"sum {float(value.sum()):.6g}, min {float(value.min()):.6g}")
    return value


def ragged_lengths(lengths, batch: int, width: int) -> list | None:
    """The real tokens per row of a right-padded (batch, width) input: each from 1 to width, the longest
    filling it. None when every row is full (nothing is ragged)."""
    given = list(lengths) if isinstance(lengths, (list, tuple)) else lengths
    ok = isinstance(given, list) and len(given) == batch and all(as_int(n) is not None and 1 <= n <= width
                                                                 for n in given) and max(given) == width
    if not ok:
        raise ValueError(f"lengths must give each of the {batch} row(s) its number of real tokens, from 1 to "
                         f"T={width}, the longest filling all of input_ids; got {lengths!r}")
    return None if len(set(given)) == 1 else [int(n) for n in given]


def prompt_tensor(prompts) -> torch.Tensor:
    """One prompt (a list of token ids) or a batch of them (a list of equally long lists) as a (B, T) tensor."""
    rows = list(prompts) if prompts and isinstance(prompts[0], (list, tuple)) else [prompts]
    for b, row in enumerate(rows):
        where = f"prompt {b} of the batch" if len(rows) > 1 else "the prompt"
        if not isinstance(row, (list, tuple)):
            raise TypeError(f"a batch of prompts is a list of lists of token ids; {where} is {row!r} "
                            f"({type(row).__name__})")
        if not row:
            raise ValueError(f"{where} is empty: give at least one token (e.g. the <s> token)")
        bad = [t for t in row if as_int(t) is None]
        if bad:
            raise TypeError(f"token ids are integers; {where} holds {bad[0]!r} ({type(bad[0]).__name__}) "
                            f"(encode text with the tokenizer first)")
    lengths = [len(row) for row in rows]
    if len(set(lengths)) > 1:
        raise ValueError(f"the prompts of one batch must have the same length (generate keeps them in step), got "
                         f"lengths {lengths}; generate them one at a time, or use lib.serving.serve, which batches "
                         f"requests of any length")
    return torch.tensor([[as_int(t) for t in row] for row in rows], dtype=torch.long)


def token_tensor(input_ids, vocab_size: int, device) -> None:
    """Raise a clear error unless ``input_ids`` is a non-empty (batch, seq_len) tensor of ids of this model
    on ``device``."""
    if not isinstance(input_ids, torch.Tensor):
        raise TypeError(f"input_ids must be a torch.Tensor of token ids, got {type(input_ids).__name__}")
    if input_ids.dim() != 2:
        hint = " (for one sequence use input_ids.unsqueeze(0))" if input_ids.dim() == 1 else ""
        raise ValueError(f"input_ids must have shape (batch, seq_len), got shape {tuple(input_ids.shape)}{hint}")
    if input_ids.dtype not in (torch.long, torch.int):  # what an embedding lookup takes
        raise TypeError(f"input_ids must hold signed integer token ids (torch.long, torch.int), "
                        f"got dtype {input_ids.dtype}")
    if input_ids.numel() == 0:
        raise ValueError(f"input_ids is empty (shape {tuple(input_ids.shape)}): feed at least one token "
                         f"of at least one sequence")
    if input_ids.device != device:
        raise ValueError(f"input_ids are on {input_ids.device} but the model is on {device}; "
                         f"move them with input_ids.to(model.device)")
    lo, hi = (int(v) for v in torch.aminmax(input_ids))
    if lo < 0 or hi >= vocab_size:
        raise ValueError(f"token id {lo if lo < 0 else hi} is out of range: this model's ids run from 0 to "
                         f"{vocab_size - 1}")


def sampling(temperature, top_k=None, top_p=None, greedy: bool = True) -> tuple:
    """(temperature, top_k, top_p) as a float, an int or None, a float or None; a ValueError that names the
    setting and what is allowed when one is out of range (``greedy=False``: a temperature to divide by, not 0)."""
    if greedy:
        temperature = number(temperature, "temperature", 0, allowed="a finite number >= 0 (0 means greedy)")
    else:
        temperature = number(temperature, "temperature", above=0, allowed="a finite number > 0 (to divide the "
                                                                           "logits by)")
    if top_k is not None:
        top_k = integer(top_k, "top_k", 1, allowed="None (no limit) or an integer >= 1")
    if top_p is not None:
        top_p = number(top_p, "top_p", maximum=1, above=0, allowed="None (no limit) or a number in (0, 1]")
    return temperature, top_k, top_p


@functools.lru_cache(maxsize=1)
def _cpu_memory() -> int | None:
    """Bytes of memory this process may use: the machine's, or its container's limit when that is lower."""
    sizes = []
    try:
        sizes.append(os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES"))
    except (AttributeError, ValueError, OSError):
        pass
    for limit in ("/sys/fs/cgroup/memory.max", "/sys/fs/cgroup/memory/memory.limit_in_bytes"):  # cgroup v2, v1
        try:
            with open(limit) as f:
                sizes.append(int(f.read().strip()))
        except (OSError, ValueError):  # absent, or "max" (no limit)
            pass
    return min(sizes) if sizes else None


def fits_in_memory(nbytes: int, device, what: str) -> None:
    """Refuse, before allocating, ``what`` of ``nbytes`` bytes that cannot fit in the device's memory (a typo
    of a few zeros would otherwise get the process killed, or a raw allocator error)."""
    device = torch.device(device)
    total = None
    if device.type == "cpu":
        total = _cpu_memory()
    elif device.type == "cuda":
        total = torch.cuda.mem_get_info(device)[1]
    if total is not None and nbytes > total:
        raise ValueError(f"{what} would take {nbytes:,} bytes, more than the {total:,} bytes of memory of "
                         f"{device}; ask for less")


def kv_cache(cache, name: str = "cache"):
    """None, or an object that follows the cache protocol (``lib.cache``: begin / update / commit / rollback)."""
    if cache is not None and not all(hasattr(cache, a) for a in ("begin", "update", "commit", "rollback", "seq_lens")):
        raise TypeError(f"{name} must be a KV cache (lib.KVCache, lib.ConcatKVCache, lib.PagedKVCache) or None, "
                        f"got {_describe(cache)}")
    return cache


def forward_extras(cache, record) -> None:
    """A forward pass's ``cache`` (None or a KV cache) and ``record`` (None or a ``lib.ForwardRecord``)."""
    kv_cache(cache)
    if record is not None and not all(hasattr(record, a) for a in ("capture", "kv_computed", "attention")):
        raise TypeError(f"record must be a lib.ForwardRecord or None, got {_describe(record)}")


def cache_memory(cache, n_positions: int, copies: int = 1) -> None:
    """Refuse a KV cache (``copies`` of every row of ``cache``) whose K and V for ``n_positions`` positions of
    each row cannot fit in memory."""
    c, rows = cache.config, cache.batch_size * copies
    what = (f"a {type(cache).__name__} of batch_size={rows} x {n_positions} position(s)" if copies == 1 else
            f"fork's {copies} copies of each of the {cache.batch_size} row(s) of a {type(cache).__name__}")
    fits_in_memory(c.kv_values_per_token * rows * n_positions * cache.dtype.itemsize, cache.device, what)


def cache_window(window, sinks, model_window) -> tuple:
    """A KV cache's ``window`` (None: the model's ``sliding_window``) and ``sinks`` (StreamingLLM's first
    positions kept for good), checked -> (window or None, sinks)."""
    if window is None:
        window = model_window
    else:
        window = integer(window, "window", 1, model_window, allowed=(
            "None (the model's sliding_window) or an integer >= 1" + (
                f" and <= the model's sliding_window={model_window} (it never looks further back)"
                if model_window is not None else "")))
    sinks = integer(sinks, "sinks", 0)
    if sinks and window is None:
        raise ValueError(f"sinks={sinks} needs a window: a cache that keeps every position has nothing to keep "
                         "them from; give window=... (the positions kept, sinks included)")
    if window is not None and sinks >= window:
        raise ValueError(f"sinks must be from 0 to window - 1 = {window - 1} (at least one recent position, the "
                         f"query's own, must fit), got sinks={sinks} with window={window}")
    return window, sinks


def loop_args(model, input_ids, max_new_tokens, use_cache, cache, trace, trace_levels, num_samples, pad_id, eos_id,
              trace_top_k):
    """The rest of generate()'s arguments, checked -> (num_samples, the padding id)."""
    n, c = integer(num_samples, "num_samples", 1), model.config
    rows, positions = input_ids.shape[0] * n, input_ids.shape[1] + integer(max_new_tokens, "max_new_tokens", 1)
    fits_in_memory(rows * (positions * c.kv_values_per_token + 2 * c.vocab_size) * 4,
                   model.device, f"num_samples={n} continuations of {input_ids.shape[0]} prompt(s)")
    flag(use_cache, "use_cache")
    kv_cache(cache)
    if cache is not None and not use_cache:
        raise ValueError("cache= was given with use_cache=False; drop one of them")
    choice(trace, "trace", trace_levels)
    integer(trace_top_k, "trace_top_k", 1)
    pad = eos_id if pad_id is None else token_id(pad_id, "pad_id", model.config.vocab_size)
    return n, pad


def new_tokens_fit(config, prompt_len: int, n_new, name: str = "max_new_tokens") -> int:
    """``n_new`` as an int, or a clear error unless a prompt of ``prompt_len`` tokens and ``n_new`` generated
    tokens fit the model's context window. The last new token is never fed back, so the longest forward pass
    sees prompt_len + n_new - 1 positions."""
    n_new = integer(n_new, name, 1)
    if prompt_len > config.max_seq_len:
        raise ValueError(f"the prompt has {prompt_len} tokens but the model's context window holds "
                         f"max_seq_len={config.max_seq_len}; shorten the prompt")
    room = config.max_seq_len - prompt_len + 1
    if n_new > room:
        raise ValueError(i18n.t("a prompt of {prompt_len} tokens leaves room for at most {room} new token(s) in the "
                                "context window (max_seq_len={max_seq_len}), but {name}={n_new}", prompt_len=prompt_len,
                                room=room, max_seq_len=config.max_seq_len, name=name, n_new=n_new))
    return n_new


def generate_args(model, input_ids, max_new_tokens, temperature=0.0, top_k=None, top_p=None, eos_id=None):
    """Validate generate()'s arguments (clear errors) and return input_ids as a (B, T) tensor on the model's device."""
    c = model.config
    if isinstance(input_ids, (list, tuple)):
        input_ids = prompt_tensor(input_ids).to(model.device)
    if isinstance(input_ids, torch.Tensor) and input_ids.dim() == 1:
        input_ids = input_ids.unsqueeze(0)
    token_tensor(input_ids, c.vocab_size, model.device)
    new_tokens_fit(c, input_ids.shape[1], max_new_tokens)
    sampling(temperature, top_k, top_p)
    if eos_id is not None:
        token_id(eos_id, "eos_id", c.vocab_size)
    return input_ids


def attention_inputs(q, k, v, causal: bool = True, *, name: str = "attention") -> tuple:
    """Queries q (B, H, Tq, D) and keys / values k, v (B, H_kv, Tk, D) that fit together: floating-point
    tensors of one dtype on one device, H a multiple of H_kv (grouped-query attention), and, under a causal
    mask, Tq <= Tk (the queries are the last Tq positions). -> (B, H, H_kv, Tq, Tk, D)."""
    flag(causal, "causal")
    for arg, t in (("q", q), ("k", k), ("v", v)):
        if not isinstance(t, torch.Tensor):
            raise TypeError(f"{name}: {arg} must be a torch.Tensor, got {_describe(t)}")
        if t.dim() != 4:
            raise ValueError(f"{name}: {arg} must have 4 dimensions, (batch, heads, positions, head_dim), "
                             f"got shape {tuple(t.shape)}")
        if not t.dtype.is_floating_point:
            raise ValueError(f"{name}: {arg} must be a floating-point tensor, got dtype {t.dtype}")
        if 0 in t.shape:
            raise ValueError(f"{name}: {arg} is empty (shape {tuple(t.shape)}); every dimension must be >= 1")
    shapes = f"q {tuple(q.shape)}, k {tuple(k.shape)}, v {tuple(v.shape)}"
    if k.shape != v.shape:
        raise ValueError(f"{name}: k and v must have the same shape (B, H_kv, Tk, D), got {shapes}")
    if len({q.dtype, k.dtype, v.dtype}) > 1 or len({q.device, k.device, v.device}) > 1:
        raise ValueError(f"{name}: q, k and v must share one dtype and one device, got {q.dtype}/{q.device}, "
                         f"{k.dtype}/{k.device}, {v.dtype}/{v.device}")
    (B, H, Tq, D), (Bk, H_kv, Tk, Dk) = q.shape, k.shape
    if Bk != B:
        raise ValueError(f"{name}: q and k must have the same batch size (dimension 0), got {shapes}")
    if Dk != D:
        raise ValueError(f"{name}: q and k must have the same head_dim (dimension 3), got {shapes}")
    if H % H_kv:
        raise ValueError(f"{name}: the query heads H={H} must be a multiple of the key/value heads H_kv={H_kv} "
                         f"(each K/V head serves H // H_kv query heads), got {shapes}")
    if causal and Tq > Tk:
        raise ValueError(f"{name}: with causal=True the Tq={Tq} queries are the last Tq of the Tk={Tk} key "
                         f"positions, so Tq must be <= Tk, got {shapes}")
    return B, H, H_kv, Tq, Tk, D

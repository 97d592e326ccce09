"""Argument checks, written once: every public entry point of lib checks its arguments with these, so a wrong
value gets an error that names the argument, says what was given and what is allowed — never a traceback
from deep inside torch, never a silent truncation (2.5 tokens is refused, not rounded).

Where an integer is meant, Python ints, numpy integers and 0-d integer tensors are accepted (a value read
from a tensor or an array is an integer too); bools are refused, and so are floats, even 2.0.
"""
from __future__ import annotations

import math
import numbers

import torch


def _describe(value) -> str:
    return repr(value) if isinstance(value, (int, float, str, type(None), numbers.Number)) \
        else f"{type(value).__name__} {value!r}"


def as_int(value):
    """``value`` as an int when it is an integer (int, numpy integer, 0-d integer tensor), else None."""
    if isinstance(value, torch.Tensor) and value.dim() == 0 and not value.dtype.is_floating_point \
            and value.dtype != torch.bool:
        return int(value)
    if isinstance(value, bool) or not isinstance(value, numbers.Integral):
        return None
    return int(value)


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
           above: float | None = None, allowed: str | None = None) -> float:
    """``value`` as a finite float within the bounds (``above``: strictly greater), or a ValueError."""
    ok = isinstance(value, numbers.Real) and not isinstance(value, bool) and math.isfinite(value)
    if ok:
        v = float(value)
        ok = (minimum is None or v >= minimum) and (maximum is None or v <= maximum) and (above is None or v > above)
    if not ok:
        bounds = _range(minimum if above is None else None, maximum, "a finite number")
        if above is not None:
            bounds = f"a finite number > {above}" + (f" and <= {maximum}" if maximum is not None else "")
        bounds = allowed or bounds
        raise ValueError(f"{name} must be {bounds}, got {_describe(value)}")
    return v


def choice(value, name: str, allowed):
    """``value`` if it is one of ``allowed``, else a ValueError listing them."""
    if not isinstance(value, (str, bool, type(None), int)) or value not in allowed:
        raise ValueError(f"{name}={value!r} is not supported; allowed: {', '.join(map(str, allowed))}")
    return value


def flag(value, name: str) -> bool:
    """True or False, nothing else ("no", 1 and None are refused: they would silently mean something)."""
    if not isinstance(value, bool):
        raise ValueError(f"{name} must be True or False, got {_describe(value)}")
    return value


def token_id(value, name: str, vocab_size: int) -> int:
    """A token id of a model with ``vocab_size`` tokens."""
    v = as_int(value)
    if v is None or not 0 <= v < vocab_size:
        raise ValueError(f"{name}={value!r} is not a token id of this model (an integer from 0 to {vocab_size - 1})")
    return v


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
        bad = next((t for t in row if as_int(t) is None), None)
        if bad is not None:
            raise TypeError(f"token ids are integers; {where} holds {bad!r} ({type(bad).__name__}) "
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
    if input_ids.dtype not in (torch.long, torch.int, torch.int16, torch.int8):
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


def sampling(temperature, top_k=None, top_p=None) -> None:
    """Raise a ValueError that names the setting and what is allowed, when one is out of range."""
    number(temperature, "temperature", 0, allowed="a finite number >= 0 (0 means greedy)")
    if top_k is not None:
        integer(top_k, "top_k", 1, allowed="None (no limit) or an integer >= 1")
    if top_p is not None:
        number(top_p, "top_p", maximum=1, above=0, allowed="None (no limit) or a number in (0, 1]")


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
        raise ValueError(f"a prompt of {prompt_len} tokens leaves room for at most {room} new token(s) in the "
                         f"context window (max_seq_len={config.max_seq_len}), but {name}={n_new}")
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


def cache_dtype_device(dtype, device):
    """A cache's dtype (floating point; None: torch's default) and device (None: CPU), checked."""
    dtype = torch.get_default_dtype() if dtype is None else dtype
    if not isinstance(dtype, torch.dtype) or not dtype.is_floating_point:
        raise ValueError(f"a KV cache needs a floating-point torch dtype (e.g. torch.float32, torch.bfloat16, "
                         f"torch.float16), got {dtype!r}")
    from .device import resolve_device
    return dtype, resolve_device("cpu" if device is None else device)

"""Saving and loading models as safetensors files, and the demo models shipped in ``assets/``.

A checkpoint is one ``.safetensors`` file: the weights (plain tensors, no pickled code, so loading a file
cannot run anything) plus JSON metadata with the ``ModelConfig``, the tokenizer's vocabulary and how the
file was made.
"""
from __future__ import annotations

import functools
import json
from pathlib import Path

import torch
from safetensors import safe_open
from safetensors.torch import save_file

from .config import ModelConfig
from .device import resolve_device, resolve_dtype
from .model import MiniTransformer
from .presets import DEMOS, REAL  # the demo models' names (lib.presets: every model name in one registry)
from .tokenizer import CharTokenizer

ASSETS = Path(__file__).resolve().parent.parent / "assets"



def demo_path(name: str) -> Path:
    if name not in DEMOS:
        raise ValueError(f"unknown demo model {name!r}; available: {', '.join(DEMOS)}")
    return ASSETS / f"{name}.safetensors"


def save_checkpoint(model: MiniTransformer, tokenizer: CharTokenizer, path, dtype=torch.float32, **info) -> Path:
    """Write the model's weights (as ``dtype``: fp32, or fp16 for half the bytes) and metadata to ``path``; tied
    lm_head weights are stored once. ``load_checkpoint`` gives fp32 back whatever was stored."""
    path = Path(path)
    state = {k: v.detach().to(dtype).cpu().contiguous() for k, v in model.state_dict().items()}
    if model.config.tie_embeddings:
        state.pop("lm_head.weight")
    meta = {"config": json.dumps(model.config.to_dict()), "tokenizer": tokenizer.to_json(),
            "info": json.dumps(info, ensure_ascii=False)}
    path.parent.mkdir(parents=True, exist_ok=True)
    save_file(state, str(path), metadata=meta)
    return path


def load_checkpoint(path, device=None, dtype=None):
    """Read a checkpoint written by ``save_checkpoint`` -> (model in eval mode, tokenizer, info dict).

    A missing, truncated or corrupt file, one whose tensors do not fit its config or hold NaN / inf, raises a
    ValueError (FileNotFoundError if it is absent) that names the file and says how to rebuild it."""
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"no checkpoint at {path}")
    rebuild = (f"; rebuild it with `{train_command(path.stem)}`" if path.parent == ASSETS and path.stem in DEMOS
               else "")
    try:
        with safe_open(str(path), framework="pt") as f:
            meta = f.metadata() or {}
            state = {k: f.get_tensor(k) for k in f.keys()}
    except Exception as e:  # safetensors raises its own error types for truncated / garbled headers
        raise ValueError(f"{path} is not a readable safetensors checkpoint (truncated or corrupt?): {e}{rebuild}") from e
    try:
        config = ModelConfig.from_dict(json.loads(meta["config"]))
        tokenizer = CharTokenizer.from_json(meta["tokenizer"])
        info = json.loads(meta.get("info", "{}"))
    except (KeyError, ValueError, TypeError) as e:
        raise ValueError(f"{path} has no usable KV Cache Lab metadata (config / tokenizer): {e}{rebuild}") from e
    if tokenizer.vocab_size != config.vocab_size:
        raise ValueError(f"{path}: the tokenizer has {tokenizer.vocab_size} tokens but the config says "
                         f"vocab_size={config.vocab_size}{rebuild}")
    model = MiniTransformer(config)
    expected = model.state_dict()
    if config.tie_embeddings:
        expected = {k: v for k, v in expected.items() if k != "lm_head.weight"}
    missing = sorted(set(expected) - set(state))
    unexpected = sorted(set(state) - set(expected))
    wrong = sorted(k for k in set(expected) & set(state) if expected[k].shape != state[k].shape)
    if missing or unexpected or wrong:
        raise ValueError(f"{path} does not match its config: missing {missing}, unexpected {unexpected}, "
                         f"wrong shape {wrong}{rebuild}")
    not_finite = sorted(k for k, t in state.items() if t.is_floating_point() and not bool(torch.isfinite(t).all()))
    if not_finite:  # they would turn every logit into NaN, and generation into silent nonsense
        raise ValueError(f"{path} holds NaN or inf in {', '.join(not_finite[:5])}"
                         f"{f' and {len(not_finite) - 5} more' if len(not_finite) > 5 else ''}: its weights are "
                         f"not usable (a training run that diverged?){rebuild}")
    model.load_state_dict(state, strict=False)  # lm_head.weight comes from the tie
    if dtype is not None:
        model = model.to(resolve_dtype(dtype))
    if device is not None:
        model = model.to(resolve_device(device))
    model.eval()
    return model, tokenizer, info


def train_command(name: str) -> str:
    """The command that rebuilds a shipped model's weights (a toy in seconds, the real model in about 85 minutes)."""
    return f"make train MODEL={name}" if name in REAL else f"python -m lib.train {name}"


def load_demo(name: str = "chat", device=None, dtype=None):
    """A shipped model -> (model, tokenizer). ``name``: a toy ("chat", "draft", "tiny", "chat-gqa") or the real
    small language model ("lm") and its draft ("lm-draft"); see ``DEMOS``."""
    path = demo_path(name)
    if not path.is_file():
        raise FileNotFoundError(f"the demo weights {path} are missing; rebuild them with `{train_command(name)}`")
    model, tokenizer, _ = load_checkpoint(path, device=device, dtype=dtype)
    return model, tokenizer


@functools.lru_cache(maxsize=None)
def demo_config(name: str) -> ModelConfig:
    """The ``ModelConfig`` a shipped demo model's file carries, read from its metadata only (no weights loaded),
    once. ``lib.presets.DEMO_CONFIGS`` holds the same shapes as data, for naming a model without opening a file."""
    path = demo_path(name)
    if not path.is_file():
        raise FileNotFoundError(f"the demo weights {path} are missing; rebuild them with `{train_command(name)}`")
    with safe_open(str(path), framework="pt") as f:
        return ModelConfig.from_dict(json.loads((f.metadata() or {})["config"]))


def demo_info(name: str) -> dict:
    """How a demo model was trained (steps, final loss, seed, command), from its file's metadata."""
    return load_checkpoint(demo_path(name))[2]

"""Real checkpoints: convert a Hugging Face ``transformers`` causal LM into a ``lib.MiniTransformer``.

    model = from_hf("/path/to/checkpoint")          # a local folder: config.json + *.safetensors
    model = from_hf(hf_model)                       # or a model already in memory
    tok = load_tokenizer("/path/to/checkpoint")     # its own tokenizer, with the interface lib's widgets use
    out = lib.generate(model, tok.encode("The KV cache"), 20, eos_id=tok.eos_id, trace=True)

Supported (the families whose layers ``MiniTransformer`` can hold exactly):

=====================  ======================================================================================
``GPT2LMHeadModel``    LayerNorm, learned positions, GELU (``gelu_new`` is the tanh approximation: lib's
                       ``"gelu_tanh"``), q/k/v packed in one ``Conv1D`` (weights stored transposed: ``x @ W``),
                       lm_head tied to the token embedding
``LlamaForCausalLM``   RMSNorm, RoPE ("rotate half" layout, as lib), SwiGLU FFN, grouped-query attention,
``MistralForCausalLM`` no biases (Llama's optional ``attention_bias`` / ``mlp_bias`` are held too),
``Qwen2ForCausalLM``   Qwen2: biases on q/k/v only (``ModelConfig(bias=False, qkv_bias=True)``)
=====================  ======================================================================================

Every weight is copied; the converted model gives the same logits, the same greedy tokens and the same keys
and values in its cache as the original (``tests/test_hf.py`` checks all three, family by family).
Anything lib cannot reproduce is refused with an error that names it: other architectures, RoPE scaling
types other than plain RoPE, partial rotary dimensions, sliding-window attention beyond the context asked
for, activations lib does not have, parameters lib has no place for.

Strictly offline: a path must be a local folder, read with ``local_files_only=True``; nothing is ever
downloaded, and only safetensors weights are read (never pickled ``.bin`` files, which can run code).
``transformers`` is an optional extra (``pip install -e ".[hf]"``); ``import lib`` works without it.
"""
from __future__ import annotations

from pathlib import Path

import torch

from . import checks
from .config import ModelConfig
from .device import resolve_device, resolve_dtype
from .i18n import t
from .model import MiniTransformer

SUPPORTED = ("GPT2LMHeadModel", "LlamaForCausalLM", "MistralForCausalLM", "Qwen2ForCausalLM")
FAMILY = {"GPT2LMHeadModel": "gpt2", "LlamaForCausalLM": "llama", "MistralForCausalLM": "llama",
          "Qwen2ForCausalLM": "llama"}
MODEL_TYPES = {"gpt2": "GPT2LMHeadModel", "llama": "LlamaForCausalLM", "mistral": "MistralForCausalLM",
               "qwen2": "Qwen2ForCausalLM"}
# transformers' activation names -> lib's (GPT-2 style, one up-projection)
GPT2_ACTIVATIONS = {"gelu": "gelu", "gelu_new": "gelu_tanh", "gelu_pytorch_tanh": "gelu_tanh", "silu": "silu",
                    "swish": "silu"}
INSTALL_COMMAND, INSTALL_PLAIN = 'pip install -e ".[hf]"', "pip install transformers"
INSTALL_HINT = f"{INSTALL_COMMAND}  (or: {INSTALL_PLAIN})"


class UnsupportedModelError(ValueError):
    """A Hugging Face model (or one of its settings) that MiniTransformer cannot reproduce exactly."""


def require_transformers():
    """The ``transformers`` module, or an ImportError that says how to install it."""
    try:
        import transformers
    except ImportError as e:
        raise ImportError(f"lib.hf needs the optional `transformers` package, which is not installed here. "
                          f"Install it with: {INSTALL_HINT}") from e
    return transformers


# ------------------------------------------------------------------------------------------- the shape

def _get(cfg, name, default=None):
    return getattr(cfg, name, default)


def _rope_theta(cfg, arch: str) -> float:
    """Plain RoPE's base from ``config.rope_parameters`` (transformers 5) or ``config.rope_theta`` (4.x)."""
    params = _get(cfg, "rope_parameters") or {}
    if not isinstance(params, dict):
        params = dict(params)
    if "full_attention" in params and isinstance(params["full_attention"], dict):  # per layer-type form
        params = params["full_attention"]
    legacy = _get(cfg, "rope_scaling")
    kind = params.get("rope_type", params.get("type", "default"))
    if legacy and isinstance(legacy, dict) and legacy.get("rope_type", legacy.get("type", "default")) != "default":
        kind = legacy.get("rope_type", legacy.get("type"))
    if kind != "default":
        raise UnsupportedModelError(
            f"{arch} uses RoPE scaling of type {kind!r} (config.rope_parameters = {params}); lib implements "
            f"plain RoPE only (rope_type 'default'), so positions would be rotated differently")
    factor = params.get("partial_rotary_factor", _get(cfg, "partial_rotary_factor", 1.0))
    if factor not in (None, 1, 1.0):
        raise UnsupportedModelError(f"{arch} rotates only part of each head (partial_rotary_factor={factor}); "
                                    f"lib rotates the whole head_dim")
    theta = params.get("rope_theta", _get(cfg, "rope_theta"))
    if theta is None:
        raise UnsupportedModelError(f"{arch}'s config has no rope_theta (looked in config.rope_parameters and "
                                    f"config.rope_theta)")
    return float(theta)


def _context(cfg, arch: str, n_positions: int, max_seq_len) -> int:
    """lib's max_seq_len: the model's own context window, or a shorter one the caller asks for."""
    if max_seq_len is None:
        max_seq_len = n_positions
    else:
        max_seq_len = checks.integer(max_seq_len, "max_seq_len", 1, n_positions, allowed=(
            f"an integer from 1 to the model's context window ({n_positions} positions)"))
    window = _get(cfg, "sliding_window")
    types = _get(cfg, "layer_types")
    slides = window is not None and (types is None or "sliding_attention" in types)
    if slides and max_seq_len > window:
        raise UnsupportedModelError(
            f"{arch} uses sliding-window attention (each token sees only the last {window} positions) and lib "
            f"attends to the whole context, which differs once a sequence is longer than the window. "
            f"Pass max_seq_len={window} (or less) to from_hf: within the window both are identical")
    return max_seq_len


def config_from_hf(hf_config, arch: str | None = None, max_seq_len: int | None = None,
                   attn_impl: str = "manual") -> ModelConfig:
    """The ``ModelConfig`` that holds a Hugging Face config's model exactly, or an ``UnsupportedModelError``
    naming what lib lacks. ``arch``: the class name (default: ``config.architectures[0]`` or the model type);
    ``attn_impl``: lib's attention, "manual" (written out, weights visible) or "sdpa" (fused fast path)."""
    if arch is None:
        archs = _get(hf_config, "architectures") or []
        arch = archs[0] if archs else MODEL_TYPES.get(_get(hf_config, "model_type"), _get(hf_config, "model_type"))
    if arch is None:
        raise UnsupportedModelError(f"hf_config names no architecture (config.architectures) and no model_type: "
                                    f"give a transformers config of a {', '.join(SUPPORTED)}, got "
                                    f"{type(hf_config).__name__}")
    if arch not in SUPPORTED:
        raise UnsupportedModelError(f"{arch!r} is not supported; from_hf converts {', '.join(SUPPORTED)} "
                                    f"(model_type {_get(hf_config, 'model_type')!r})")
    try:
        return _shape(hf_config, arch, max_seq_len, attn_impl)
    except AttributeError as e:  # a config object without a field every config of this family has
        raise UnsupportedModelError(f"hf_config lacks the field {e.name!r} that every {arch} config has; give the "
                                    f"model's own config (transformers.AutoConfig.from_pretrained)") from None


def _shape(c, arch: str, max_seq_len, attn_impl) -> ModelConfig:
    """The ModelConfig of a config ``c`` of the supported class ``arch``."""
    if FAMILY[arch] == "gpt2":
        act = c.activation_function
        if act not in GPT2_ACTIVATIONS:
            raise UnsupportedModelError(f"{arch} with activation_function={act!r} is not supported; lib has "
                                        f"{', '.join(sorted(GPT2_ACTIVATIONS))}")
        for flag, want in (("scale_attn_weights", True), ("scale_attn_by_inverse_layer_idx", False),
                           ("add_cross_attention", False)):
            if bool(_get(c, flag, want)) != want:
                raise UnsupportedModelError(f"{arch} with {flag}={_get(c, flag)} is not supported; lib's "
                                            f"attention needs {flag}={want}")
        return ModelConfig(
            vocab_size=c.vocab_size, n_layers=c.n_layer, d_model=c.n_embd, n_heads=c.n_head,
            d_ff=c.n_inner or 4 * c.n_embd, max_seq_len=_context(c, arch, c.n_positions, max_seq_len),
            norm="layernorm", activation=GPT2_ACTIVATIONS[act], positions="learned",
            norm_eps=c.layer_norm_epsilon, bias=True, tie_embeddings=bool(c.tie_word_embeddings),
            attn_impl=attn_impl)
    # the Llama family: Llama, Mistral, Qwen2
    if c.hidden_act not in ("silu", "swish"):
        raise UnsupportedModelError(f"{arch} with hidden_act={c.hidden_act!r} is not supported; lib's gated FFN "
                                    f"is SwiGLU (hidden_act 'silu')")
    qkv_bias = arch == "Qwen2ForCausalLM" or bool(_get(c, "attention_bias", False))
    bias = bool(_get(c, "attention_bias", False)) or bool(_get(c, "mlp_bias", False))
    head_dim = _get(c, "head_dim") or c.hidden_size // c.num_attention_heads  # Qwen2: may be None
    return ModelConfig(
        vocab_size=c.vocab_size, n_layers=c.num_hidden_layers, d_model=c.hidden_size,
        n_heads=c.num_attention_heads, n_kv_heads=c.num_key_value_heads or c.num_attention_heads,
        d_ff=c.intermediate_size, head_dim=head_dim,
        max_seq_len=_context(c, arch, c.max_position_embeddings, max_seq_len),
        norm="rmsnorm", activation="swiglu", positions="rope", rope_theta=_rope_theta(c, arch),
        norm_eps=c.rms_norm_eps, bias=bias, qkv_bias=qkv_bias, tie_embeddings=bool(c.tie_word_embeddings),
        attn_impl=attn_impl)


# ------------------------------------------------------------------------------------------ the weights

def _gpt2_weights(p: dict, config: ModelConfig) -> dict:
    """lib name -> tensor for GPT-2. Conv1D computes x @ W + b with W of shape (in, out): nn.Linear keeps
    (out, in), so every Conv1D weight is transposed; c_attn packs q, k and v side by side."""
    d = config.d_model
    out = {"tok_emb.weight": p.pop("transformer.wte.weight"),
           "pos_emb.weight": p.pop("transformer.wpe.weight")[:config.max_seq_len],
           "norm_f.weight": p.pop("transformer.ln_f.weight"), "norm_f.bias": p.pop("transformer.ln_f.bias")}
    for i in range(config.n_layers):
        h, b = f"transformer.h.{i}.", f"blocks.{i}."
        qkv_w = p.pop(h + "attn.c_attn.weight").t()  # (3d, d) after the transpose
        qkv_b = p.pop(h + "attn.c_attn.bias")  # (3d,)
        for j, name in enumerate(("q_proj", "k_proj", "v_proj")):
            out[b + f"attn.{name}.weight"] = qkv_w[j * d:(j + 1) * d]
            out[b + f"attn.{name}.bias"] = qkv_b[j * d:(j + 1) * d]
        out[b + "attn.o_proj.weight"] = p.pop(h + "attn.c_proj.weight").t()
        out[b + "attn.o_proj.bias"] = p.pop(h + "attn.c_proj.bias")
        out[b + "mlp.up_proj.weight"] = p.pop(h + "mlp.c_fc.weight").t()
        out[b + "mlp.up_proj.bias"] = p.pop(h + "mlp.c_fc.bias")
        out[b + "mlp.down_proj.weight"] = p.pop(h + "mlp.c_proj.weight").t()
        out[b + "mlp.down_proj.bias"] = p.pop(h + "mlp.c_proj.bias")
        for hf_norm, lib_norm in (("ln_1", "norm1"), ("ln_2", "norm2")):
            out[b + f"{lib_norm}.weight"] = p.pop(h + f"{hf_norm}.weight")
            out[b + f"{lib_norm}.bias"] = p.pop(h + f"{hf_norm}.bias")
    lm = p.pop("lm_head.weight", None)
    out["lm_head.weight"] = out["tok_emb.weight"] if config.tie_embeddings or lm is None else lm
    return out


def _llama_weights(p: dict, config: ModelConfig) -> dict:
    """lib name -> tensor for Llama / Mistral / Qwen2: the same layout as lib, other names."""
    out = {"tok_emb.weight": p.pop("model.embed_tokens.weight"), "norm_f.weight": p.pop("model.norm.weight")}
    for i in range(config.n_layers):
        h, b = f"model.layers.{i}.", f"blocks.{i}."
        for name in ("q_proj", "k_proj", "v_proj", "o_proj"):
            for kind in ("weight", "bias"):
                if h + f"self_attn.{name}.{kind}" in p:
                    out[b + f"attn.{name}.{kind}"] = p.pop(h + f"self_attn.{name}.{kind}")
        for name in ("gate_proj", "up_proj", "down_proj"):
            for kind in ("weight", "bias"):
                if h + f"mlp.{name}.{kind}" in p:
                    out[b + f"mlp.{name}.{kind}"] = p.pop(h + f"mlp.{name}.{kind}")
        out[b + "norm1.weight"] = p.pop(h + "input_layernorm.weight")
        out[b + "norm2.weight"] = p.pop(h + "post_attention_layernorm.weight")
    lm = p.pop("lm_head.weight", None)
    out["lm_head.weight"] = out["tok_emb.weight"] if config.tie_embeddings or lm is None else lm
    return out


def _arch_of(hf_model) -> str:
    arch = type(hf_model).__name__
    if arch not in SUPPORTED:
        raise UnsupportedModelError(f"{arch} is not supported; from_hf converts {', '.join(SUPPORTED)}")
    return arch


@torch.no_grad()
def _convert(hf_model, max_seq_len, dtype, device, attn_impl) -> MiniTransformer:
    arch = _arch_of(hf_model)
    config = config_from_hf(hf_model.config, arch, max_seq_len, attn_impl)
    params = {n: t.detach() for n, t in hf_model.named_parameters(remove_duplicate=False)}
    try:
        mapped = (_gpt2_weights if FAMILY[arch] == "gpt2" else _llama_weights)(params, config)
    except KeyError as e:
        raise UnsupportedModelError(f"{arch} has no parameter {e.args[0]!r}, which from_hf expects; is it a "
                                    f"standard {arch}?") from None
    if params:
        raise UnsupportedModelError(f"{arch} has parameters lib has no place for: {', '.join(sorted(params))}")
    weight_dtype = mapped["tok_emb.weight"].dtype
    with torch.device("meta"):  # shapes only: skip the random init, every tensor is overwritten below
        model = MiniTransformer(config)
    model = model.to_empty(device="cpu").to(dtype=weight_dtype if dtype is None else resolve_dtype(dtype))
    if config.tie_embeddings:
        model.lm_head.weight = model.tok_emb.weight  # to_empty made two tensors of the tied pair
    state = model.state_dict()
    for name, target in state.items():
        if name not in mapped:
            # a bias lib's layout has and this model lacks (Llama with attention_bias but no mlp_bias): zero,
            # which is exactly "no bias"; anything else missing is a conversion bug
            if not name.endswith(".bias"):
                raise UnsupportedModelError(f"from_hf found nothing for lib's {name} in {arch}")
            target.zero_()
            continue
        src = mapped[name]
        if tuple(src.shape) != tuple(target.shape):
            raise UnsupportedModelError(f"{arch}: shape {tuple(src.shape)} does not fit lib's {name} "
                                        f"{tuple(target.shape)}; the config and the weights disagree")
        target.copy_(src)  # a copy: the lib model shares no memory with the original
    if device is not None:
        model = model.to(resolve_device(device))
    return model.eval()


# ------------------------------------------------------------------------------------------- the API

def _local_folder(path) -> Path:
    folder = Path(path).expanduser()
    if not folder.is_dir():
        raise FileNotFoundError(
            f"{str(path)!r} is not a local folder. from_hf never downloads: give the folder of a checkpoint "
            f"(config.json + *.safetensors), e.g. one saved with model.save_pretrained(folder) or downloaded "
            f"beforehand on a machine with network (`hf download gpt2 --local-dir ./gpt2`)")
    if not (folder / "config.json").is_file():
        raise FileNotFoundError(f"{folder} has no config.json; a checkpoint folder holds config.json and "
                                f"*.safetensors weights")
    return folder


def _load_folder(folder: Path, max_seq_len, dtype):
    transformers = require_transformers()
    hf_config = transformers.AutoConfig.from_pretrained(folder, local_files_only=True)
    archs = _get(hf_config, "architectures") or []
    arch = next((a for a in archs if a in SUPPORTED), None) or MODEL_TYPES.get(_get(hf_config, "model_type"))
    if arch is None:
        raise UnsupportedModelError(f"{folder}/config.json describes {archs or _get(hf_config, 'model_type')!r}; "
                                    f"from_hf converts {', '.join(SUPPORTED)}")
    config_from_hf(hf_config, arch, max_seq_len)  # refuse early, before reading gigabytes of weights
    if not any(folder.glob("*.safetensors")):
        raise FileNotFoundError(f"{folder} has no *.safetensors weights; from_hf reads only safetensors "
                                f"(never pickled .bin files, which can run code when loaded)")
    cls = getattr(transformers, arch)
    kw = {} if dtype is None else {"dtype": resolve_dtype(dtype)}
    logging = transformers.utils.logging
    bar_was_on = logging.is_progress_bar_enabled()
    logging.disable_progress_bar()  # no "Loading weights" bar in notebook outputs
    try:
        return cls.from_pretrained(folder, local_files_only=True, use_safetensors=True, **kw)
    except Exception as e:  # safetensors' and transformers' own errors name neither the folder nor the file
        files = ", ".join(sorted(f.name for f in folder.glob("*.safetensors")))
        raise ValueError(f"{folder}: the weights ({files}) could not be read (truncated or corrupt?): "
                         f"{type(e).__name__}: {e}") from e
    finally:
        if bar_was_on:
            logging.enable_progress_bar()


def from_hf(model_or_path, max_seq_len: int | None = None, dtype=None, device=None,
            attn_impl: str = "manual") -> MiniTransformer:
    """A ``MiniTransformer`` (eval mode) that behaves exactly like a Hugging Face causal LM.

    ``model_or_path``: a ``transformers`` model in memory (``GPT2LMHeadModel``, ``LlamaForCausalLM``,
    ``MistralForCausalLM``, ``Qwen2ForCausalLM``) or the path of a local checkpoint folder (config.json +
    safetensors; read offline). ``max_seq_len``: lib's context window (default: the model's own; shorter
    saves the learned-position table and is needed past a sliding window). ``dtype`` (default: the
    checkpoint's) and ``device`` (default: the CPU / where the model is) of the result. ``attn_impl``:
    "manual" (attention written out, its weights visible to traces) or "sdpa" (lib's fused fast path, used
    when no trace is recorded)."""
    from .config import ATTN_IMPLS
    if attn_impl not in ATTN_IMPLS:
        raise ValueError(f"attn_impl={attn_impl!r} is not supported; allowed: {', '.join(ATTN_IMPLS)}")
    if isinstance(model_or_path, (str, Path)):
        hf_model = _load_folder(_local_folder(model_or_path), max_seq_len, dtype)
    elif isinstance(model_or_path, torch.nn.Module):
        hf_model = model_or_path
    else:
        raise TypeError(f"from_hf takes a transformers model or the path of a local checkpoint folder, "
                        f"got {type(model_or_path).__name__}")
    if device is None and isinstance(model_or_path, torch.nn.Module):
        device = next(hf_model.parameters()).device
    return _convert(hf_model, max_seq_len, dtype, device, attn_impl)


# -------------------------------------------------------------------------------------- the tokenizer

class HFTokenizer:
    """A Hugging Face tokenizer behind the interface lib's widgets use (the same as ``CharTokenizer``):
    ``encode(text)`` -> list of ids, ``decode(ids)``, ``tokens(ids)`` (one readable string per token),
    ``bos_id``, ``eos_id``, ``pad_id``, ``vocab_size`` (every token, added ones included), ``base_vocab_size``."""

    def __init__(self, hf_tokenizer):
        self.hf = hf_tokenizer
        self.bos_id = hf_tokenizer.bos_token_id
        self.eos_id = hf_tokenizer.eos_token_id
        self.pad_id = hf_tokenizer.pad_token_id if hf_tokenizer.pad_token_id is not None else self.eos_id
        self.vocab_size = len(hf_tokenizer)
        # the tokens a model's rows must cover; len() also counts added special tokens (a model's embedding may
        # be padded past either: Qwen2.5 has 151,936 rows for 151,665 tokens)
        self.base_vocab_size = hf_tokenizer.vocab_size

    def encode(self, text: str) -> list[int]:
        """Text -> ids, with the special tokens the model expects (Llama's BOS; GPT-2 adds none)."""
        if not isinstance(text, str):
            raise TypeError(f"encode takes a str, got {type(text).__name__}")
        return list(self.hf.encode(text))

    def decode(self, ids, skip_special: bool = False) -> str:
        if hasattr(ids, "tolist"):
            ids = ids.tolist()
        return self.hf.decode(list(ids), skip_special_tokens=skip_special)

    def tokens(self, ids) -> list[str]:
        """Each id decoded on its own (a space shows as a space, not as GPT-2's 'Ġ')."""
        if hasattr(ids, "tolist"):
            ids = ids.tolist()
        return [self.hf.decode([i]) for i in ids]

    def __len__(self):
        return self.vocab_size

    def __repr__(self):
        return f"HFTokenizer({type(self.hf).__name__}, vocab_size={self.vocab_size})"


TOKENIZER_FILES = ("tokenizer.json", "tokenizer_config.json", "vocab.json", "tokenizer.model", "spiece.model",
                   "vocab.txt")


def load_tokenizer(path) -> HFTokenizer:
    """The tokenizer saved in a local checkpoint folder (``AutoTokenizer``, offline), wrapped for lib."""
    folder = _local_folder(path)
    transformers = require_transformers()
    where = f"no usable tokenizer in {folder} (one of {', '.join(TOKENIZER_FILES)})"
    if not any((folder / f).is_file() for f in TOKENIZER_FILES):
        raise FileNotFoundError(f"{where}: the folder holds none of these files; save the tokenizer next to "
                                f"the weights (tokenizer.save_pretrained(folder))")
    try:
        tok = transformers.AutoTokenizer.from_pretrained(folder, local_files_only=True)
    except (OSError, ValueError) as e:
        raise FileNotFoundError(f"{where}: {e}") from e
    if len(tok) < 2:
        raise FileNotFoundError(f"{where}: the tokenizer read from it has {len(tok)} token(s)")
    return HFTokenizer(tok)


def load_hf(path, max_seq_len: int | None = None, dtype=None, device=None):
    """``(from_hf(path, ...), load_tokenizer(path))`` for a local checkpoint folder."""
    return from_hf(path, max_seq_len, dtype, device), load_tokenizer(path)


# ------------------------------------------------------------------------- bring your own model (notebooks)

ENV_VAR = "KVLAB_HF_MODEL"
_HOW_TO_LINES = ("No model of your own is loaded: the environment variable {var} is not set.",
                 "To watch a real model's KV cache here:",
                 "  1. install the optional extra:  {command}  (or: {plain})",
                 "  2. put a checkpoint folder on disk (config.json + *.safetensors + tokenizer files) of a",
                 "     {kinds}, e.g. gpt2 or Qwen/Qwen2.5-0.5B;",
                 "  3. start JupyterLab with  {var}=/path/to/that/folder  and run this notebook again.")
_HOW_TO_FIELDS = dict(var=ENV_VAR, command=INSTALL_COMMAND, plain=INSTALL_PLAIN, kinds=", ".join(SUPPORTED))
HOW_TO = "\n".join(line.format(**_HOW_TO_FIELDS) for line in _HOW_TO_LINES)  # in English


def how_to() -> str:
    """``HOW_TO`` in the notebook's language (``lib.i18n.t``, line by line)."""
    return "\n".join(t(line, **_HOW_TO_FIELDS) for line in _HOW_TO_LINES)


def load_from_env(environ=None, max_seq_len: int | None = None, dtype=torch.float32, device=None):
    """``(model, tokenizer)`` from the checkpoint folder named by ``$KVLAB_HF_MODEL``, or None.

    Always prints one message, in the notebook's language: how to bring a model (variable unset: ``how_to()``),
    how to install ``transformers`` (missing), why the folder could not be used, or what was loaded. It never
    raises for those cases, so a notebook cell that calls it runs everywhere. ``environ``: a mapping to read
    instead of ``os.environ`` (tests); ``dtype``: fp32 by default, the dtype lib's CPU runs are checked in."""
    import os

    path = (os.environ if environ is None else environ).get(ENV_VAR, "").strip()
    if not path:
        print(how_to())
        return None
    try:
        require_transformers()
        model, tok = load_hf(path, max_seq_len, dtype, device)
    except ImportError as e:
        print(t("{var}={path} is set, but {error}", var=ENV_VAR, path=path, error=e))
        return None
    except Exception as e:  # a notebook cell that calls this must run everywhere: say why, never raise
        print(t("{var}={path} could not be loaded: {error}", var=ENV_VAR, path=path, error=e))
        return None
    c = model.config
    print(t("loaded {path}: {layers} layers, d_model {d_model}, {heads} heads ({kind}, {kv_heads} KV heads), "
            "{params:,} parameters, {dtype}, {tokenizer}", path=path, layers=c.n_layers, d_model=c.d_model,
            heads=c.n_heads, kind=c.attention_kind, kv_heads=c.n_kv_heads, params=model.num_parameters(),
            dtype=model.dtype, tokenizer=repr(tok)))
    return model, tok


# --------------------------------------------------------------------- transformers' cache classes beside lib's

TRANSFORMERS_CHECKED = "5.24.0"  # the release whose transformers/cache_utils.py the names below were read in
CACHE_CLASSES = (  # (transformers' class, how it keeps K and V, lib's counterpart, the notebook that builds it)
    ("DynamicCache", "grows by torch.cat each step", "ConcatKVCache", "03"),
    ("StaticCache", "preallocated to max_cache_len", "KVCache", "03"),
    ("StaticCache, sliding layers", "a ring of window slots", "KVCache(window=W)", "12"),
    ("QuantizedCache", "old tokens quantized", "QuantizedKVCache", "05"),
    ("(vLLM) paged pool", "blocks through a block table", "PagedKVCache", "09"),
)


def cache_class_rows(model, input_ids, max_new_tokens: int, window: int = 64, block_size: int = 16) -> list[dict]:
    """``CACHE_CLASSES`` as table rows, each with what lib's counterpart holds after generating ``max_new_tokens``
    greedy tokens after ``input_ids`` with ``model`` (one sequence, room for ``max_seq_len`` positions): the bytes
    its tensors hold (``nbytes``) and the bytes that hold tokens (``used_bytes``; a ``torch.cat`` cache holds only
    those). transformers 5 has no ``SlidingWindowCache`` class (an alias of ``StaticCache``): a model whose config
    has a sliding window gets sliding layers in either cache; ``QuantizedCache`` grows like ``DynamicCache``, lib's
    ``QuantizedKVCache`` is preallocated."""
    from .concat import ConcatKVCache  # the caches sit on the engine's floor; hf is a wing above it
    from .generate import generate
    from .paged import PagedKVCache
    from .quant import QuantizedKVCache
    from .cache import KVCache

    c = model.config
    n = c.max_seq_len
    caches = (ConcatKVCache(c, 1, n), KVCache(c, 1, n), KVCache(c, 1, n, window=window), QuantizedKVCache(c, 1, n),
              PagedKVCache(c, 1, n, block_size=block_size))
    rows = []
    for (hf_name, keeps, lib_name, notebook), cache in zip(CACHE_CLASSES, caches):
        generate(model, input_ids, max_new_tokens, cache=cache)
        held = cache.nbytes
        rows.append({"transformers": hf_name, "keeps K and V": keeps, "lib": lib_name.replace("W", str(window)),
                     "notebook": notebook, "positions": cache.seq_len, "bytes held": held,
                     "bytes of tokens": getattr(cache, "used_bytes", held)})
    return rows

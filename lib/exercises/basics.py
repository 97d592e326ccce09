"""Build-it exercises of notebooks 01-04: attention for one head, the greedy loop, appending a rotated key to a
preallocated cache, and one attention row of the worked case.

Every hidden case comes from lib's own forward pass: the tensors a ``ForwardRecord`` captured, the tokens
``lib.generate`` chose, the rows a ``KVCache`` holds after a real step of a RoPE model.
"""
from __future__ import annotations

import math

import torch

from ..cache import KVCache
from ..config import ModelConfig
from ..demo import load_demo
from ..generate import generate
from ..measure import random_model
from ..model import ForwardRecord, apply_rope, rope_tables
from ..i18n import t
from . import Case, exercise


# ------------------------------------------------------------------ 01: causal attention, one head at a time

def causal_attention_solution(q, k, v):
    """q, k, v: (H, T, hd) -> (H, T, hd): softmax(q·kᵀ/√hd with the future masked) · v."""
    T, hd = q.shape[-2], q.shape[-1]
    scores = q @ k.transpose(-2, -1) / math.sqrt(hd)                       # (H, T, T)
    future = torch.ones(T, T, dtype=torch.bool, device=q.device).triu(diagonal=1)  # True above the diagonal
    weights = torch.softmax(scores.masked_fill(future, float("-inf")), dim=-1)
    return weights @ v                                                     # (H, T, hd)


def _captured_attention(model, ids, layer):
    """q, k, v of one layer (H, T, hd) and the weighted sum the model computed from them (before o_proj)."""
    rec = ForwardRecord(capture=True)
    with torch.no_grad():
        model(torch.tensor([ids], device=model.device), record=rec)
    t = rec.tensors[layer]
    H, hd = model.config.n_heads, model.config.head_dim
    mix = t["mix"][0].view(len(ids), H, hd).transpose(0, 1)                 # (H, T, hd)
    return (t["q"][0].float().cpu(), t["k"][0].float().cpu(), t["v"][0].float().cpu()), mix.float().cpu()


@exercise("causal_attention", title="Causal attention for every head",
          hints=("Which keys may the query at position i see, and what must happen to a score before softmax so "
                 "that the other keys get weight 0?",
                 "The scores are q @ kᵀ times 1/√hd; the mask is a triangle (torch.triu), and masked_fill puts "
                 "-inf where a query must not look.",
                 "scores = q @ kᵀ / √hd (hd = q.shape[-1]); set the entries above the diagonal to -inf (a query "
                 "sees its own key and earlier ones); softmax over the last dimension; multiply by v."),
          solution=causal_attention_solution)
def _causal_attention_cases():
    model, tok = load_demo("chat")
    for prompt, layer in (("<s>人工智", 0), ("<s>深度学习", 2), ("<s>", 1)):
        args, expected = _captured_attention(model, tok.encode(prompt), layer)
        yield Case(t("the chat model's layer {layer} on {prompt}: q, k, v of shape {shape}", layer=layer,
                     prompt=repr(prompt), shape=tuple(args[0].shape)), args=args, expected=expected)


# ------------------------------------------------------------------ 02: the greedy loop

def greedy_loop_solution(model, ids, max_new_tokens, eos_id):
    """Greedy generation without a cache: the whole sequence goes in at every step."""
    ids = list(ids)
    for _ in range(max_new_tokens):
        logits = model(torch.tensor([ids], device=model.device))          # (1, T, vocab)
        next_id = int(logits[0, -1].argmax())                              # the last position predicts the next
        ids.append(next_id)
        if next_id == eos_id:
            break
    return ids


@exercise("greedy_loop", title="The greedy generation loop",
          hints=("Which position's logits predict the next token, and when should the loop stop before "
                 "max_new_tokens?",
                 "model(torch.tensor([ids])) gives logits (1, T, vocab): the last row, [0, -1], is the next "
                 "token's, and its argmax is the greedy choice. eos_id ends the loop right after it is appended.",
                 "repeat max_new_tokens times: run the model on the whole list so far, take the argmax of the LAST "
                 "position's logits, append it; stop right after appending eos_id (eos_id may be None: then never "
                 "stop early). Return prompt + new tokens as a list of ints."),
          solution=greedy_loop_solution)
def _greedy_loop_cases():
    model, tok = load_demo("chat")
    for prompt, n, eos in (("<s>", 10, tok.eos_id), ("<s>深", 10, tok.eos_id), ("<s>kv", 6, tok.eos_id),
                           ("<s>", 8, None)):
        ids = tok.encode(prompt)
        want = generate(model, ids, n, eos_id=eos).sequences[0].tolist()
        stop = t("an end token") if eos is not None else t("no end token (eos_id=None)")
        yield Case(t("prompt {prompt}, max_new_tokens={n}, {stop}", prompt=repr(prompt), n=n, stop=stop),
                   args=(model, ids, n, eos), expected=want)


# ------------------------------------------------------------------ 03: append a rotated key to a cache

def _rope_config(**changes) -> ModelConfig:
    """The small RoPE model of the cases: 2 layers, d_model 32, 4 query heads sharing 2 KV heads."""
    shape = dict(vocab_size=131, n_layers=2, d_model=32, n_heads=4, n_kv_heads=2, positions="rope",
                 max_seq_len=64)
    return ModelConfig(**{**shape, **changes})


def append_key_solution(cache_k, seq_len, k_new, theta):
    """Rotate the new key (n_kv_heads, hd) to position seq_len and write it there, in place."""
    positions = torch.tensor([[seq_len]], device=k_new.device)             # (1, 1): where the new token sits
    cos, sin = rope_tables(k_new.shape[-1], positions, theta)              # (1, 1, 1, hd) each
    cache_k[:, seq_len] = apply_rope(k_new[None, :, None, :], cos, sin)[0, :, 0]
    return cache_k


def _key_step(model, ids, max_len):
    """Feed ids[:-1] with a KVCache, then the last token: (layer 0's preallocated K buffer before the step,
    the new token's key before rotation, the buffer after the step)."""
    cache = KVCache(model.config, 1, max_len)
    with torch.no_grad():
        if len(ids) > 1:
            model(torch.tensor([ids[:-1]]), cache=cache)
        before = cache.k[0][0].clone()                                     # (n_kv_heads, max_len, hd)
        x = model.blocks[0].norm1(model.tok_emb.weight[ids[-1]])           # layer 0's input: RoPE adds no vector
        k = model.blocks[0].attn.k_proj(x).view(model.config.n_kv_heads, model.config.head_dim)
        model(torch.tensor([ids[-1:]]), cache=cache)
    return before, k, cache.k[0][0].clone()


@exercise("append_key", title="Append a key to a preallocated cache with its RoPE rotation",
          hints=("At which position does the new token sit when seq_len tokens are cached already, and is its key "
                 "rotated before it is stored?",
                 "Its position is seq_len: rope_tables gives cos and sin for that position and apply_rope turns "
                 "the key; both work on 4-D tensors (B, heads, T, hd), so add the missing dimensions and take "
                 "them off again.",
                 "the new token sits at position seq_len (the number of tokens already cached): rotate its key with "
                 "lib.model.rope_tables(hd, torch.tensor([[seq_len]]), theta) and lib.model.apply_rope (they want "
                 "4-D tensors (B, heads, T, hd)), then write it at cache_k[:, seq_len]; leave every other row as it is."),
          solution=append_key_solution)
def _append_key_cases():
    for n_cached, max_len, seed in ((5, 8, 0), (0, 4, 1), (23, 32, 2)):
        model = random_model(_rope_config(), seed=seed)
        ids = [(7 * i + 3) % 131 for i in range(n_cached + 1)]
        before, k, after = _key_step(model, ids, max_len)
        yield Case(t("{n} tokens cached in a buffer of {max_len} positions, {heads} KV heads of head_dim {hd}",
                     n=n_cached, max_len=max_len, heads=model.config.n_kv_heads, hd=model.config.head_dim),
                   args=(before, n_cached, k, model.config.rope_theta), expected=after)


# ------------------------------------------------------------------ 04: one attention row of the worked case

def attention_row_solution(q, keys, values):
    """One query (hd,) over the cached keys and values (t, hd): (its t weights, the weighted sum of values)."""
    scores = keys @ q / math.sqrt(q.shape[-1])                             # (t,)
    weights = torch.softmax(scores, dim=-1)                                # (t,), sums to 1
    return weights, weights @ values                                       # (t,), (hd,)


@exercise("attention_row", title="One attention row of the worked case",
          hints=("How much does each cached key count for this one query, and how do those amounts combine the "
                 "values into one output?",
                 "One score per key (a dot product, divided by √hd); softmax makes the scores weights that sum to "
                 "1; the output is the weighted sum of the values.",
                 "score_j = q·k_j / √hd for every cached key (hd = 4 here), weights = softmax of the scores, "
                 "output = Σ_j weight_j · v_j. Return the pair (weights, output)."),
          solution=attention_row_solution)
def _attention_row_cases():
    model, tok = load_demo("tiny")
    out = generate(model, tok.encode("<s>"), 8, eos_id=tok.eos_id, trace="full")
    for step, layer in ((2, 1), (4, 0), (0, 1)):
        s = out.trace[step]
        L = s.tensors["layers"][layer]
        n_keys = s.kv_read[layer] + len(s.positions)
        keys, values = s.tensors["cache_k"][layer], s.tensors["cache_v"][layer]
        q = L["q"][0, 0, -1].float()                                       # (hd,): the newest query
        expected = (L["attn_weights"][0, 0, -1].float(), L["mix"][0, -1].float())
        yield Case(t("step {step}, layer {layer}: one query and {n} cached key(s)", step=step, layer=layer, n=n_keys),
                   args=(q, keys[0, 0, :n_keys].float(), values[0, 0, :n_keys].float()),
                   expected=expected)

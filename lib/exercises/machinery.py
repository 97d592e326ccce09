"""Build-it exercises of the central machinery, on the real model ``lm``: a KV cache of your own plugged into
your own greedy loop (notebook 03), one speculative round with verification and rollback (08), and a gather
through a block table (09).

Every hidden case comes from lib's tested code: the tokens ``lib.generate`` chooses, the keys a ``KVCache``
holds after a plain prefill, the tensor ``PagedKVPool.gather`` builds. The cases also watch *how* the answer was
reached (what was fed to the model, what the cache holds afterwards), so a loop that ignores its cache, or a
round that forgets to roll back, is told so.
"""
from __future__ import annotations

import torch

from ..cache import CACHE_KINDS, CacheBase, KVCache
from ..demo import load_demo
from ..generate import generate
from ..lm import EN_PROMPTS, LOOP_PROMPT
from ..paged import PagedKVPool
from . import Case, Mismatch, compare, exercise
from ..i18n import t


# ------------------------------------------------------------------ 03: your cache in your greedy loop

class _Watched:
    """The real model, with a record of every call: how many tokens were fed and which cache came along."""

    def __init__(self, model):
        self.model, self.calls = model, []

    def __getattr__(self, name):  # config, dtype, device, ...: the model's own
        return getattr(self.model, name)

    def __call__(self, ids, cache=None, **kw):
        self.calls.append((int(ids.shape[-1]), cache))
        return self.model(ids, cache=cache, **kw)


class ListKVCache(CacheBase):
    """The solution's cache: every layer's keys and values in a list, grown with ``torch.cat``."""

    def __init__(self, config, max_len):
        super().__init__(config, 1, max_len)
        self.k, self.v = [None] * config.n_layers, [None] * config.n_layers

    def _write(self, layer, k, v):
        if self.k[layer] is None:
            self.k[layer], self.v[layer] = k, v
        else:
            self.k[layer] = torch.cat([self.k[layer], k], dim=2)  # (1, n_kv_heads, positions, head_dim)
            self.v[layer] = torch.cat([self.v[layer], v], dim=2)
        return self.k[layer], self.v[layer]

    def kv(self, layer):
        return self.k[layer], self.v[layer]

    def _crop(self, n):
        for layer in range(self.n_layers):
            if self.k[layer] is not None:
                self.k[layer], self.v[layer] = self.k[layer][:, :, :n], self.v[layer][:, :, :n]


def cached_greedy_solution(model, prompt_ids, n_new):
    """A prefill through your own cache, then one token per step; the new token ids as a list."""
    cache = ListKVCache(model.config, len(prompt_ids) + n_new)
    with torch.no_grad():
        logits = model(torch.tensor([prompt_ids], device=model.device), cache=cache)  # the prefill
        new = []
        for _ in range(n_new):
            new.append(int(logits[0, -1].argmax()))
            logits = model(torch.tensor([[new[-1]]], device=model.device), cache=cache)  # only the newest token
    return new


_LIB_CACHES = (*CACHE_KINDS.values(), KVCache)  # every kind generate() builds (the quantized one is a KVCache)


def _cache_loop_compare(watched: _Watched, n_prompt: int):
    def check(got, want):
        compare(got, want, what=t("your new tokens"))
        feeds = [n for n, _ in watched.calls]
        caches = [c for _, c in watched.calls]
        if not feeds or caches[0] is None:
            return t("your loop never handed the model a cache: pass cache=your_cache to every call")
        if any(c is not caches[0] for c in caches):
            return t("your loop used more than one cache: make one before the prefill and pass it to every call")
        if type(caches[0]) in _LIB_CACHES:
            return t("that is lib's {name}: the exercise is to use your own class (a subclass of CacheBase)",
                     name=type(caches[0]).__name__)
        if feeds[0] != n_prompt:
            return t("the first call fed {n} tokens: the prefill feeds the whole prompt ({m} here)", n=feeds[0],
                     m=n_prompt)
        late = next((i for i, n in enumerate(feeds[1:], 1) if n != 1), None)
        if late is not None:
            return t("call {i} fed {n} tokens: with a cache, every step after the prefill feeds only the newest "
                     "token", i=late + 1, n=feeds[late])
        return None
    return check


@exercise("cache_in_your_loop", title="Your KV cache in your greedy loop, on the real model",
          hint="write _write(layer, k, v): append k and v (1, n_kv_heads, T, head_dim) to what the layer holds "
               "along dim 2 (torch.cat) and return both; kv(layer) returns them. The loop: one cache, one "
               "prefill model(prompt, cache=cache), then each step the argmax of the last logits, fed alone.",
          solution=cached_greedy_solution)
def _cache_loop_cases():
    model, tok = load_demo("lm")
    for prompt, n in ((LOOP_PROMPT, 12), (EN_PROMPTS[0], 10), ("<s>人工智能", 8)):
        ids = tok.encode(prompt)
        want = generate(model, ids, n).new_tokens[0].tolist()
        watched = _Watched(model)
        yield Case(t("the real model lm, prompt {prompt} ({n_ids} tokens), {n} new tokens", prompt=repr(prompt),
                     n_ids=len(ids), n=n),
                   args=(watched, ids, n), expected=want, compare=_cache_loop_compare(watched, len(ids)))


# ------------------------------------------------------------------ 08: one speculative round, rolled back

def speculative_round_solution(target, cache, pending, drafts):
    """Greedy verification of ``drafts`` in ONE pass of ``target`` over [pending, *drafts]: keep the drafts that
    equal the target's own choice, add the target's next token, roll the cache back to what was accepted."""
    start = cache.seq_len
    ids = torch.tensor([[pending, *drafts]], device=target.device)
    with torch.no_grad():
        choice = target(ids, cache=cache)[0].argmax(-1).tolist()  # the target's token after each prefix
    kept = 0
    while kept < len(drafts) and drafts[kept] == choice[kept]:
        kept += 1
    cache.crop(start + 1 + kept)  # pending and the kept drafts stay; the rejected tail goes
    return drafts[:kept] + [choice[kept]]


def _round_compare(cache: KVCache, model, text: list, n_kept: int):
    def check(got, want):
        compare(got, want, what=t("the tokens your round returns"))
        if cache.seq_len != len(text) + n_kept:
            return t("after your round the cache holds {n} positions: roll it back (cache.crop) so it holds the "
                     "text up to the pending token and the kept drafts, nothing rejected", n=cache.seq_len)
        fresh = KVCache(model.config, 1, cache.max_len)
        with torch.no_grad():
            model(torch.tensor([text + want[:-1]], device=model.device), cache=fresh)
        for layer in range(model.config.n_layers):
            compare(cache.keys(layer), fresh.keys(layer), atol=1e-4, what=t("the cached keys of layer {l}", l=layer))
        return None
    return check


@exercise("speculative_round", title="One speculative round: verify, accept, roll back",
          hint="feed [pending, *drafts] in one call with the cache; row i of the logits is the target's choice "
               "after the i-th prefix. Keep drafts while they equal those choices, then add the target's choice "
               "at the first mismatch (or after the last draft). Finally crop the cache to its length before the "
               "call + 1 + the number kept.",
          solution=speculative_round_solution)
def _round_cases():
    model, tok = load_demo("lm")
    text = tok.encode(LOOP_PROMPT)
    greedy = generate(model, text, 6).new_tokens[0].tolist()
    wrong = next(t for t in tok.encode("的了是") if t != greedy[2])
    for drafts, what in ((greedy[:4], t("every draft is what the target would say")),
                         (greedy[:2] + [wrong, greedy[3]], t("the third draft is wrong")),
                         ([wrong if wrong != greedy[0] else greedy[1], *greedy[1:3]], t("the first draft is wrong"))):
        kept = next((i for i, (d, g) in enumerate(zip(drafts, greedy)) if d != g), len(drafts))
        cache = KVCache(model.config, 1, len(text) + 8)
        with torch.no_grad():
            model(torch.tensor([text[:-1]], device=model.device), cache=cache)  # all but the pending token
        yield Case(t("the real model lm after {prompt}, {n} drafts, {what}", prompt=repr(LOOP_PROMPT), n=len(drafts),
                     what=what),
                   args=(model, cache, text[-1], drafts), expected=greedy[:kept + 1],
                   compare=_round_compare(cache, model, text, kept))


# ------------------------------------------------------------------ 09: gather through a block table

def paged_gather_solution(pool_k, block_table, n_tokens):
    """pool_k: (n_blocks, n_kv_heads, block_size, head_dim); the sequence's keys (n_kv_heads, n_tokens, head_dim)."""
    blocks = pool_k[torch.tensor(block_table, device=pool_k.device)]  # (len(table), heads, block_size, hd)
    heads, hd = pool_k.shape[1], pool_k.shape[3]
    return blocks.transpose(0, 1).reshape(heads, -1, hd)[:, :n_tokens]  # blocks end to end, the last one cut


@exercise("paged_gather", title="Gather a sequence's keys through its block table",
          hint="index the pool with the table (pool_k[table] keeps the table's order), move the heads first "
               "(transpose(0, 1)), lay the blocks end to end (reshape to (heads, blocks × block_size, head_dim)) "
               "and keep the first n_tokens positions: the last block is only partly full.",
          solution=paged_gather_solution)
def _gather_cases():
    model, tok = load_demo("lm")
    pool = PagedKVPool.for_model(model, n_blocks=12, block_size=4)
    tables = [pool.new_table("a"), pool.new_table("b")]
    with torch.no_grad():  # two sequences written in turns, so their blocks interleave in the pool
        for a, b in (("<s>HAMLET.", "<s>送友人"), ("\nTo be", "\n李白\n")):
            for table, text in ((tables[0], a), (tables[1], b)):
                model(torch.tensor([tok.encode(text)]), cache=pool.cache([table]))
    for table in tables:
        n = table.n_tokens
        want = pool.gather(0, pool.table_tensor([table], n), n)[0][0]  # layer 0's keys of this sequence, (heads, n, hd)
        yield Case(t("the real model's layer-0 key pool (blocks of 4), a sequence of {n} tokens in blocks {blocks}",
                     n=n, blocks=table.blocks), args=(pool.k[0], list(table.blocks), n), expected=want)

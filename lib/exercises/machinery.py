"""Build-it exercises of the central machinery, on the real model ``lm``: a KV cache of your own plugged into
your own greedy loop (notebook 03), one speculative round with verification and rollback (08), and a gather
through a block table (09).

Every hidden case comes from lib's tested code: the tokens ``lib.generate`` chooses, the keys a ``KVCache``
holds after a plain prefill, the tensor ``PagedKVPool.gather`` builds. The cases also watch *how* the answer was
reached (what was fed to the model, where the cache wrote, what it holds afterwards), so a loop that ignores its
cache, feeds the whole text again, feeds a stale token, writes at the wrong position or never advances its offset,
or a round that forgets to roll back, is told so in the course's words, with the tokens decoded.
"""
from __future__ import annotations

import torch

from ..cache import CACHE_KINDS, CacheBase, KVCache
from ..demo import load_demo
from ..generate import generate
from ..lm import EN_PROMPTS, LOOP_PROMPT
from ..paged import PagedKVPool
from . import Case, _describe, compare, exercise
from ..i18n import ordinal, t


# ------------------------------------------------------------------ 03: your cache in your greedy loop

class _Watched:
    """The real model, with a record of every call: the ids fed, the cache that came along, the greedy choice
    the call's logits make, and (for a CacheBase of the learner's) where each layer's ``_write`` put the keys."""

    def __init__(self, model):
        self.model, self.calls, self.writes = model, [], []

    def __getattr__(self, name):  # config, dtype, device, ...: the model's own
        return getattr(self.model, name)

    def __call__(self, ids, cache=None, **kw):
        fed = ids.reshape(-1).tolist() if isinstance(ids, torch.Tensor) else []
        self.calls.append({"fed": fed, "cache": cache, "choice": None, "seq_len_after": None})
        if isinstance(cache, CacheBase) and type(cache) not in _LIB_CACHES and "_write" not in vars(cache):
            cache._write = self._recorder(cache, cache._write)
        logits = self.model(ids, cache=cache, **kw)
        call = self.calls[-1]
        if isinstance(logits, torch.Tensor) and logits.dim() == 3:
            call["choice"] = int(logits[0, -1].argmax())
        call["seq_len_after"] = getattr(cache, "seq_len", None)
        return logits

    def _recorder(self, cache, write):
        """Wrap the learner's ``_write``: note, as it happens, where the first new key landed among the keys it
        hands back (it may hand back a view of a buffer that later writes change)."""
        def recorded(layer, k, v):
            out = write(layer, k, v)
            keys = out[0] if isinstance(out, (tuple, list)) and len(out) == 2 else None
            landed, n_keys = None, None
            if isinstance(keys, torch.Tensor) and keys.dim() == 4 and keys.shape[:2] == k.shape[:2] \
                    and keys.shape[3] == k.shape[3]:
                n_keys = int(keys.shape[2])
                first = k[:, :, :1]
                hits = [j for j in range(n_keys) if torch.equal(keys[:, :, j:j + 1], first)]
                landed = hits[-1] if hits else None
            self.writes.append({"call": len(self.calls) - 1, "layer": layer, "T": int(k.shape[2]),
                                "seq_len": cache.seq_len, "returned": out, "n_keys": n_keys, "landed": landed})
            return out
        return recorded


class PreallocatedKVCache(CacheBase):
    """The solution's cache: one (1, n_kv_heads, max_len, head_dim) buffer for K and one for V per layer, written
    in place at the offset ``seq_len``, which ``commit`` moves on once every layer has written (lib.KVCache's
    way, without its windows and batches)."""

    def __init__(self, config, max_len):
        super().__init__(config, 1, max_len)
        shape = (1, config.n_kv_heads, max_len, config.head_dim)
        self.k = [torch.zeros(shape, dtype=self.dtype, device=self.device) for _ in range(config.n_layers)]
        self.v = [torch.zeros(shape, dtype=self.dtype, device=self.device) for _ in range(config.n_layers)]

    def _write(self, layer, k, v):
        end = self.seq_len + k.shape[2]  # this pass's T positions go at seq_len .. end - 1
        self.k[layer][:, :, self.seq_len:end] = k
        self.v[layer][:, :, self.seq_len:end] = v
        return self.k[layer][:, :, :end], self.v[layer][:, :, :end]

    def commit(self):  # every layer has written: the offset moves on past this pass's positions
        self.seq_len += self._pending
        self._pending = 0

    def kv(self, layer):
        return self.k[layer][:, :, :self.seq_len], self.v[layer][:, :, :self.seq_len]

    def _crop(self, n):  # positions from n on are simply written over later
        pass


def cached_greedy_solution(model, prompt_ids, n_new):
    """A prefill through your own cache, then one token per step; the new token ids as a list."""
    cache = PreallocatedKVCache(model.config, len(prompt_ids) + n_new)
    with torch.no_grad():
        logits = model(torch.tensor([prompt_ids], device=model.device), cache=cache)  # the prefill
        new = []
        for _ in range(n_new):
            new.append(int(logits[0, -1].argmax()))
            logits = model(torch.tensor([[new[-1]]], device=model.device), cache=cache)  # only the newest token
    return new


_LIB_CACHES = (*CACHE_KINDS.values(), KVCache)  # every kind generate() builds (the quantized one is a KVCache)


def _loop_mistake(watched: _Watched, tok, n_prompt: int) -> str | None:
    """The first thing the learner's loop did differently from a cached greedy loop, in the course's words
    (step 0 is the prefill, step s the s-th decode step), or None. Token ids are decoded."""
    show = lambda ids: repr(tok.decode(ids))
    calls = watched.calls
    if not calls or calls[0]["cache"] is None:
        return t("your loop never handed the model a cache: pass cache=your_cache to every call")
    cache = calls[0]["cache"]
    if any(c["cache"] is not cache for c in calls):
        return t("your loop used more than one cache: make one before the prefill and pass it to every call")
    if type(cache) in _LIB_CACHES:
        return t("that is lib's {name}: the exercise is to use your own class (a subclass of CacheBase)",
                 name=type(cache).__name__)
    text = []  # the text so far: the prompt, then each token the loop fed
    for s, call in enumerate(calls):
        fed, q = call["fed"], len(text)
        if s == 0 and len(fed) != n_prompt:
            return t("the prefill (step 0) fed {n} tokens: it feeds the whole prompt, {m} tokens here", n=len(fed),
                     m=n_prompt)
        if s > 0 and len(fed) != 1:
            return t("step {s} fed {k} tokens, {text}: with a cache, a decode step feeds only the newest token (the "
                     "cache holds the {q} before it already)", s=s, k=len(fed), text=show(fed), q=q)
        if s > 0 and fed[0] != calls[s - 1]["choice"]:
            newest = t("the argmax of the logits step {p} returned", p=s - 1)
            if fed[0] in text:
                where = len(text) - 1 - text[::-1].index(fed[0])
                was = (t("the {nth} new token", nth=ordinal(where - n_prompt + 1)) if where >= n_prompt else
                       t("from the prompt"))
                return t("step {s} fed {tok}, a stale token ({was}): feed the newest token, {newest}", s=s,
                         tok=show(fed), was=was, newest=newest)
            return t("step {s} fed {tok}, which is not {newest}", s=s, tok=show(fed), newest=newest)
        for w in (w for w in watched.writes if w["call"] == s):
            T, what = w["T"], t("step {s}, layer {layer}", s=s, layer=w["layer"])
            if w["n_keys"] is None:
                return t("at {what} your _write returned {got}: it returns (every key so far, every value so far), "
                         "each (1, n_kv_heads, positions, head_dim)", what=what, got=_describe_returned(w["returned"]))
            if w["landed"] is None:
                return t("at {what} the keys your _write handed back do not hold the key it was given: write k into "
                         "the buffer before you hand it back", what=what)
            if w["landed"] < q:
                return t("at {what} your _write wrote position {p} where {q} was expected: it wrote over a cached "
                         "position instead of appending after the {q} cached ones, from the offset seq_len on",
                         what=what, p=w["landed"], q=q)
            if w["landed"] != q:
                return t("at {what} your _write wrote position {p} where {q} was expected: a pass writes its T "
                         "positions from the offset seq_len on, the same offset in every layer", what=what,
                         p=w["landed"], q=q)
            if w["n_keys"] != q + T:
                return t("at {what} your _write handed back {n} keys where {m} were expected: the new query "
                         "attends over every position so far, the prompt's and the new ones", what=what,
                         n=w["n_keys"], m=q + T)
        text += fed
        after = call["seq_len_after"]
        if after is not None and after != len(text):
            if after == q:
                return t("after step {s} seq_len is still {q}: the offset never advanced; commit() must move it on "
                         "by the {T} position(s) this pass wrote", s=s, q=q, T=len(fed))
            return t("after step {s} seq_len is {n} where {m} was expected: commit() moves the offset on by the "
                     "positions this pass wrote, once (not once per layer)", s=s, n=after, m=len(text))
    return None


def _describe_returned(x) -> str:
    if isinstance(x, (tuple, list)):
        return "(" + ", ".join(_describe(v) for v in x) + ")"
    return _describe(x)


def _new_tokens_mistake(got, want, tok) -> str | None:
    """Compare the learner's new tokens with the greedy ones; name the first wrong one, decoded and counted from
    1 (never the expected token)."""
    what = t("your new tokens")
    if not isinstance(got, (list, tuple)):
        return t("{what} is {got}; a {kind} was expected", what=what, got=_describe(got), kind="list")
    if len(got) != len(want):
        return t("{what} has {n} items, which is not the expected number", what=what, n=len(got))
    for i, (g, w) in enumerate(zip(got, want), 1):
        if isinstance(g, torch.Tensor) and g.numel() == 1 and not g.dtype.is_floating_point:
            g = int(g)
        if not isinstance(g, int) or isinstance(g, bool):
            return t("your {nth} new token is {got}: the new tokens are token ids, ints", nth=ordinal(i),
                     got=_describe(g))
        if g != w:
            right = t("; the {k} before it are right", k=i - 1) if i > 1 else ""
            return t("your {nth} new token is {tok}, which is not the greedy choice there{right}", nth=ordinal(i),
                     tok=repr(tok.decode([g])) if 0 <= g < tok.vocab_size else repr(g), right=right)
    return None


def _cache_loop_compare(watched: _Watched, tok, n_prompt: int):
    def check(got, want):
        return _loop_mistake(watched, tok, n_prompt) or _new_tokens_mistake(got, want, tok)
    return check


def _cache_loop_error(watched: _Watched, tok, n_prompt: int):
    """The learner's loop raised (a full cache, a shape that did not fit): name the mistake that led there."""
    def explain(error):
        if not watched.calls:  # it raised before it ran the model: the error itself says what happened
            return None
        mistake = _loop_mistake(watched, tok, n_prompt)
        return mistake and t("{mistake} (then it raised {error})", mistake=mistake, error=type(error).__name__)
    return explain


@exercise("cache_in_your_loop", title="Your preallocated KV cache in your greedy loop, on the real model",
          hints=("Where in the preallocated buffers do a pass's T new keys and values go, and what must move on "
                 "once every layer has written them?",
                 "seq_len is the offset: the next write starts there, and it is also the position of the next fed "
                 "token. _write fills positions seq_len .. seq_len + T - 1 in place and hands back everything up "
                 "to there; commit() moves seq_len on by T. The loop feeds the prompt once, then only the newest "
                 "token.",
                 "In _write: end = self.seq_len + k.shape[2]; self.k[layer][:, :, self.seq_len:end] = k (the same "
                 "for v); return self.k[layer][:, :, :end], self.v[layer][:, :, :end]. In commit: self.seq_len "
                 "+= self._pending (T), then self._pending = 0. The loop: one cache of len(prompt) + n_new "
                 "positions, logits = model(prompt, cache=cache), then n_new times the argmax of logits[0, -1], "
                 "fed alone."),
          solution=cached_greedy_solution)
def _cache_loop_cases():
    model, tok = load_demo("lm")
    for prompt, n in ((LOOP_PROMPT, 12), (EN_PROMPTS[0], 10), ("<s>人工智能", 8)):
        ids = tok.encode(prompt)
        want = generate(model, ids, n).new_tokens[0].tolist()
        watched = _Watched(model)
        yield Case(t("the real model lm, prompt {prompt} ({n_ids} tokens), {n} new tokens", prompt=repr(prompt),
                     n_ids=len(ids), n=n),
                   args=(watched, ids, n), expected=want, compare=_cache_loop_compare(watched, tok, len(ids)),
                   explain_error=_cache_loop_error(watched, tok, len(ids)))


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
          hints=("One pass of the target over [pending, *drafts] gives its choice after every prefix: which "
                 "drafts does it confirm, and which positions must the cache forget afterwards?",
                 "Compare drafts[i] with the argmax of row i of the logits and stop at the first mismatch. The "
                 "pass wrote 1 + len(drafts) positions; cache.crop keeps only the pending token and the kept "
                 "drafts.",
                 "feed [pending, *drafts] in one call with the cache; row i of the logits is the target's choice "
                 "after the i-th prefix. Keep drafts while they equal those choices, then add the target's choice "
                 "at the first mismatch (or after the last draft). Finally crop the cache to its length before the "
                 "call + 1 + the number kept."),
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
          hints=("The pool holds the blocks in the order they were handed out: which list gives this sequence's "
                 "order, and how full is its last block?",
                 "Index the pool with the block table to get the blocks in order; the heads must come before the "
                 "blocks so that reshape lays each head's positions end to end; n_tokens says where to cut.",
                 "index the pool with the table (pool_k[table] keeps the table's order), move the heads first "
                 "(transpose(0, 1)), lay the blocks end to end (reshape to (heads, blocks × block_size, head_dim)) "
                 "and keep the first n_tokens positions: the last block is only partly full."),
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

"""The autoregressive loop: feed tokens, take the last position's distribution, choose a token, repeat.

    check every argument once                     # the prompt's ids, the settings, the room in the window
    cache = make_cache(...)                       # or the one you pass: KVCache, ConcatKVCache, PagedKVCache
    logits = prefill(prompt, cache)               # the whole prompt in one pass
    cache = fork_for_samples(cache, n)            # num_samples=n: n rows per prompt share that one prefill
    loop:                                         # decode_loop, over a token buffer allocated once
        next = choose(logits)                     # lib.sampling: greedy, temperature, top-k, top-p
        write it into the buffer; stop at <eos>; record the step (Trace)
        logits = decode_one(next, cache)          # only the newest token; older K/V come from the cache
    a call that fails rolls the cache back to what it held (Undo)

With ``use_cache=False`` every step feeds the whole sequence again and recomputes every K and V. Both give
the same tokens.

A decode step reads nothing back from the device (no host sync; gpt-fast's loop has none either): the
prompt's ids are checked once, and the tokens fed later are ones the model chose, so every pass runs with
``checked=True`` (it does not read the ids back); whether the logits are finite is kept on the device and
read once after the loop (``LogitsCheck``). What still reads: the prompt's and the first pass's checks
(once per call), ``eos_id`` (whether every row has stopped, one read per step: the loop must know when to
stop), ``trace`` (the Trace copies each step to the CPU) and sampling at a temperature below 1 on mps
(``lib.sampling.divide``).

This is the lab's loop for a batch of prompts kept in step: the worked example, the widgets, ``lib.lm``,
``lib.measure`` and parallel sampling on the paged cache call ``generate``, and ``lib.FastDecoder`` is a
faster model that it runs. Two lessons loop on their own because their step is another one:
``lib.speculative`` (a draft proposes k tokens, the target checks them in one pass) and ``lib.serving``
(requests of any length join and leave a running batch).
"""
from __future__ import annotations

import time
from dataclasses import dataclass, field

import torch

from . import checks
from .cache import CACHE_KINDS
from .device import synchronize
from .model import ForwardRecord, eval_mode
from .sampling import make_generator, next_token, probs
from .trace import Trace, TraceStep

TRACE_LEVELS = (False, True, "full")


@dataclass
class GenerationResult:
    sequences: torch.Tensor  # (B, prompt_len + generated): prompt followed by the new tokens
    trace: Trace | None
    cache: object | None  # the cache after the run (None without one), to inspect; drop it when done
    prompt_len: int

    @property
    def new_tokens(self) -> torch.Tensor:
        """(B, generated): the tokens after the prompt."""
        return self.sequences[:, self.prompt_len:]

    def text(self, tokenizer, row: int = 0, prompt: bool = False) -> str:
        """Row ``row``'s new tokens as text (``prompt=True``: the prompt before them too), special tokens shown
        as <s>, <eos>: ``tokenizer.decode`` of ``new_tokens[row]``."""
        row = checks.index(row, "row", self.sequences.shape[0], f"the result holds {self.sequences.shape[0]} "
                                                                 f"sequence(s)")
        return tokenizer.decode((self.sequences if prompt else self.new_tokens)[row])


def make_cache(model, kind: str, batch_size: int, max_len: int, copies: int = 1):
    """A new, empty cache of ``kind`` (a kind registered in ``lib.cache.CACHE_KINDS``: "static", "concat",
    "paged") on the model's device and dtype (a paged one with a pool large enough for ``copies`` forks of
    every sequence)."""
    more = {"samples": copies} if checks.choice(kind, "cache_kind", tuple(CACHE_KINDS)) == "paged" else {}
    return CACHE_KINDS[kind](model.config, batch_size, max_len, device=model.device, dtype=model.dtype, **more)


def context_ends(cache) -> bool:
    """Whether the model's context window limits how many tokens a call can generate: it does, except on a
    cache that numbers positions within itself (``KVCache(..., window=W, positions="cache")``, StreamingLLM),
    where the prompt must fit but the stream has no end (each step's query sits at W - 1 at most)."""
    return getattr(cache, "positions", "text") != "cache"


class LogitsCheck:
    """Whether every decode step's logits were finite, kept on the device so that a step reads nothing back (a
    read waits for the device): a flag, and the first failing step and its logits. ``raise_if_bad`` reads them
    once, after the loop, and raises the error the pass itself would have raised (``checks.finite_logits``)."""

    def __init__(self):
        self.clean = self.step = self.logits = None  # () bool, () long, (B, vocab): set by the first step

    def note(self, step: int, logits: torch.Tensor):
        ok = torch.isfinite(logits).all()  # () bool, on the device
        if self.clean is None:
            self.clean, self.step, self.logits = ok, logits.new_full((), step, dtype=torch.long), logits
            return
        first = self.clean & ~ok  # this step is the first that failed
        self.step = torch.where(first, step, self.step)
        self.logits = torch.where(first, logits, self.logits)  # (B, vocab)
        self.clean = self.clean & ok

    def raise_if_bad(self, model):
        if self.clean is not None and not bool(self.clean):  # one host read per call
            checks.finite_logits(self.logits, model, f"step {int(self.step)} (decode)")


@dataclass
class Run:
    """What every step of one ``generate`` call uses: the model, how to choose a token (``lib.sampling``,
    settings checked once), when a sequence stops, and the Trace to record into (None: none)."""

    model: object
    temperature: float
    top_k: int | None
    top_p: float | None
    generator: torch.Generator | None  # seeded: same seed, same tokens
    eos_id: int | None
    pad: int | None  # what a sequence that has stopped gets instead of a token
    trace: Trace | None
    capture: bool  # trace="full": every layer's tensors and the cache after each step too
    trace_top_k: int
    on_token: object = None  # called with (step, (B,) ids on the CPU) after every step; None: nothing read back
    logits_check: LogitsCheck = field(default_factory=LogitsCheck)


@dataclass
class Pass:
    """One forward pass of the loop, as the next steps need it."""

    step: int  # 0: the first pass (the prefill with a cache)
    fed: torch.Tensor  # (B, n_fed): the tokens fed
    pos0: int  # the position of the first of them
    record: ForwardRecord | None  # what the attention layers reported (when tracing)
    logits: torch.Tensor  # (B, vocab) float32: the last position's, the next token's distribution
    t0: float  # when the pass began: a step's time is its pass and choosing its token


def forward(run: Run, fed: torch.Tensor, cache, step: int) -> Pass:
    """Feed ``fed`` (B, T) through the model (the cache appends their K/V) and keep the last position's logits.
    Its token ids were checked once, in ``generate`` (``checked=True``: later ones are the model's own
    choices). The first pass's logits are checked at once; a decode step's on the device (``LogitsCheck``),
    read after the loop."""
    t0, pos0 = time.perf_counter(), 0 if cache is None else cache.seq_len
    rec = ForwardRecord(capture=run.capture) if run.trace is not None else None
    logits = run.model(fed, cache=cache, record=rec, last_only=True, checked=True)[:, -1, :].float()  # (B, vocab)
    if step == 0:
        checks.finite_logits(logits, run.model, "step 0 (prefill)" if cache is not None else "step 0 (decode)")
    else:
        run.logits_check.note(step, logits)
    return Pass(step, fed, pos0, rec, logits, t0)


def prefill(run: Run, prompt: torch.Tensor, cache) -> Pass:
    """Step 0: the whole prompt (B, T) in one pass; every prompt position's K and V go into the cache."""
    return forward(run, prompt, cache, 0)


def decode_one(run: Run, tokens: torch.Tensor, n: int, cache, step: int) -> Pass:
    """A later step: only the newest token, ``tokens[:, n - 1]`` (B, 1); every older K and V comes from the
    cache. Without a cache the whole sequence again, ``tokens[:, :n]``, every K and V computed again."""
    return forward(run, tokens[:, :n] if cache is None else tokens[:, n - 1:n], cache, step)


def choose_next(run: Run, logits: torch.Tensor, finished: torch.Tensor) -> torch.Tensor:
    """(B,) the next token of every row (``lib.sampling.next_token``); a row that has stopped gets padding."""
    if run.temperature != 0:  # logits that are not finite fail the run after the loop; until then draw from 0s
        logits = logits.nan_to_num(0.0, posinf=0.0, neginf=0.0)  # (a no-op on finite logits)
    next_ids = next_token(logits, run.temperature, run.top_k, run.top_p, run.generator)  # (B,)
    if run.eos_id is not None:
        next_ids = torch.where(finished, torch.full_like(next_ids, run.pad), next_ids)
    return next_ids


def record_step(run: Run, p: Pass, next_ids: torch.Tensor, finished: torch.Tensor, cache):
    """Add the pass's step to the Trace (``TraceStep.of_pass``): what the pass reported, the distributions,
    the token, the cache's sizes."""
    synchronize(next_ids.device)  # so that the step's time is its work, not its launch
    seconds = time.perf_counter() - p.t0
    run.trace.add(TraceStep.of_pass(p, chosen=next_ids, finished=finished, cache=cache, top_k=run.trace_top_k,
                                    sample_probs=probs(p.logits, run.temperature, run.top_k, run.top_p),
                                    seconds=seconds))


def decode_loop(run: Run, seq: torch.Tensor, first: Pass, cache, max_new_tokens: int) -> torch.Tensor:
    """Choose a token from the last pass's logits, write it into the token buffer, record the step; stop when
    every row has met <eos> or after ``max_new_tokens``, else decode one more step. -> (B, T + generated)"""
    B, T = seq.shape
    tokens = seq.new_empty(B, T + max_new_tokens)  # (B, T + max_new_tokens): allocated once, filled in place
    tokens[:, :T] = seq
    p, finished, n = first, torch.zeros(B, dtype=torch.bool, device=seq.device), T  # (B,); n tokens so far
    for step in range(max_new_tokens):
        if step > 0:
            p = decode_one(run, tokens, n, cache, step)
        next_ids = choose_next(run, p.logits, finished)  # (B,)
        tokens[:, n] = next_ids  # no copy of what came before (torch.cat would copy all of it: O(n²))
        n += 1
        if run.trace is not None:
            record_step(run, p, next_ids, finished, cache)
        if run.on_token is not None:
            run.on_token(step, next_ids.cpu())
        if run.eos_id is not None:
            finished = finished | (next_ids == run.eos_id)
            if bool(finished.all()):  # a host read per step, only with eos_id: the loop must know when to stop
                break
    run.logits_check.raise_if_bad(run.model)
    return tokens if n == tokens.shape[1] else tokens[:, :n].contiguous()


class Undo:
    """What one call gives back if it fails (a full pool, Ctrl-C): the forks it made let go, and the cache
    passed in holds again exactly what it held before (a sliding-window ring that wrapped cannot go back: it
    is emptied, and the error says so). ``with Undo(cache) as undo:`` around the run."""

    def __init__(self, cache):
        self.cache, self.forked = cache, None
        self.start = 0 if cache is None else cache.seq_len  # what the cache already held

    def fork(self, n: int):
        """n copies of every sequence of the cache (a paged one shares the blocks). A cache that held
        nothing before the call lets go now (paged: its blocks, for the copies' growth)."""
        self.forked = self.cache.fork(n)
        if self.start == 0:
            self.cache.release()
        return self.forked

    def __enter__(self) -> "Undo":
        return self

    def __exit__(self, kind, failure, traceback) -> bool:
        if failure is None:
            if self.forked is not None and self.start:  # it held positions before the call: it lets go only now
                self.cache.release()
            return False
        if self.forked is not None:
            self.forked.release()
        if self.cache is not None:
            try:
                self.cache.crop(self.start)
            except ValueError as undo:
                self.cache.crop(0)
                getattr(failure, "add_note", lambda _: None)(f"the cache was emptied: {undo}")
        return False  # the failure goes on


def fork_for_samples(seq: torch.Tensor, first: Pass, n: int, undo: Undo) -> tuple:
    """Parallel sampling: after the one prefill, n rows per prompt (B -> B * n): the tokens, the logits and the
    recorded attention repeated, the cache forked (``Undo.fork``). -> (seq, first, the forked cache or None)"""
    seq, first.fed, first.logits = (t.repeat_interleave(n, dim=0) for t in (seq, first.fed, first.logits))
    if first.record is not None:
        first.record.attention = {l: a.repeat_interleave(n, dim=0) for l, a in first.record.attention.items()}
    return seq, first, None if undo.cache is None else undo.fork(n)


@torch.no_grad()
def generate(model, input_ids, max_new_tokens: int, use_cache: bool = True, temperature: float = 0.0,
             top_k: int | None = None, top_p: float | None = None, eos_id: int | None = None,
             seed: int | None = None, trace=False, cache=None, *, cache_kind: str = "static",
             num_samples: int = 1, pad_id: int | None = None, trace_top_k: int = 10,
             on_token=None) -> GenerationResult:
    """Generate up to ``max_new_tokens`` tokens after ``input_ids`` ((B, T) tensor, 1-D tensor or list).

    temperature=0 is greedy; otherwise tokens are sampled from softmax(logits / temperature), restricted to
    the top_k tokens and the top_p probability mass, with a generator seeded by ``seed`` (same seed, same
    tokens). A sequence stops at ``eos_id``; stopped sequences are padded with ``pad_id`` (default eos_id)
    until every one has stopped.

    ``cache``: any cache of the protocol (KVCache, ConcatKVCache, PagedKVCache), used as it is (the prompt
    continues after what it holds); None makes a ``cache_kind`` one just large enough. A call that fails
    leaves the cache as it was. The prompt and the new tokens must fit the model's context window, except on
    a ``KVCache(..., window=W, sinks=n, positions="cache")`` (StreamingLLM), which generates any number of
    tokens in flat memory. ``num_samples=n``: n continuations of every prompt (parallel sampling): the
    prompt is prefilled once and the cache forked (a paged one shares the blocks); B * n rows come back.
    ``trace=True`` records a ``Trace``; ``trace="full"`` also every layer's tensors and the cache after each
    step (``TraceStep.tensors``), for the worked example. ``on_token(step, ids)``: called after every step with
    the (B,) ids just chosen, to watch the text appear (one read from the device per step; without it, none).

    Example (``<s>`` starts every text the models were trained on: put it in the prompt)::

        model, tok = lib.load_demo("lm")
        out = lib.generate(model, tok.encode("<s>ROMEO.\n"), 40, eos_id=tok.eos_id)
        print(out.text(tok))                       # the 40 new characters (tok.decode(out.new_tokens[0]))
        lib.generate(model, tok.encode("<s>ROMEO.\n"), 40, on_token=lambda s, ids: print(tok.decode(ids[:1]), end=""))
    """
    input_ids = checks.generate_args(model, input_ids, max_new_tokens if context_ends(cache) else 1,
                                     eos_id=eos_id)  # every input checked once (max_new_tokens by loop_args)
    chooser = checks.sampling(temperature, top_k, top_p)  # (temperature, top_k, top_p) as float, int, float
    num_samples, pad = checks.loop_args(model, input_ids, max_new_tokens, use_cache, cache, trace, TRACE_LEVELS,
                                        num_samples, pad_id, eos_id, trace_top_k)
    B, prompt_len = input_ids.shape
    if use_cache and cache is None:  # never more room than the longest pass needs (the last token is not fed)
        cache = make_cache(model, cache_kind, B, prompt_len + max_new_tokens - 1, num_samples)
    tr = Trace.start(model.config, input_ids.repeat_interleave(num_samples, dim=0), cache,
                     dict(temperature=temperature, top_k=top_k, top_p=top_p, seed=seed)) if trace else None
    if on_token is not None and not callable(on_token):
        raise TypeError(f"on_token must be a function on_token(step, ids) or None, got {type(on_token).__name__}")
    run = Run(model, *chooser, make_generator(seed, model.device), eos_id, pad, tr, trace == "full", trace_top_k,
              on_token)
    with eval_mode(model), Undo(cache) as undo:  # a call that fails leaves the cache as it was
        first = prefill(run, input_ids, cache)
        seq, decode_cache = input_ids, cache  # what the loop decodes on: the prompts and their cache, or forks
        if num_samples > 1:  # n rows per prompt from here on, all sharing that one prefill
            seq, first, decode_cache = fork_for_samples(seq, first, num_samples, undo)
        seq = decode_loop(run, seq, first, decode_cache, max_new_tokens)
    return GenerationResult(sequences=seq, trace=tr, cache=decode_cache, prompt_len=prompt_len)

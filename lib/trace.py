"""Trace: a plain-data record of what ``generate(..., trace=True)`` did, step by step.

Every number in it comes from the run itself: the K/V counts are reported by the attention layers
(``ForwardRecord``), the attention weights are the ones the model used, the cache bytes are the cache's
tensors' real sizes. Widgets and plots read Traces; they never re-run the model.
"""
from __future__ import annotations

from dataclasses import dataclass, field

import torch

from . import checks
from .text import text_table
from .i18n import t


@dataclass
class TraceStep:
    """One forward pass of the generation loop (step 0 is the prefill when a cache is used)."""

    step: int
    phase: str  # "prefill" / "decode" (with cache) or "recompute" (no cache: whole sequence fed again)
    input_ids: torch.Tensor  # (B, n_fed): the tokens fed in this pass
    positions: list  # absolute positions of the fed tokens
    kv_computed: list  # per layer: how many positions had their K/V computed in this pass (per sequence)
    kv_read: list  # per layer: how many positions had their K/V read from the cache
    attention: torch.Tensor  # (n_layers, B, n_heads, n_keys): the newest query's attention weights
    logits: torch.Tensor  # (B, vocab) float32, the last position's logits
    top_ids: torch.Tensor  # (B, k): the k most likely next tokens (model distribution, temperature 1)
    top_probs: torch.Tensor  # (B, k)
    sample_top_ids: torch.Tensor  # (B, k): same after temperature / top-k / top-p (what was sampled from)
    sample_top_probs: torch.Tensor  # (B, k)
    chosen: torch.Tensor  # (B,): the token appended after this step
    chosen_prob: torch.Tensor  # (B,): its probability under the sampling distribution
    finished: torch.Tensor  # (B,) bool: sequences that had already stopped (their token is padding)
    cache_bytes: int  # bytes held by the KV cache after this step (0 without a cache)
    cache_len: int  # positions in the cache after this step (0 without a cache)
    bytes_copied: int  # bytes moved by cache growth so far (torch.cat cache only, else 0)
    seconds: float  # wall time of this step (forward + choosing the token)
    tensors: dict | None = None  # trace="full" only: "embedding", "layers" (per layer q, k, v, attn_weights,
    #   mix, attn_out, ffn_out, hidden; batch first) and "cache_k" / "cache_v" (per layer, after the step)

    @classmethod
    def of_pass(cls, p, *, chosen, finished, sample_probs, cache, top_k: int, seconds: float) -> "TraceStep":
        """One step from what its pass reported: ``p`` (``lib.generate.Pass``: ``step``, ``fed``, ``pos0``,
        ``record``, the attention layers' counts and weights, and ``logits``), the distribution the token was
        drawn from, the ``chosen`` tokens, the rows already ``finished``, and the cache's real sizes."""
        rec, use_cache = p.record, cache is not None
        n_layers, k = len(rec.kv_computed), min(top_k, p.logits.shape[-1])
        top, stop = torch.topk(torch.softmax(p.logits, dim=-1), k, dim=-1), torch.topk(sample_probs, k, dim=-1)
        tensors = None
        if rec.capture:  # everything the layers computed, and the cache as it stands after the step
            tensors = {"embedding": rec.tensors["embedding"].cpu(),
                       "layers": [{name: t.cpu() for name, t in rec.tensors[l].items()} for l in range(n_layers)]}
            if use_cache:
                tensors["cache_k"] = [cache.keys(l).cpu().clone() for l in range(n_layers)]
                tensors["cache_v"] = [cache.values(l).cpu().clone() for l in range(n_layers)]
        return cls(
            step=p.step, phase=("prefill" if p.step == 0 else "decode") if use_cache else "recompute",
            input_ids=p.fed.to("cpu", copy=True),  # a copy: what was fed may be a view of generate's token buffer
            positions=list(range(p.pos0, p.pos0 + p.fed.shape[1])),
            kv_computed=[rec.kv_computed[l] for l in range(n_layers)],
            kv_read=[rec.kv_read[l] for l in range(n_layers)],
            attention=torch.stack([rec.attention[l] for l in range(n_layers)]).float().cpu(),
            logits=p.logits.cpu(), top_ids=top.indices.cpu(), top_probs=top.values.cpu(),
            sample_top_ids=stop.indices.cpu(), sample_top_probs=stop.values.cpu(), chosen=chosen.cpu(),
            chosen_prob=sample_probs.gather(1, chosen[:, None]).squeeze(1).cpu(), finished=finished.cpu(),
            cache_bytes=cache.nbytes if use_cache else 0, cache_len=cache.seq_len if use_cache else 0,
            bytes_copied=getattr(cache, "bytes_copied", 0) if use_cache else 0, seconds=seconds, tensors=tensors)

    @property
    def n_fed(self) -> int:
        return self.input_ids.shape[1]

    @property
    def n_keys(self) -> int:
        return self.attention.shape[-1]


@dataclass
class Trace:
    prompt_len: int
    use_cache: bool
    cache_kind: str | None  # "static", "concat", "paged" (or the cache's class name), None without a cache
    n_layers: int
    n_heads: int
    n_kv_heads: int
    sampling: dict  # temperature, top_k, top_p, seed
    prompt_ids: torch.Tensor  # (B, prompt_len)
    steps: list = field(default_factory=list)

    @classmethod
    def start(cls, config, prompt_ids, cache, sampling: dict) -> "Trace":
        """An empty Trace for a run of a model with ``config`` on ``cache`` (None: no cache)."""
        return cls(prompt_len=prompt_ids.shape[1], use_cache=cache is not None, cache_kind=getattr(cache, "kind", None),
                   n_layers=config.n_layers, n_heads=config.n_heads, n_kv_heads=config.n_kv_heads,
                   sampling=sampling, prompt_ids=prompt_ids.cpu())

    def add(self, step: TraceStep) -> TraceStep:
        """Append one step (``TraceStep.of_pass`` makes it from what a pass reported)."""
        if not isinstance(step, TraceStep):
            raise TypeError(f"Trace.add takes a TraceStep (made by TraceStep.of_pass), got {type(step).__name__}")
        self.steps.append(step)
        return step

    def __len__(self):
        return len(self.steps)

    def __getitem__(self, i) -> TraceStep:
        return self.steps[i]

    def __iter__(self):
        return iter(self.steps)

    # -- counts -----------------------------------------------------------------------------------------
    def kv_computed(self, layer: int = 0) -> list[int]:
        """K/V vectors computed per step in one layer (per sequence)."""
        return [s.kv_computed[checks.trace_at(self, layer)[0]] for s in self.steps]

    def kv_read(self, layer: int = 0) -> list[int]:
        return [s.kv_read[checks.trace_at(self, layer)[0]] for s in self.steps]

    def total_kv_computed(self, layer: int | None = None) -> int:
        """Total K/V vectors computed over the whole generation: one layer, or all layers if layer=None."""
        layers = range(self.n_layers) if layer is None else [checks.trace_at(self, layer)[0]]
        return sum(s.kv_computed[l] for s in self.steps for l in layers)

    # -- views for plots ---------------------------------------------------------------------------------
    def attention_grid(self, layer: int = 0, head: int = 0, batch: int = 0) -> torch.Tensor:
        """(n_steps, n_keys_max) float32: row s is step s's newest query over keys 0..; NaN where a key did
        not exist yet (a fixed grid, so an animation never changes shape)."""
        layer, head, batch = checks.trace_at(self, layer, head, batch)
        grid = torch.full((len(self.steps), max(s.n_keys for s in self.steps)), float("nan"))
        for i, s in enumerate(self.steps):
            grid[i, :s.n_keys] = s.attention[layer, batch, head].float().cpu()
        return grid

    def tokens(self, batch: int = 0) -> list[int]:
        """The whole sequence of sequence `batch`: prompt + the chosen token of every step."""
        batch = checks.trace_at(self, batch=batch)[2]
        return self.prompt_ids[batch].tolist() + [int(s.chosen[batch]) for s in self.steps]

    def rows(self, tokenizer=None, batch: int = 0) -> list[dict]:
        """One dict per step, ready for a table: what was fed, what was computed and read, what came out."""
        show, batch = tokenizer.decode if tokenizer is not None else str, checks.trace_at(self, batch=batch)[2]
        return [{"step": s.step, "phase": s.phase, "fed": show(s.input_ids[batch].tolist()),
                 "positions": f"{s.positions[0]}..{s.positions[-1]}" if s.n_fed > 1 else str(s.positions[0]),
                 "kv_computed": s.kv_computed[0], "kv_read": s.kv_read[0], "next": show([int(s.chosen[batch])]),
                 "p(next)": round(float(s.chosen_prob[batch]), 4), "cache_bytes": s.cache_bytes}
                for s in self.steps]

    def table(self, tokenizer=None, batch: int = 0) -> str:
        """The rows as an aligned text table (K/V counts are per layer, per sequence), its header and phases in the
        notebook's language."""
        rows = self.rows(tokenizer, batch)
        if not rows:
            return t("(no steps)")
        cells = [[t(v) if k == "phase" else v for k, v in r.items()] for r in rows]
        return text_table(cells, header=[t(f"trace column\x04{k}") for k in rows[0]])


def check_trace(value, name: str = "trace", *, steps: bool = True) -> Trace:
    """``value`` if it is a ``lib.Trace`` (``generate(..., trace=True).trace``), else a TypeError; ``steps``: a
    ValueError too when it recorded no step (nothing to show). The check of a Trace lives beside the Trace."""
    if not isinstance(value, Trace):
        raise TypeError(f"{name} must be a lib.Trace (generate(..., trace=True).trace), got {type(value).__name__}")
    if steps and len(value) == 0:
        raise ValueError(f"{name} has no steps: generate at least one token with trace=True")
    return value

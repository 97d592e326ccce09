"""FlashAttention and FlashDecoding, written out in plain PyTorch so they can be read, and the bytes they move.

Plain attention computes the whole score matrix, then its softmax, then the weighted sum:

    S = Q Kᵀ / √D (+ causal mask)      # (Tq, Tk) per head: written to memory, read back
    P = softmax(S)                     # (Tq, Tk): written, read back
    O = P V                            # (Tq, D)

FlashAttention never builds S or P. It walks over tiles of queries × tiles of keys; for each query tile it
keeps three running numbers per query row in fast memory — the largest score seen so far m, the sum of
exp(score − m) so far l, and the weighted sum of values so far acc — and rescales them whenever a new key
tile raises the maximum (the *online softmax*). At the end O = acc / l. Tiles that lie wholly above the causal
diagonal are skipped; tiles that cross it are masked element by element.

FlashDecoding (split-K) is the decode-step variant: one query per sequence, a long cache. The cached keys
are split into chunks, each chunk gives a partial output and its log-sum-exp, and the partials are merged
by their log-sum-exps — the same answer, with the chunks free to run in parallel.

The byte model (``Traffic``) is the one of the FlashAttention paper: "HBM" is the large, slow memory that
holds the tensors, "SRAM" the small fast memory next to the arithmetic units. Only HBM traffic is counted.
Plain attention reads Q and K, writes S, reads S, writes P, reads P and V, writes O. Flash reads each Q tile
once, the K and V tiles each query tile needs, and writes O — never a (Tq, Tk) matrix. Each query head reads
its K/V (grouped-query attention shares the cache's memory, not these reads). Elements count at the inputs'
size, except FlashDecoding's partial outputs and log-sum-exps, which are kept in fp32. ``flash_attention``,
``plain_attention`` and ``flash_decoding`` count what their loops load and store (pass ``traffic=Traffic()``);
``attention_bytes`` gives the same numbers from the shapes alone.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field

import torch

from . import checks
from .i18n import say
from .text import fmt_bytes, text_table

__all__ = ["flash_attention", "plain_attention", "flash_decoding", "split_k_partials", "merge_partials",
           "online_softmax_update", "merge_softmax_states", "softmax_state", "tile_kind", "tile_schedule",
           "flash_tiles", "TileStep",
           "Traffic", "attention_bytes", "flash_keys_loaded", "accumulator_dtype"]

ALGORITHMS = ("plain", "flash", "flash_decoding")
MAX_LISTED_TILES = 1_000_000  # tile_schedule returns a list of every tile


@dataclass
class Traffic:
    """Bytes moved between HBM and SRAM, per tensor name ("Q", "K", "V", "S", "P", "O", ...)."""
    reads: dict = field(default_factory=dict)
    writes: dict = field(default_factory=dict)

    def read(self, name: str, nbytes: int) -> None:
        self.reads[name] = self.reads.get(name, 0) + int(nbytes)

    def write(self, name: str, nbytes: int) -> None:
        self.writes[name] = self.writes.get(name, 0) + int(nbytes)

    @property
    def read_bytes(self) -> int:
        return sum(self.reads.values())

    @property
    def write_bytes(self) -> int:
        return sum(self.writes.values())

    @property
    def total(self) -> int:
        return self.read_bytes + self.write_bytes

    def table(self) -> str:
        """One row per tensor: bytes read, bytes written (exact), and the total."""
        names = list(dict.fromkeys([*self.reads, *self.writes]))
        rows = [[n, f"{self.reads.get(n, 0):,}", f"{self.writes.get(n, 0):,}"] for n in names]
        rows.append(["total", f"{self.read_bytes:,}", f"{self.write_bytes:,}"])
        return text_table(rows, header=["tensor", "bytes read", "bytes written"], translate=True) + \
            "\n" + say(f"{self.total:,} bytes moved ({fmt_bytes(self.total)})")


def accumulator_dtype(dtype: torch.dtype) -> torch.dtype:
    """What the arithmetic runs in: fp32 for fp16 / bf16 / fp32 inputs (as the GPU kernels accumulate), fp64
    for fp64."""
    return torch.promote_types(dtype, torch.float32)


def _nbytes(t: torch.Tensor, copies: int = 1) -> int:
    return t.numel() * t.element_size() * copies


# ---------------------------------------------------------------------------------------------- plain attention

def plain_attention(q, k, v, causal: bool = True, *, traffic: Traffic | None = None) -> torch.Tensor:
    """softmax(Q Kᵀ / √D + causal mask) · V, the whole score matrix at once (the reference). q (B, H, Tq, D),
    k and v (B, H_kv, Tk, D); with Tq < Tk the queries are the last Tq positions. Computed in fp32, returned in
    q's dtype. ``traffic``: count what a kernel per step would move (S and P written out and read back)."""
    B, H, H_kv, Tq, Tk, D = checks.attention_inputs(q, k, v, causal, name="plain_attention")
    checks.fits_in_memory(2 * B * H * Tq * Tk * 4, q.device, "plain_attention's score and probability matrices")
    rep, acc = H // H_kv, accumulator_dtype(q.dtype)
    keys = k.to(acc).repeat_interleave(rep, dim=1)  # (B, H, Tk, D): each K/V head serves rep query heads
    values = v.to(acc).repeat_interleave(rep, dim=1)
    scores = q.to(acc) @ keys.transpose(-2, -1) / math.sqrt(D)  # (B, H, Tq, Tk)
    if causal:  # query i sits at position Tk - Tq + i and sees keys 0..that
        mask = torch.ones(Tq, Tk, dtype=torch.bool, device=q.device).tril(diagonal=Tk - Tq)
        scores = scores.masked_fill(~mask, float("-inf"))
    probs = torch.softmax(scores, dim=-1)  # (B, H, Tq, Tk), each row sums to 1
    out = (probs @ values).to(q.dtype)  # (B, H, Tq, D)
    if traffic is not None:
        size = q.element_size()
        traffic.read("Q", _nbytes(q))
        traffic.read("K", _nbytes(k, rep))
        traffic.write("S", scores.numel() * size)  # S = QKᵀ goes out to HBM ...
        traffic.read("S", scores.numel() * size)   # ... and comes back for the softmax
        traffic.write("P", probs.numel() * size)   # P = softmax(S) goes out ...
        traffic.read("P", probs.numel() * size)    # ... and comes back for P V
        traffic.read("V", _nbytes(v, rep))
        traffic.write("O", _nbytes(out))
    return out


# ------------------------------------------------------------------------------------------- the online softmax

def softmax_state(scores: torch.Tensor, values: torch.Tensor):
    """The softmax state (m, l, acc) of a block of scores (..., Tq, n) — Tq query rows against n keys — over
    those keys' values (..., n, D): per row the maximum m (..., Tq), l = Σ exp(s − m) (..., Tq) and
    acc = Σ exp(s − m) v (..., Tq, D). acc / l is that block's attention output."""
    m = scores.max(dim=-1).values
    p = torch.exp(scores - m[..., None])
    return m, p.sum(dim=-1), p @ values


def merge_softmax_states(a, b):
    """Merge two softmax states (m, l, acc) computed over two disjoint sets of keys into the state over both:
    m = max(m_a, m_b); each side's l and acc are rescaled by exp(its m − m) before they are added. A side that
    saw no key (m = −inf, l = 0) adds nothing."""
    (m_a, l_a, acc_a), (m_b, l_b, acc_b) = a, b
    m = torch.maximum(m_a, m_b)
    m_safe = torch.where(torch.isinf(m), torch.zeros_like(m), m)  # both sides empty: nothing to rescale
    c_a, c_b = torch.exp(m_a - m_safe), torch.exp(m_b - m_safe)  # <= 1: nothing overflows
    return m, c_a * l_a + c_b * l_b, c_a[..., None] * acc_a + c_b[..., None] * acc_b


def online_softmax_update(m, l, acc, scores, values):
    """One step of the online softmax: fold a new tile of scores (..., Tq, n) and its keys' values (..., n, D)
    into the running state (m, l, acc) of the Tq query rows. The new maximum rescales what was summed so far
    by exp(m_old − m_new)."""
    m_new = torch.maximum(m, scores.max(dim=-1).values)  # (...,)
    rescale = torch.exp(m - m_new)  # how much the old sums shrink (1 when the maximum did not move)
    p = torch.exp(scores - m_new[..., None])  # (..., n), masked scores (-inf) give 0
    return m_new, rescale * l + p.sum(dim=-1), rescale[..., None] * acc + p @ values


# -------------------------------------------------------------------------------------------- FlashAttention

def tile_kind(q0: int, q1: int, k0: int, k1: int, offset: int, causal: bool) -> str:
    """What the tile of queries q0..q1-1 × keys k0..k1-1 needs, when query i sits at position offset + i:
    "skip" (every key is after every query: wholly above the diagonal), "mask" (it crosses the diagonal:
    some scores are masked), or "full"."""
    if not causal:
        return "full"
    if k0 > offset + q1 - 1:  # the first key comes after the last query
        return "skip"
    if k1 - 1 > offset + q0:  # the last key comes after the first query
        return "mask"
    return "full"


def tile_schedule(Tq: int, Tk: int, block_size: int = 64, causal: bool = True) -> list[list[str]]:
    """The kind of every tile (rows: query tiles, columns: key tiles), as ``flash_attention`` walks them."""
    Tq, Tk = checks.integer(Tq, "Tq", 1), checks.integer(Tk, "Tk", 1)
    bs = checks.integer(block_size, "block_size", 1)
    checks.flag(causal, "causal")
    if causal and Tq > Tk:
        raise ValueError(f"with causal=True the queries are the last Tq of the Tk positions, so Tq must be <= Tk, "
                         f"got Tq={Tq}, Tk={Tk}")
    tiles = -(-Tq // bs) * -(-Tk // bs)
    if tiles > MAX_LISTED_TILES:
        raise ValueError(f"tile_schedule lists every tile, and Tq={Tq}, Tk={Tk} with block_size={bs} make {tiles:,} "
                         f"tiles (at most {MAX_LISTED_TILES:,}); use a larger block_size")
    return [[tile_kind(q0, min(q0 + bs, Tq), k0, min(k0 + bs, Tk), Tk - Tq, causal) for k0 in range(0, Tk, bs)]
            for q0 in range(0, Tq, bs)]


@dataclass
class TileStep:
    """One tile of ``flash_attention``'s walk, as ``flash_tiles`` yields it: the query tile q0..q1-1 against the key
    tile k0..k1-1, its ``kind`` ("full", "mask" or "skip", ``tile_kind``), and the running state of that query
    tile's rows *after* this tile: m (B, H, bq), l (B, H, bq), acc (B, H, bq, D), in the accumulator dtype (a
    skipped tile leaves them as they were). ``last``: the last key tile of this query tile, where the loop divides
    acc by l and stores the tile's output ``out`` (B, H, bq, D) in q's dtype (None before)."""
    q0: int
    q1: int
    k0: int
    k1: int
    kind: str
    m: torch.Tensor
    l: torch.Tensor
    acc: torch.Tensor
    last: bool
    out: torch.Tensor | None = None


def flash_tiles(q, k, v, causal: bool = True, block_size: int = 64, *, traffic: Traffic | None = None):
    """FlashAttention one tile at a time: yields a ``TileStep`` for every tile of ``tile_schedule`` (skipped ones
    included, in the order the loop visits them: query tiles, then key tiles), each with the online-softmax state
    after it. ``flash_attention`` is this loop with the stored outputs put together; a stepper draws the steps.
    Arguments as ``flash_attention``'s; ``traffic`` counts each load and store when it happens."""
    B, H, H_kv, Tq, Tk, D = checks.attention_inputs(q, k, v, causal, name="flash_attention")
    bs = checks.integer(block_size, "block_size", 1)
    rep, scale, offset = H // H_kv, 1 / math.sqrt(D), Tk - Tq  # query i sits at position offset + i
    dt = accumulator_dtype(q.dtype)  # fp32 for 16-bit inputs
    for q0 in range(0, Tq, bs):
        q1 = min(q0 + bs, Tq)
        q_tile = q[:, :, q0:q1].to(dt)  # load a tile of queries into SRAM: (B, H, bq, D)
        rows = q_tile.shape[:-1]  # (B, H, bq): one running state per query row
        m = torch.full(rows, float("-inf"), dtype=dt, device=q.device)  # running max of the scores
        l = torch.zeros(rows, dtype=dt, device=q.device)  # running sum of exp(score - m)
        acc = torch.zeros_like(q_tile)  # running sum of exp(score - m) * value: (B, H, bq, D)
        if traffic is not None:
            traffic.read("Q", _nbytes(q[:, :, q0:q1]))
        for k0 in range(0, Tk, bs):
            k1 = min(k0 + bs, Tk)
            kind = tile_kind(q0, q1, k0, k1, offset, causal)
            if kind != "skip":  # a skipped tile lies wholly above the diagonal: its keys are in every query's future
                k_tile = k[:, :, k0:k1].to(dt).repeat_interleave(rep, dim=1)  # load K and V tiles: (B, H, bk, D)
                v_tile = v[:, :, k0:k1].to(dt).repeat_interleave(rep, dim=1)
                if traffic is not None:
                    traffic.read("K", _nbytes(k[:, :, k0:k1], rep))
                    traffic.read("V", _nbytes(v[:, :, k0:k1], rep))
                scores = q_tile @ k_tile.transpose(-2, -1) * scale  # (B, H, bq, bk): lives in SRAM only
                if kind == "mask":  # crosses the diagonal: hide each query's future keys
                    q_pos = torch.arange(q0, q1, device=q.device) + offset
                    k_pos = torch.arange(k0, k1, device=q.device)
                    scores = scores.masked_fill(k_pos[None, :] > q_pos[:, None], float("-inf"))
                m, l, acc = online_softmax_update(m, l, acc, scores, v_tile)
            last = k1 == Tk
            out = None
            if last:
                out = (acc / l[..., None]).to(q.dtype)  # normalise once, at the end; store O
                if traffic is not None:
                    traffic.write("O", _nbytes(out))
            yield TileStep(q0, q1, k0, k1, kind, m, l, acc, last, out)


def flash_attention(q, k, v, causal: bool = True, block_size: int = 64, *,
                    traffic: Traffic | None = None) -> torch.Tensor:
    """Tiled attention with the online softmax: the same tensor as softmax(Q Kᵀ / √D + causal mask) · V
    (``plain_attention``) without ever building the (Tq, Tk) score matrix.

    q (B, H, Tq, D); k, v (B, H_kv, Tk, D) with H a multiple of H_kv (grouped-query attention); when Tq < Tk
    the queries are the last Tq positions (a prefill that continues a cache). Tiles of ``block_size`` queries
    × ``block_size`` keys; fp16 / bf16 inputs are accumulated in fp32 and the result returned in q's dtype.
    ``traffic``: count the bytes each tile load and store moves. The loop itself is ``flash_tiles``."""
    out = None
    for step in flash_tiles(q, k, v, causal, block_size, traffic=traffic):
        if out is None:
            out = torch.empty_like(q)  # (B, H, Tq, D)
        if step.last:
            out[:, :, step.q0:step.q1] = step.out
    return out


# ------------------------------------------------------------------------------------ FlashDecoding (split-K)

def _decode_inputs(q, k, v, chunk_size, name):
    B, H, H_kv, Tq, Tk, D = checks.attention_inputs(q, k, v, False, name=name)
    if Tq != 1:
        raise ValueError(f"{name} is one decode step: q must hold one query per sequence, shape (B, H, 1, D), "
                         f"got shape {tuple(q.shape)} (use flash_attention for a prefill)")
    return H // H_kv, Tk, checks.integer(chunk_size, "chunk_size", 1)


def split_k_partials(q, k, v, chunk_size: int = 256, *, traffic: Traffic | None = None) -> list:
    """FlashDecoding's first half: one decode query q (B, H, 1, D) against cached keys / values (B, H_kv, Tk, D)
    split into chunks of ``chunk_size`` positions. Each chunk gives (out, lse): its own attention output
    (B, H, 1, D) over its keys only, and the log-sum-exp of its scores (B, H, 1), both in fp32 (fp64 for fp64
    inputs). The newest token
    sees every cached position, so no mask is needed."""
    rep, Tk, cs = _decode_inputs(q, k, v, chunk_size, "split_k_partials")
    D = q.shape[-1]
    dt = accumulator_dtype(q.dtype)
    qf = q.to(dt)
    partials = []
    for k0 in range(0, Tk, cs):
        keys = k[:, :, k0:k0 + cs].to(dt).repeat_interleave(rep, dim=1)  # (B, H, chunk, D)
        values = v[:, :, k0:k0 + cs].to(dt).repeat_interleave(rep, dim=1)
        m, l, acc = softmax_state(qf @ keys.transpose(-2, -1) / math.sqrt(D), values)  # (B,H,1) (B,H,1) (B,H,1,D)
        out, lse = acc / l[..., None], m + torch.log(l)
        partials.append((out, lse))
        if traffic is not None:
            traffic.read("Q", _nbytes(q))  # each chunk's program loads the query
            traffic.read("K", _nbytes(k[:, :, k0:k0 + cs], rep))
            traffic.read("V", _nbytes(v[:, :, k0:k0 + cs], rep))
            traffic.write("partial O", _nbytes(out))
            traffic.write("partial lse", _nbytes(lse))
    return partials


def merge_partials(partials, *, traffic: Traffic | None = None) -> torch.Tensor:
    """FlashDecoding's second half: merge chunk partials [(out, lse), ...] by their log-sum-exps:
    lse = log Σ exp(lse_i), out = Σ exp(lse_i − lse) · out_i (the weights are each chunk's share of the
    softmax's denominator, and sum to 1). Returns (B, H, 1, D) in the partials' dtype."""
    ok = isinstance(partials, (list, tuple)) and partials and all(
        isinstance(p, (list, tuple)) and len(p) == 2 and all(isinstance(x, torch.Tensor) for x in p) and
        tuple(p[0].shape[:-1]) == tuple(p[1].shape) == tuple(partials[0][1].shape) for p in partials)
    if not ok:
        raise ValueError("merge_partials needs a non-empty list of (out, lse) pairs of tensors, as split_k_partials "
                         "returns them: every out (B, H, 1, D) and lse (B, H, 1) of the same shapes")
    outs = torch.stack([o for o, _ in partials])  # (chunks, B, H, 1, D)
    lses = torch.stack([s for _, s in partials])  # (chunks, B, H, 1)
    total = torch.logsumexp(lses, dim=0)  # (B, H, 1)
    out = (torch.exp(lses - total)[..., None] * outs).sum(dim=0)
    if traffic is not None:
        traffic.read("partial O", _nbytes(outs))
        traffic.read("partial lse", _nbytes(lses))
    return out


def flash_decoding(q, k, v, chunk_size: int = 256, *, traffic: Traffic | None = None) -> torch.Tensor:
    """One decode step by split-K: ``merge_partials(split_k_partials(q, k, v, chunk_size))`` in q's dtype —
    the same tensor as ``plain_attention(q, k, v)`` for one query that sees the whole cache."""
    partials = split_k_partials(q, k, v, chunk_size, traffic=traffic)
    out = merge_partials(partials, traffic=traffic).to(q.dtype)
    if traffic is not None:
        traffic.write("O", _nbytes(out))
    return out


# ------------------------------------------------------------------------------------------ bytes from shapes

def flash_keys_loaded(Tq: int, Tk: int, block_size: int, causal: bool = True) -> int:
    """How many key positions ``flash_attention`` loads in all, summed over its query tiles (the same count for
    values), in closed form. Query tile j (1-based) ends at position offset + j·bs, offset = Tk − Tq; it loads
    every key tile that starts at or before that position: min(Tk, j·bs + c) keys, c = ⌈offset / bs⌉·bs. The
    last query tile ends at Tk − 1 and loads all Tk keys. Without a mask every tile loads Tk keys."""
    n = -(-Tq // block_size)  # query tiles
    if not causal:
        return n * Tk
    c = -(-(Tk - Tq) // block_size) * block_size
    J = min(n - 1, max(0, (Tk - c) // block_size))  # tiles 1..J load j·bs + c keys, the others all Tk
    return Tk + block_size * J * (J + 1) // 2 + c * J + (n - 1 - J) * Tk


def attention_bytes(algorithm: str, batch: int, n_heads: int, q_len: int, k_len: int, head_dim: int, *,
                    causal: bool = True, block_size: int = 64, chunk_size: int = 256,
                    itemsize: int = 4) -> Traffic:
    """The HBM traffic of one attention call from its shapes alone (the module docstring's model): the same
    ``Traffic`` that ``plain_attention`` / ``flash_attention`` / ``flash_decoding`` count as they run.

    plain:  Q, K, V read and O written once; S and P (q_len × k_len per head) each written and read back.
    flash:  Q read and O written once; each query tile reads the K and V of every key tile it does not skip
            (``flash_keys_loaded``: the keys loaded over all query tiles, in closed form).
    flash_decoding (q_len 1): K and V read once; every chunk reads q and writes a partial output and its
            log-sum-exp (fp32), which the merge reads back; O written once."""
    algorithm = checks.choice(algorithm, "algorithm", ALGORITHMS)
    B, H, Tq, Tk, D = (checks.integer(x, n, 1) for x, n in ((batch, "batch"), (n_heads, "n_heads"),
                       (q_len, "q_len"), (k_len, "k_len"), (head_dim, "head_dim")))
    size = checks.integer(itemsize, "itemsize", 1)
    checks.flag(causal, "causal")
    if causal and Tq > Tk:
        raise ValueError(f"with causal=True q_len must be <= k_len (the queries are the last q_len positions), "
                         f"got q_len={Tq}, k_len={Tk}")
    t, per_head = Traffic(), B * H * size
    if algorithm == "plain":
        t.read("Q", per_head * Tq * D)
        t.read("K", per_head * Tk * D)
        for name in ("S", "P"):
            t.write(name, per_head * Tq * Tk)
            t.read(name, per_head * Tq * Tk)
        t.read("V", per_head * Tk * D)
        t.write("O", per_head * Tq * D)
    elif algorithm == "flash":
        bs = checks.integer(block_size, "block_size", 1)
        offset = Tk - Tq
        keys = flash_keys_loaded(Tq, Tk, bs, causal)
        t.read("Q", per_head * Tq * D)
        t.read("K", per_head * keys * D)
        t.read("V", per_head * keys * D)
        t.write("O", per_head * Tq * D)
    else:
        if Tq != 1:
            raise ValueError(f"flash_decoding is one decode step: q_len must be 1, got {Tq}")
        cs = checks.integer(chunk_size, "chunk_size", 1)
        chunks = -(-Tk // cs)
        t.read("Q", per_head * chunks * D)
        t.read("K", per_head * Tk * D)
        t.read("V", per_head * Tk * D)
        part = max(4, size)  # the partials are kept in fp32 (fp64 for fp64 inputs)
        t.write("partial O", B * H * chunks * D * part)
        t.write("partial lse", B * H * chunks * part)
        t.read("partial O", B * H * chunks * D * part)
        t.read("partial lse", B * H * chunks * part)
        t.write("O", per_head * D)
    return t

"""What the serving choices trade, computed: the block size (empty slots in the last blocks against block-table
entries), and swap against recompute (bytes over the host link against prefill FLOPs).

    blocks(length, b)  = ceil(length / b)            # the table's entries
    empty(length, b)   = blocks * b - length         # 0 .. b - 1 slots, in the last block only
    swap seconds      >= bytes swapped (out and back) / link GB/s
    recompute seconds >= 2 * parameters * tokens prefilled again / peak FLOP/s
"""
from __future__ import annotations

from dataclasses import dataclass

import torch

from .. import checks, costs
from ..blocks import blocks_for
from ..roofline import DEFAULT_GPU, Machine, as_machine
from .memory import SimResult
from .scheduler import listed

HOST_LINK_GBS = 64.0  # GB/s each way between GPU and CPU memory: PCIe 5.0 x16, nominal (PCIe 4.0 x16: 32)


def preemption_seconds(result: SimResult, model, dtype=torch.float16, machine: Machine | None = None,
                       link_gbs: float = HOST_LINK_GBS) -> dict:
    """Lower bounds on the time ``result``'s preemptions cost if its lengths were a real model's requests:
    ``"recompute"``: its recomputed tokens' prefill at the machine's peak (2 FLOPs per weight per token, the
    weight products; attention adds more at long contexts); ``"swap"``: its swapped bytes over the host link at
    ``link_gbs`` GB/s each way. A run of one kind has 0 for the other."""
    if not isinstance(result, SimResult):
        raise TypeError(f"preemption_seconds takes a SimResult from simulate, got {type(result).__name__}")
    machine = as_machine(machine, default=DEFAULT_GPU)
    link_gbs = checks.number(link_gbs, "link_gbs", above=0, maximum=1e6)
    flops = 2 * costs.param_count(model) * result.recomputed_tokens
    return {"recompute": flops / (machine.peak_gflops * 1e9),
            "swap": result.swap_bytes(costs.kv_bytes_per_token(model, dtype)) / (link_gbs * 1e9)}


@dataclass(frozen=True)
class BlockSizeCost:
    """What paging sequences of given lengths in blocks of ``block_size`` positions costs: the empty slots of
    their last blocks (internal waste) against the entries of their block tables."""

    block_size: int
    n_sequences: int
    tokens: int  # positions holding tokens, all sequences together
    table_entries: int  # blocks held = block-table entries, all sequences together

    @property
    def slots(self) -> int:
        return self.table_entries * self.block_size

    @property
    def empty_slots(self) -> int:
        """Slots of the last blocks that hold no token (never more than block_size - 1 per sequence)."""
        return self.slots - self.tokens

    @property
    def empty_share(self) -> float:
        """Empty slots / slots held."""
        return self.empty_slots / self.slots

    @property
    def entries_per_sequence(self) -> float:
        return self.table_entries / self.n_sequences

    def table_bytes(self, entry_bytes: int = 4) -> int:
        """Bytes of all block tables (vLLM keeps a block id in 4 bytes, an int32)."""
        return self.table_entries * checks.integer(entry_bytes, "entry_bytes", 1)

    def row(self) -> dict:
        """Rounded, for a table."""
        return {"block size": self.block_size, "empty slots": self.empty_slots,
                "empty %": round(100 * self.empty_share, 2), "table entries": self.table_entries,
                "entries / sequence": round(self.entries_per_sequence, 2)}


def block_size_tradeoff(lengths, block_sizes=range(1, 65)) -> list[BlockSizeCost]:
    """For each block size, the cost of holding sequences of ``lengths`` positions in blocks: each takes
    ceil(length / block_size) blocks (its table's entries), and the last one has
    blocks * block_size - length empty slots. Small blocks waste almost nothing but make long tables (more
    entries to keep, look up and gather, each a small piece); large blocks make short tables and big pieces
    but leave up to block_size - 1 slots empty per sequence (about half a block on average)."""
    lengths = [checks.integer(n, "each length", 1) for n in listed(lengths, "lengths", object, "positive integers")]
    if not lengths:
        raise ValueError("block_size_tradeoff needs at least one sequence length")
    sizes = [checks.integer(b, "each block size", 1) for b in listed(block_sizes, "block_sizes", object,
                                                                          "positive integers")]
    if not sizes:
        raise ValueError("block_size_tradeoff needs at least one block size")
    total = sum(lengths)
    return [BlockSizeCost(b, len(lengths), total, sum(blocks_for(n, b) for n in lengths)) for b in sizes]

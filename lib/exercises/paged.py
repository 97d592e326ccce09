"""Build-it exercises of notebook 09 (the paged KV cache): find a token's slot through a block table, and count
the blocks a sequence takes. The hidden cases come from ``lib.paged.BlockTable.locate`` and
``lib.serving.block_size_tradeoff``."""
from __future__ import annotations

from ..paged import BlockTable
from ..serving import block_size_tradeoff
from ..widgets.i18n import t
from . import Case, exercise


def _locate_solution(block_table, block_size, position):
    block = block_table[position // block_size]  # which entry of the table: the logical block
    offset = position % block_size  # where in that physical block
    return block, offset, block * block_size + offset  # the flat slot, as vLLM's slot_mapping writes it


@exercise("block_table_lookup", title="Block-table lookup",
          hint="position // block_size says which entry of the table (the logical block) to read; "
               "position % block_size is the offset inside that physical block; the flat slot counts whole "
               "blocks of block_size slots before it.",
          solution=_locate_solution)
def _locate_cases():
    situations = [
        ("a position in the middle of the third logical block", [7, 2, 9], 16, 37),
        ("the very first position of a sequence", [3], 4, 0),
        ("the first position of a new block", [4, 11, 6], 5, 10),
        ("the last slot of a block", [4, 11, 6], 5, 14),
        ("blocks of a single position", [5, 0, 8, 1], 1, 2),
    ]
    for description, blocks, block_size, position in situations:
        block, offset = BlockTable(list(blocks)).locate(position, block_size)
        yield Case(t("{what} (table {blocks}, blocks of {size}, position {position})", what=t(description),
                     blocks=blocks, size=block_size, position=position),
                   args=(list(blocks), block_size, position), expected=(block, offset, block * block_size + offset))


def _blocks_solution(n_tokens, block_size):
    blocks = -(-n_tokens // block_size)  # round up: a partly filled last block is still a whole block
    return blocks, blocks * block_size - n_tokens


@exercise("blocks_for_sequence", title="Blocks a sequence takes",
          hint="divide the length by the block size and round UP (a partly filled last block is still a whole "
               "block); the empty slots are the blocks' slots minus the tokens.",
          solution=_blocks_solution)
def _blocks_cases():
    for description, n_tokens, block_size in [
        ("a sequence that ends inside a block", 100, 16),
        ("a sequence that fills its blocks exactly", 64, 16),
        ("a single token", 1, 16),
        ("one token past a block boundary", 17, 4),
        ("blocks of a single position", 37, 1),
    ]:
        cost = block_size_tradeoff([n_tokens], [block_size])[0]
        yield Case(t("{what} ({n} tokens, blocks of {size})", what=t(description), n=n_tokens, size=block_size),
                   args=(n_tokens, block_size),
                   expected=(cost.table_entries, cost.empty_slots))

"""Trace: what generate(..., trace=True) records, and its views (rows, table, attention grid, tokens)."""
import pytest
import torch

from lib import generate
from test_generate import CFG, model  # noqa: F401 (the same small GQA model and its fixture)


def test_trace_contents(model):
    r = generate(model, torch.randint(0, 30, (2, 4)), 6, trace=True, trace_top_k=5)
    tr = r.trace
    assert len(tr) == 6 and tr.prompt_len == 4 and r.sequences.shape == (2, 10)
    assert [s.phase for s in tr] == ["prefill"] + ["decode"] * 5
    assert tr[0].positions == [0, 1, 2, 3] and tr[3].positions == [6]
    for i, s in enumerate(tr):
        assert s.attention.shape == (CFG.n_layers, 2, CFG.n_heads, 4 + i)
        torch.testing.assert_close(s.attention.sum(-1), torch.ones(CFG.n_layers, 2, CFG.n_heads))
        assert s.top_ids.shape == (2, 5) and torch.all(s.top_probs[:, :-1] >= s.top_probs[:, 1:])
        assert torch.equal(s.chosen, s.top_ids[:, 0])  # greedy picks the most likely token
        assert torch.equal(r.sequences[:, 4 + i], s.chosen)
        assert s.cache_len == 4 + i  # the prefill stores 4 positions, each decode step one more
        assert s.cache_bytes == r.cache.nbytes
        assert s.seconds > 0
    assert tr.tokens(1) == r.sequences[1].tolist()
    grid = tr.attention_grid(layer=2, head=3, batch=1)
    assert grid.shape == (6, 9) and torch.isnan(grid[0, 4:]).all() and not torch.isnan(grid[5]).any()
    rows = tr.rows()
    assert rows[0]["kv_computed"] == 4 and rows[1]["kv_read"] == 4
    assert "kv_computed" in tr.table().splitlines()[0]


def test_table_lines_up_chinese_tokens(chat):
    from lib.text import display_width
    model, tok = chat
    r = generate(model, tok.encode("<s>"), 10, eos_id=tok.eos_id, trace=True)
    lines = r.trace.table(tok).splitlines()
    assert lines[0].split() == ["step", "phase", "fed", "positions", "kv_computed", "kv_read", "next", "p(next)",
                                "cache_bytes"] and len(lines) == 2 + len(r.trace)
    assert "".join(l.split()[-3] for l in lines[2:]) == "人工智能<eos>"  # the "next" column, read back
    # the last column is right-aligned, so a table whose columns line up has every line equally wide on screen
    # (人 takes two columns, < one): padding by len() would make the Chinese rows wider
    assert len({display_width(line) for line in lines[1:]}) == 1


def test_full_trace_keeps_every_tensor_and_the_cache_after_each_step(model):
    ids = torch.randint(0, 30, (2, 3))
    r = generate(model, ids, 4, trace="full")
    for i, s in enumerate(r.trace):
        t = s.tensors
        assert t["embedding"].shape == (2, s.n_fed, CFG.d_model) and len(t["layers"]) == CFG.n_layers
        L = t["layers"][1]
        assert L["q"].shape == (2, CFG.n_heads, s.n_fed, CFG.head_dim) and L["k"].shape[1] == CFG.n_kv_heads
        assert L["attn_weights"].shape == (2, CFG.n_heads, s.n_fed, 3 + i)
        torch.testing.assert_close(L["attn_weights"][:, :, -1], s.attention[1])  # the newest query's row
        assert L["mix"].shape == (2, s.n_fed, CFG.n_heads * CFG.head_dim) and L["hidden"].shape[-1] == CFG.d_model
        assert t["cache_k"][0].shape == (2, CFG.n_kv_heads, 3 + i, CFG.head_dim)  # the cache after the step
        torch.testing.assert_close(t["cache_k"][2][:, :, -s.n_fed:], t["layers"][2]["k"])  # what it appended
    last = r.trace[-1].tensors
    for layer in range(CFG.n_layers):  # the last snapshot is the cache itself
        assert torch.equal(last["cache_v"][layer], r.cache.values(layer))
    assert r.trace[0].tensors is not None and generate(model, ids, 2, trace=True).trace[0].tensors is None
    with pytest.raises(ValueError, match=r"trace='all' is not supported; allowed: False, True, full"):
        generate(model, ids, 2, trace="all")


def test_add_takes_a_step(model):
    """Trace.add appends a TraceStep (``TraceStep.of_pass`` builds it from what a pass reported), nothing else."""
    from lib import TraceStep
    tr = generate(model, torch.randint(0, 30, (1, 3)), 2, trace=True).trace
    again = type(tr)(**{k: getattr(tr, k) for k in ("prompt_len", "use_cache", "cache_kind", "n_layers", "n_heads",
                                                    "n_kv_heads", "sampling", "prompt_ids")})
    assert again.add(tr[1]) is tr[1] and len(again) == 1 and isinstance(tr[1], TraceStep)
    with pytest.raises(TypeError, match=r"Trace.add takes a TraceStep \(made by TraceStep.of_pass\), got tuple"):
        again.add((1, 2))

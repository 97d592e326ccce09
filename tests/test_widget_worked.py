import re
"""The worked case (C11): the tiny model's numbers, the tables and figure built from them, the live widget."""
import math

import pytest
import torch

import lib
from lib.widgets import style
from lib.widgets import worked as W


@pytest.fixture(scope="module")
def tiny():
    return lib.load_demo("tiny")


@pytest.fixture(scope="module")
def case(tiny):
    return W.run_worked_case(*tiny, "<s>", max_new_tokens=8)


@torch.no_grad()
def _captures(model, tok, prompt="<s>", n=8):
    """An independent cached run with ForwardRecord(capture=True): the tensors the tables must show."""
    ids = tok.encode(prompt)
    cache = lib.KVCache(model.config, 1, len(ids) + n - 1)
    seq, out = list(ids), []
    for step in range(n):
        rec = lib.ForwardRecord(capture=True)
        fed = seq if step == 0 else seq[-1:]
        logits = model(torch.tensor([fed]), cache=cache, record=rec)[0, -1]
        out.append((rec, logits))
        seq.append(int(logits.argmax()))
        if seq[-1] == tok.eos_id:
            break
    return out


def test_generates_the_source_phrase(case, tiny):
    model, tok = tiny
    assert (model.config.n_layers, model.config.d_model, model.config.n_heads) == (2, 4, 1)
    assert case.text == "<s>深度学习<eos>" and case.generated == "深度学习<eos>"
    assert [s.fed_tokens for s in case.steps] == [["<s>"], ["深"], ["度"], ["学"], ["习"]]
    assert [s.phase for s in case.steps] == ["prefill"] + ["decode"] * 4
    assert [s.positions for s in case.steps] == [[0], [1], [2], [3], [4]]
    assert [s.cache_len for s in case.steps] == [1, 2, 3, 4, 5]  # one K row and one V row per layer per step


def test_every_vector_has_four_numbers(case):
    for s in case.steps:
        assert s.tok_emb.shape == s.pos_emb.shape == s.embedding.shape == (1, 4)
        for L in s.layers:
            for t in (L.q, L.k, L.v, L.mix, L.attn_out, L.ffn_out, L.hidden):
                assert t.shape == (1, 4)
            assert L.attn.shape == (1, 1, s.cache_len)
            assert math.isclose(float(L.attn.sum()), 1.0, rel_tol=1e-6)


def test_numbers_equal_the_captured_tensors(case, tiny):
    model, tok = tiny
    caps = _captures(model, tok)
    assert len(caps) == len(case)
    for s, (rec, logits) in zip(case.steps, caps):
        assert torch.equal(s.embedding, rec.tensors["embedding"][0])
        assert torch.equal(s.logits, logits.float())
        for l, L in enumerate(s.layers):
            t = rec.tensors[l]
            assert torch.equal(L.q, t["q"][0, 0]) and torch.equal(L.k, t["k"][0, 0]) and torch.equal(L.v, t["v"][0, 0])
            assert torch.equal(L.attn, t["attn_weights"][0])
            assert torch.equal(L.attn_out, t["attn_out"][0]) and torch.equal(L.ffn_out, t["ffn_out"][0])
            assert torch.equal(L.hidden, t["hidden"][0])


def test_text_table_shows_the_captured_numbers(case, tiny):
    model, tok = tiny
    caps = _captures(model, tok)
    for s, (rec, logits) in zip(case.steps, caps):
        table = W.step_table(case, s.step)
        lines = {line.split("  ")[0]: line for line in table.splitlines()}
        for l in range(2):
            t = rec.tensors[l]
            for name, key in (("q", "q"), ("k (new, appended)", "k"), ("v (new, appended)", "v")):
                assert lines[f"L{l} {name}"].endswith(" ".join(W.num(x) for x in t[key][0, 0, 0].tolist()))
            assert lines[f"L{l} FFN output"].endswith(W.vec(t["ffn_out"][0, 0]))
            weights = t["attn_weights"][0, 0, 0].tolist()
            assert lines[f"L{l} attention"].endswith(
                "  ".join(f"{p}:{case.tokens[p]} {w:.4f}" for p, w in enumerate(weights)))
        probs = torch.softmax(logits.float(), -1)
        best = int(probs.argmax())
        assert re.search(rf"{re.escape(f'{float(logits[best]):+.4f}')} +{float(probs[best]):.4f}", table)
        assert table.endswith(f"chosen (greedy): {tok.decode([best])}")


def test_rows_recompute_by_hand(case, tiny):
    """What the page shows adds up: embedding = token + position row, attention = softmax(q·K/√d) over the
    cached keys, attention output = o_proj(weights @ cached V), probabilities = softmax(logits)."""
    model, _ = tiny
    for s in case.steps:
        assert torch.allclose(s.embedding, s.tok_emb + s.pos_emb, atol=1e-7)
        for l, L in enumerate(s.layers):
            scores = (L.q @ s.cache_k[l].T) / math.sqrt(4)  # (1, n_keys)
            assert torch.allclose(torch.softmax(scores, -1), L.attn[0], atol=1e-6)
            assert torch.allclose(L.mix, L.attn[0] @ s.cache_v[l], atol=1e-7)
            with torch.no_grad():
                assert torch.allclose(model.blocks[l].attn.o_proj(L.mix), L.attn_out, atol=1e-6)
        assert torch.allclose(s.probs, torch.softmax(s.logits, -1))
        assert s.chosen == int(s.logits.argmax()) == s.top_ids[0]
        assert s.probs[s.top_ids].tolist() == sorted(s.probs[s.top_ids].tolist(), reverse=True)


def test_new_cache_rows_are_the_new_k_and_v(case):
    for s in case.steps:
        for l, L in enumerate(s.layers):
            assert torch.equal(s.cache_k[l][-1], L.k[0]) and torch.equal(s.cache_v[l][-1], L.v[0])


def test_agrees_with_generate_trace(case, tiny):
    model, tok = tiny
    out = lib.generate(model, tok.encode("<s>"), 8, eos_id=tok.eos_id, trace=True)
    check = W.compare_with_trace(case, out.trace)
    assert check == {"same tokens": True, "max |logits diff|": 0.0, "max |attention diff|": 0.0}
    short = lib.generate(model, tok.encode("<s>"), 2, eos_id=tok.eos_id, trace=True)
    with pytest.raises(ValueError, match=r"the trace has 2 steps but the worked case has 5"):
        W.compare_with_trace(case, short.trace)


def test_history_never_changes(case):
    rows = W.history_unchanged(case)
    assert len(rows) == 4 * 2  # steps 1..4, two layers
    assert all(r["K unchanged"] and r["V unchanged"] and r["new rows"] == 1 for r in rows)
    assert [r["old rows"] for r in rows] == [1, 1, 2, 2, 3, 3, 4, 4]


def test_history_check_detects_a_change(case):
    import copy
    broken = copy.deepcopy(case)
    broken.steps[3].cache_k[1][0, 2] += 1e-3
    rows = W.history_unchanged(broken)
    assert [(r["step"], r["layer"]) for r in rows if not r["K unchanged"]] == [(3, 1), (4, 1)]


def test_recompute_without_cache_gives_the_same_rows(case, tiny):
    model, _ = tiny
    rows = W.recompute_without_cache(model, case)
    assert [r["positions"] for r in rows] == [5, 5]
    assert all(r["allclose"] and r["max |K diff|"] < 1e-6 and r["max |V diff|"] < 1e-6 for r in rows)
    assert rows[0]["max |logits diff|"] < 1e-5


def test_cache_table(case):
    text = W.cache_table(case, 2, layer=1)
    lines = text.splitlines()
    assert lines[0] == "KV cache after step 2: 3 position(s)" and lines[1] == "layer 1"
    body = lines[4:]
    assert len(body) == 3 and body[-1].endswith("new") and not body[0].endswith("new")
    assert W.vec(case.steps[2].cache_k[1][2]) in body[-1] and W.vec(case.steps[2].cache_v[1][2]) in body[-1]
    assert W.cache_table(case, 4).count("layer ") == 2
    rows = W.cache_rows(case, 4, 0)
    assert [r[1] for r in rows] == ["<s>", "深", "度", "学", "习"] and [r[4] for r in rows] == [False] * 4 + [True]


@pytest.mark.parametrize("step, msg", [(5, r"step must be an integer from 0 to 4 .* got 5"),
                                       (-1, r"got -1"), (True, r"got True"), ("1", r"got '1'")])
def test_bad_step(case, step, msg):
    with pytest.raises(ValueError, match=msg):
        W.step_table(case, step)


def test_bad_layer(case):
    with pytest.raises(ValueError, match=r"layer must be an integer from 0 to 1, got 2"):
        W.cache_table(case, 0, layer=2)


def test_num_format():
    assert [W.num(x) for x in (0.12344, -0.00001, 0.0, -1.5, 12.3)] == \
        ["+0.1234", "+0.0000", "+0.0000", "-1.5000", "+12.3000"]


@pytest.mark.parametrize("kw, exc, msg", [
    (dict(prompt=""), ValueError, r"the prompt is empty"),
    (dict(prompt="<s>猫"), lib.UnknownCharacterError, r"not in the vocabulary: '猫'"),
    (dict(prompt=["<s>"]), TypeError, r"prompt must be text"),
    (dict(max_new_tokens=0), ValueError, r"max_new_tokens must be an integer >= 1, got 0"),
    (dict(max_new_tokens=17), ValueError, r"room for at most 16 new token\(s\) .*\(max_seq_len=16\), but max_new_tokens=17"),
])
def test_run_errors(tiny, kw, exc, msg):
    model, tok = tiny
    with pytest.raises(exc, match=msg):
        W.run_worked_case(model, tok, **{"prompt": "<s>", **kw})


def test_multi_token_prompt_prefill(tiny):
    model, tok = tiny
    c = W.run_worked_case(model, tok, "<s>深", max_new_tokens=8)
    assert c.generated == "度学习<eos>"
    s0 = c.steps[0]
    assert s0.n_fed == 2 and s0.positions == [0, 1] and s0.layers[0].attn.shape == (1, 2, 2)
    assert s0.layers[0].attn[0, 0, 1] == 0  # causal: <s> cannot see 深
    labels = [label for label, _ in W.step_rows(c, 0)]
    assert "L0 q @0" in labels and "L0 q @1" in labels
    assert "L0 attention @0" in W.step_table(c, 0)
    out = lib.generate(model, tok.encode("<s>深"), 8, eos_id=tok.eos_id, trace=True)
    assert W.compare_with_trace(c, out.trace)["same tokens"]


def test_rope_gqa_model_works_too(tiny):
    """Not only the tiny model: rotary positions (no position table) and two query heads sharing one KV head."""
    _, tok = tiny
    torch.manual_seed(1)
    cfg = lib.ModelConfig(vocab_size=tok.vocab_size, n_layers=2, d_model=8, n_heads=2, n_kv_heads=1,
                          max_seq_len=16, positions="rope", norm="rmsnorm", activation="swiglu")
    model = lib.MiniTransformer(cfg).eval()
    c = W.run_worked_case(model, tok, "<s>深", max_new_tokens=3)
    s = c.steps[-1]
    assert s.pos_emb is None and s.layers[0].q.shape == (1, 8) and s.layers[0].k.shape == (1, 4)
    assert s.layers[0].attn.shape == (2, 1, s.cache_len)
    assert "head 1" in W.step_table(c, len(c) - 1)
    out = lib.generate(model, tok.encode("<s>深"), 3, eos_id=tok.eos_id, trace=True)
    check = W.compare_with_trace(c, out.trace)
    assert check["same tokens"] and check["max |logits diff|"] < 1e-6
    assert all(r["allclose"] for r in W.recompute_without_cache(model, c))


def test_figure_frames_hold_the_tables(case):
    fig = W.worked_figure(case)
    frames = W.figure_frames(case)
    assert [f.name for f in fig.frames] == [f"step {i}" for i in range(5)]
    assert [s["label"] for s in fig.layout.sliders[0].steps] == [f"step {i}" for i in range(5)]
    assert all(s["args"][1]["frame"]["redraw"] for s in fig.layout.sliders[0].steps)
    for fr, data in zip(fig.frames, frames):
        assert len(fr.data) == 4 and all(t.type == "table" for t in fr.data)
        numbers, cand, attn, cache = fr.data
        assert [list(c) for c in numbers.cells.values] == data["numbers"]
        assert [list(c) for c in cache.cells.values] == data["cache"]
    # the last frame: every cached K/V row, the newest highlighted; the attention row of layer 1
    last, s = frames[-1], case.steps[-1]
    assert last["cache"][2] == [W.vec(s.cache_k[0][p]) for p in range(5)]
    assert last["cache"][5] == [W.vec(s.cache_v[1][p]) for p in range(5)]
    assert last["cache_fill"] == [W.OLD_FILL] * 4 + [W.NEW_FILL]
    # the row computed in this step: the "computed (first time)" colour of the player, and the "+" mark as well
    assert W.NEW_FILL == style.colour("computed") and W.OLD_FILL == style.PAPER
    assert last["cache"][0] == ["0", "1", "2", "3", "+4"]
    assert frames[0]["cache_fill"] == [W.NEW_FILL] + [style.FREE] * 4  # not cached yet: the "free" concept
    assert last["attention"][2] == [f"{float(w):.4f}" for w in s.layers[1].attn[0, 0]]  # a row per cached key
    assert last["numbers"][1][last["numbers"][0].index("layer 0 q")] == W.vec(s.layers[0].q[0])
    # step 0: the fixed grid has empty cells for positions not cached yet
    first = frames[0]
    assert first["cache"][1] == ["&lt;s&gt;", "", "", "", ""] and first["attention"][1] == ["1.0000", "", "", "", ""]
    assert first["candidates"][1][0] == "深" and first["title"].startswith("step 0 (prefill): feed &lt;s&gt; → next")
    assert list(fig.data[2].cells.values[0])[0] == "0:&lt;s&gt;"  # '<s>' would be plotly's strike-through tag
    assert list(fig.data[2].header.values) == ["cached key", "layer 0", "layer 1"]
    assert frames[-1]["candidates"][1][0] == "&lt;eos&gt;"


def test_plotly_text():
    assert W.plotly_text("<s>a&b<eos>") == "&lt;s&gt;a&amp;b&lt;eos&gt;"


def test_explorer_python_api(tiny):
    model, tok = tiny
    e = W.WorkedExplorer(model, tok)
    assert e.case.generated == "深度学习<eos>" and e.slider.max == 4 and "step 1 (decode)" in e.html
    assert e.step == e.slider.value == W.WorkedExplorer.FIRST_STEP == 1  # opens where the cache is read back
    e.set_step(0)
    assert "step 0 (prefill)" in e.html
    e.set_step(3)
    assert e.step == 3 and e.slider.value == 3 and "step 3 (decode)" in e.html and e.view.value == e.html
    e.slider.value = 1  # as if the reader dragged the slider
    assert e.step == 1 and "step 1 (decode)" in e.html
    e.set_prompt("<s>深")
    assert e.case.generated == "度学习<eos>" and e.step == 1 and e.slider.max == 3 and e.prompt_box.value == "<s>深"
    e.prompt_box.value = "<s>"  # as if typed
    assert e.case.generated == "深度学习<eos>" and e.error is None
    e.set_prompt("<s>猫")  # a bad prompt: the error is shown, the last good case stays
    assert "not in the vocabulary" in e.error and "not in the vocabulary" in e.status.value
    assert e.case.generated == "深度学习<eos>"
    with pytest.raises(ValueError, match=r"step must be an integer from 0 to 4"):
        e.set_step(9)
    assert e.last_update_ms >= 0


def test_step_html_escapes_and_marks_new_rows(case):
    h = W.step_html(case, 0)
    assert "&lt;s&gt;" in h and "<s>" not in h
    assert h.count(f"background:{W.NEW_FILL}") == 2  # the newest cache row of each layer
    assert h.count(">+0</td>") == 2  # ... marked "+" as well as filled
    assert style.css("ink") in h and "#fff" not in h.lower() and "black" not in h  # text follows the theme


def test_explorer_controls_show_whole_labels(tiny):
    model, tok = tiny
    e = W.WorkedExplorer(model, tok)
    assert e.controls.children == (e.prompt_box, e.slider)
    assert all(c.style.description_width == "initial" for c in e.controls.children)
    e.set_prompt("<s>猫")  # the error text follows the theme, edged in the "wasted" colour
    assert style.css("ink") in e.status.value and style.colour("recomputed") in e.status.value


def test_every_table_of_the_figure_shows_all_its_rows_at_their_texts_height(case):
    """The regression of look pass 2: plotly's 20-px rows cut the descenders ("layer 0 q" read "layer 0 g") and the
    numbers table scrolled inside itself, cut after "layer 1 attention". Every row is at least 1.4 times its font
    (times the lines its longest cell wraps into), and each table's domain holds its header and every row of its
    longest frame, on the figure's own height."""
    fig = W.worked_figure(case)
    plot = fig.layout.height - fig.layout.margin.t - fig.layout.margin.b
    for i, table in enumerate(fig.data):
        rows = max(len(fr.data[i].cells.values[0]) for fr in fig.frames)
        assert table.cells.height >= 1.4 * table.cells.font.size
        assert table.header.height >= 1.4 * table.header.font.size
        domain_px = (table.domain.y[1] - table.domain.y[0]) * plot
        assert domain_px >= table.header.height + rows * table.cells.height, f"table {i} scrolls inside itself"


def test_a_row_is_one_line_tall_unless_its_own_text_wraps(tiny):
    """Look pass 3: one wrapped English label ("layer 0 attention output") made all sixteen rows of the numbers two
    lines tall, and a token's escaped "&lt;s&gt;" was measured for the "<s>" it draws. The rows' height is one
    line's (plotly grows a wrapping row by itself), and each table still holds the rows that wrap, in both
    languages."""
    from lib.i18n import set_language
    for lang in ("en", "zh"):
        set_language(lang)
        try:
            case = W.run_worked_case(*tiny, "<s>", 8)
            fig = W.worked_figure(case)
        finally:
            set_language("en")
        one_line = round(W.TABLE_SIZE * 1.4) + 12
        numbers, candidates = fig.data[0], fig.data[1]
        assert numbers.cells.height == candidates.cells.height == one_line, lang
        frames = W.figure_frames(case)
        head, row, total = W._table_size(frames, "numbers", W.NUMBERS_X, [1.1, 1.9], ["q", "n"])
        rows = max(len(f["numbers"][0]) for f in frames)
        assert total >= head + rows * (row + 2) + 16  # every row at least its one line
        if lang == "en":  # the long labels wrap in the narrowest cell, so the table holds more than one line each
            assert total > head + rows * (row + 2) + 16
        cand = W._table_size(frames, "candidates", 1 - W.RIGHT_X, [1] * 4, ["r", "t", "l", "p"])
        assert cand[2] == cand[0] + len(frames[0]["candidates"][0]) * (one_line + 2) + 16  # "<s>", "<eos>": one line


def test_no_attention_weight_wraps_at_the_narrowest_width(tiny):
    """Look pass 3: with a column per cached key, six columns shared the right third of an 860-px plot and a weight
    such as "0.0510" wrapped (a two-line number). A row per key, a column per layer: every weight on one line, in
    both languages, however many keys the case caches."""
    from lib.i18n import set_language
    for lang in ("en", "zh"):
        set_language(lang)
        try:
            case = W.run_worked_case(*tiny, "<s>", 8)
            frames, fig = W.figure_frames(case), W.worked_figure(case)
        finally:
            set_language("en")
        widths = list(fig.data[2].columnwidth)
        col_px = [W.WIDTH_PX * (1 - W.RIGHT_X) * c / sum(widths) for c in widths]
        for f in frames:
            for col, px in zip(f["attention"][1:], col_px[1:]):
                assert all(W._lines(v, px, W.TABLE_SIZE, True) == 1 for v in col), (lang, col)

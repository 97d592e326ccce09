"""Generation player: its numbers are the Traces' numbers, its three tiers draw them, its controls work."""
from itertools import accumulate
import json
from types import SimpleNamespace

import matplotlib

import matplotlib.pyplot as plt
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from helpers import drawn_without_missing_glyphs
import lib
from lib.widgets import style
from lib.costs import kv_computations

from lib.widgets import player as P


@pytest.fixture(scope="module")
def pair(chat):
    """The source's example: <s> -> 人 -> 工 -> 智 -> 能 -> <eos>, with and without the cache."""
    return P.generate_pair(*chat, "<s>", 12)


@pytest.fixture(scope="module")
def lm_pair():
    return lib.load_demo("lm")


@pytest.fixture(scope="module")
def player(chat):
    return P.GenerationPlayer(*chat, "<s>", max_new_tokens=12)


# -- the data layer ------------------------------------------------------------------------------------------
def test_the_pair_is_the_sources_example(chat, pair):
    _, tok = chat
    cached, uncached = pair
    assert cached.use_cache and not uncached.use_cache
    assert tok.decode(cached.tokens()) == tok.decode(uncached.tokens()) == "<s>人工智能<eos>"


def test_chips_are_the_sequence_after_each_step(chat, pair):
    _, tok = chat
    frames = P.player_frames(pair[0], tok, pair[1])
    assert [f.step for f in frames] == [0, 1, 2, 3, 4] and all(f.n_steps == 5 for f in frames)
    assert ["".join(c.text for c in f.chips) for f in frames] == \
        ["<s>人", "<s>人工", "<s>人工智", "<s>人工智能", "<s>人工智能<eos>"]
    for f in frames:
        kinds = [c.kind for c in f.chips]
        assert kinds == ["prompt"] + ["generated"] * (len(kinds) - 2) + ["newest"]
        assert f.chips[-1].text == f.chosen
    # the source lists <s>人工智能 as step 3's input; the real one is <s>人工智 (the chips minus the newest)
    assert "".join(c.text for c in frames[3].chips[:-1]) == "<s>人工智"
    assert frames[3].chosen == "能" and frames[4].chosen == "<eos>"


@pytest.mark.parametrize("cache_shown", [True, False])
def test_counts_are_the_two_traces_counts(chat, pair, cache_shown):
    _, tok = chat
    cached, uncached = pair
    shown, other = (cached, uncached) if cache_shown else (uncached, cached)
    for layer in range(cached.n_layers):
        frames = P.player_frames(shown, tok, other, layer=layer)
        assert [f.with_cache for f in frames] == list(accumulate(cached.kv_computed(layer))) == [1, 2, 3, 4, 5]
        assert [f.without_cache for f in frames] == list(accumulate(uncached.kv_computed(layer))) == [1, 3, 6, 10, 15]
        assert [f.kv_computed for f in frames] == shown.kv_computed(layer)
        assert [f.kv_read for f in frames] == shown.kv_read(layer)
        assert all(f.count_source == "trace" for f in frames)
    assert frames[-1].without_cache == 5 * 6 // 2  # n(n+1)/2 for n = 5 steps


def test_without_a_second_trace_the_count_comes_from_costs(chat, pair):
    _, tok = chat
    cached, uncached = pair
    for shown, other in ((cached, uncached), (uncached, cached)):
        alone = P.player_frames(shown, tok)
        both = P.player_frames(shown, tok, other)
        assert all(f.count_source == "lib.costs" for f in alone)
        assert [(f.with_cache, f.without_cache) for f in alone] == [(f.with_cache, f.without_cache) for f in both]
    assert list(accumulate(kv_computations(1, 5, False))) == [f.without_cache for f in alone]


def test_kv_status_with_and_without_cache(chat, pair):
    _, tok = chat
    cached, uncached = pair
    with_c = P.player_frames(cached, tok, uncached)
    without = P.player_frames(uncached, tok, cached)
    assert with_c[0].kv == without[0].kv == ["new", "none"]  # the prefill computes the prompt's K/V
    for i in range(1, 5):
        assert with_c[i].kv == ["cached"] * i + ["new", "none"]  # read the history, compute the newest input
        assert without[i].kv == ["recomputed"] * i + ["new", "none"]  # the history computed again: the waste
    for frames, tr in ((with_c, cached), (without, uncached)):
        for f, s in zip(frames, tr):  # the picture agrees with the Trace's instrumented counts
            assert f.kv.count("new") + f.kv.count("recomputed") == s.kv_computed[0]
            assert f.kv.count("cached") == s.kv_read[0]


@settings(max_examples=15, deadline=None)
@given(prompt_len=st.integers(1, 6), n=st.integers(1, 8), use_cache=st.booleans())
def test_kv_status_matches_any_trace(prompt_len, n, use_cache):
    model, tok = lib.load_demo("draft")
    ids = tok.encode("<s>" + "人工智能深度"[:prompt_len - 1])
    tr = lib.generate(model, ids, n, use_cache=use_cache, trace=True).trace  # no eos: exactly n steps
    frames = P.player_frames(tr, tok)
    seen = 0
    for f, s in zip(frames, tr):
        assert len(f.kv) == len(f.chips) == prompt_len + f.step + 1
        assert f.kv.count("new") + f.kv.count("recomputed") == s.kv_computed[0]
        assert f.kv.count("cached") == s.kv_read[0]
        assert f.kv.count("new") == (prompt_len if f.step == 0 else 1)  # first-time K/V: the prompt, then 1
        assert f.kv.count("recomputed") == (0 if use_cache else seen)
        assert f.kv[-1] == "none"
        seen += f.kv.count("new")
    assert frames[-1].with_cache == prompt_len + n - 1
    assert frames[-1].without_cache == n * prompt_len + n * (n - 1) // 2


def test_bars_mark_the_chosen_token(chat, pair):
    _, tok = chat
    frames = P.player_frames(pair[0], tok, top_k=5)
    for f, s in zip(frames, pair[0]):
        assert len(f.bars) == 5
        assert [b.token_id for b in f.bars] == s.sample_top_ids[0, :5].tolist()
        assert [b.prob for b in f.bars] == [round(p, 4) for p in s.sample_top_probs[0, :5].tolist()]
        chosen = [b for b in f.bars if b.chosen]
        assert len(chosen) == 1 and chosen[0].token == f.chosen and chosen[0].token_id == int(s.chosen[0])
    assert (frames[0].bars[0].token, frames[0].bars[0].prob) == ("人", frames[0].chosen_prob)


def test_a_sampled_token_outside_the_bars_gets_its_own_bar(chat):
    model, tok = chat
    for seed in range(50):  # after <s>, p(人) is only ~0.2: most seeds sample something else at step 0
        tr = lib.generate(model, tok.encode("<s>"), 1, temperature=1.0, seed=seed, trace=True).trace
        if int(tr[0].chosen[0]) != int(tr[0].sample_top_ids[0, 0]):
            break
    else:
        pytest.fail("no seed sampled a token other than the most likely one")
    f = P.player_frames(tr, tok, top_k=1)[0]
    assert len(f.bars) == 2 and not f.bars[0].chosen and f.bars[1].chosen
    assert f.bars[1].token == f.chosen and f.bars[1].prob == round(float(tr[0].chosen_prob[0]), 4)


def test_data_layer_errors(chat, pair):
    model, tok = chat
    cached, uncached = pair
    with pytest.raises(ValueError, match="same run with the cache off, but both traces have use_cache=True"):
        P.player_frames(cached, tok, cached)
    other = P.generate_pair(model, tok, "<s>深", 12)[1]
    with pytest.raises(ValueError,
                       match=r"different tokens \('<s>人工智能<eos>' vs '<s>深度学习<eos>'\).*other=None"):
        P.player_frames(cached, tok, other)
    with pytest.raises(IndexError, match=r"layer must be an integer from 0 to 3 \(the model has 4 layers\), got 4"):
        P.player_frames(cached, tok, layer=4)  # lib.checks.trace_at: the one check of a layer / head of a Trace
    with pytest.raises(ValueError, match=r"top_k must be an integer from 1 to 10.*got 11"):
        P.player_frames(cached, tok, top_k=11)
    with pytest.raises(TypeError, match=r"trace must be a lib.Trace \(generate\(..., trace=True\).trace\), got list"):
        P.player_frames([1, 2], tok)
    with pytest.raises(TypeError, match="other must be a lib.Trace"):
        P.player_frames(cached, tok, other=SimpleNamespace(steps=uncached.steps, use_cache=False))  # a look-alike


# -- tier 1: table and matplotlib ----------------------------------------------------------------------------
def test_table_rows(chat, pair):
    _, tok = chat
    text = P.player_table(pair[1], tok, pair[0])
    lines = text.splitlines()
    # distinct symbols, each explained by the legend line in the words of its lib.widgets.style concept
    assert "+ computed (first time)" in lines[0] and "! computed again (wasted)" in lines[0]
    assert "= read from the cache" in lines[0] and ". none yet (newest)" in lines[0]
    assert len(set(P.KV_MARKS.values())) == len(P.KV_MARKS)
    assert "from a second Trace" in lines[0]
    rows = lines[3:]
    assert len(rows) == 5
    assert rows[3].split()[:4] == ["3", "recompute", "<s>人工智能", "!!!!!!!++.."]  # <s> is 3 columns wide
    assert rows[4].split()[-3:] == ["5", "/", "15"]
    assert "能* 0.9978" in rows[3]
    cached_rows = P.player_table(pair[0], tok).splitlines()
    assert "from lib.costs" in cached_rows[0]
    assert cached_rows[5].split()[3] == "=====++.."


def _texts(fig):
    return [t.get_text() for ax in fig.axes for t in ax.texts] + [ax.get_title(loc="left") for ax in fig.axes]


def test_plot_step_draws_the_frame(chat, pair):
    _, tok = chat
    fig = drawn_without_missing_glyphs(lambda: P.plot_step(pair[0], tok, 2, pair[1]))
    texts = _texts(fig)
    assert "step 2 (decode): fed 工 at position 2 → chose 智 (p=0.9976)" in texts
    assert [t for t in texts if t in ("<s>", "人", "工", "智")] == ["<s>", "人", "工", "智"]
    assert "0.9976 ← chosen" in texts and "3" in texts and "6" in texts
    assert "running count after step 2\n(steps 0–4: 5 in all)" in texts  # the step count derived from the trace
    chips_ax = fig.axes[0]
    fills = [matplotlib.colors.to_hex(p.get_facecolor()).upper() for p in chips_ax.patches]
    assert fills[4:] == [P.KV_COLORS[k] for k in ("cached", "cached", "new", "none")]
    # K/V cells: the concept colours of lib.widgets.style and, as a second cue, the concepts' hatches
    assert fills[4:7] == [style.colour("cached"), style.colour("cached"), style.colour("computed")]
    assert [p.get_hatch() for p in chips_ax.patches[4:]] == [None, None, style.concept("computed").hatch, None]
    assert fills[3] == style.colour("newest")  # the newest chip (智) is the "newest" concept
    labels = [t.get_text() for t in fig.legends[0].get_texts()]
    assert ["+  K/V computed (first time)", "!  K/V computed again (wasted)", "=  K/V read from the cache"] == labels[-3:]
    chosen_bar = [r for r in fig.axes[1].patches if matplotlib.colors.to_hex(r.get_facecolor()).upper() == P.CHOSEN_COLOR]
    assert len(chosen_bar) == 1 and chosen_bar[0].get_hatch() == style.concept("newest").hatch
    with pytest.raises(ValueError, match=r"step must be an integer from 0 to 4 .*got 5"):
        P.plot_step(pair[0], tok, 5)


def test_plot_strip_has_a_row_per_step(chat, pair):
    _, tok = chat
    fig = drawn_without_missing_glyphs(lambda: P.plot_strip(pair[1], tok, pair[0]))
    ax = fig.axes[0]
    assert [t.get_text() for t in ax.get_yticklabels()] == [f"step {i}" for i in range(4, -1, -1)]
    assert len(ax.patches) == sum(range(2, 7))  # rows of 2..6 cells
    wasted = [p for p in ax.patches if matplotlib.colors.to_hex(p.get_facecolor()).upper() == style.colour("recomputed")]
    assert len(wasted) == 0 + 1 + 2 + 3 + 4
    assert {p.get_hatch() for p in wasted} == {style.concept("recomputed").hatch}  # not the hue alone
    first_time = [p for p in ax.patches if matplotlib.colors.to_hex(p.get_facecolor()).upper() == style.colour("computed")]
    assert len(first_time) == 5 and {p.get_hatch() for p in first_time} == {style.concept("computed").hatch}
    assert style.concept("computed").hatch != style.concept("recomputed").hatch
    assert [t.get_text() for t in fig.legends[0].get_texts()] == [f"{P.KV_MARKS[k]}  K/V {P.KV_SHORT[k]}" for k in P.KV_SHORT]
    assert "p=0.9985   K/V so far 5 / 15" in _texts(fig)


# -- tier 2: plotly ------------------------------------------------------------------------------------------
def test_plotly_figure_has_a_frame_per_step(chat, pair):
    _, tok = chat
    fig = P.player_figure(pair[1], tok, pair[0])
    frames = P.player_frames(pair[1], tok, pair[0])
    assert len(fig.frames) == len(fig.layout.sliders[0].steps) == 5
    assert [b.label for b in fig.layout.updatemenus[0].buttons] == ["▶ Play", "❚❚ Pause"]
    for fr, f in zip(fig.frames, frames):
        chips, kv, bars, counts = fr.data
        assert len(chips.x) == len(kv.x) == 6 and len(bars.x) == 5  # fixed lengths: no re-layout
        assert [t for t in chips.text if t] == [t.replace("<", "&lt;").replace(">", "&gt;") for t in
                                                (c.text for c in f.chips)]
        assert list(kv.marker.color)[:len(f.kv)] == [P.KV_COLORS[k] if k != "none" else style.MUTED for k in f.kv]
        assert list(kv.marker.symbol)[:len(f.kv)] == [P.KV_CELL_SYMBOL[k] for k in f.kv]  # the player's chips:
        assert list(kv.text)[:len(f.kv)] == [f"<b>{P.KV_MARKS[k]}</b>" for k in f.kv]  # a cell with its glyph
        # with a cache each K/V is computed once (hatched //), without most are computed again (hatched x)
        assert list(counts.marker.pattern.shape) == ["/", "x"]
        marked = [t for t in bars.text if "← chosen" in t]
        assert len(marked) == 1 and marked[0].startswith(f.chosen.replace("<", "&lt;").replace(">", "&gt;"))
        assert list(counts.x) == [f.with_cache, f.without_cache]
        assert fr.layout.title.text == f.caption.replace("<", "&lt;").replace(">", "&gt;")
    assert "&lt;s&gt;" in fig.frames[0].data[0].text[0]  # plotly reads text as HTML: <s> must be escaped
    assert P.KV_SYMBOL == {"new": "square", "recomputed": "x", "cached": "circle", "none": "square-open"}
    assert fig.layout.width is None  # the figure takes its cell's width
    titles = [a.text for a in fig.layout.annotations]
    assert all(P.KV_SHORT[k] in titles[0] for k in P.KV_SHORT)  # the key: marker, colour and words of each state
    assert "red" not in titles[0] and "green" not in titles[0]
    # each subplot title starts at its own panel's left edge (they never run together)
    assert [a.x for a in fig.layout.annotations] == [fig.layout[x].domain[0] for x in ("xaxis", "xaxis2", "xaxis3")]
    assert fig.layout.annotations[2].x > fig.layout.xaxis2.domain[1]


def test_plotly_figure_stays_small_and_deterministic(chat):
    model, tok = chat
    tr = lib.generate(model, tok.encode("<s>"), 20, trace=True).trace  # no eos: 20 steps
    a = P.player_figure(tr, tok).to_json()
    b = P.player_figure(tr, tok).to_json()
    assert a == b
    assert len(a) < 300_000
    assert len(json.loads(a)["frames"]) == 20


# -- tier 3: the live widget -----------------------------------------------------------------------------------
def test_player_starts_on_the_sources_example(player):
    player.set(prompt="<s>", use_cache=True, temperature=0.0, top_k=None, top_p=None, max_new_tokens=12)
    player.step = 0
    st0 = player.state()
    assert st0["step"] == 0 and st0["n_steps"] == 5 and st0["message"] == ""
    assert st0["settings"] == dict(prompt="<s>", max_new_tokens=12, temperature=0.0, top_k=None, top_p=None,
                                   seed=0, use_cache=True)
    assert [c["text"] for c in st0["frame"]["chips"]] == ["<s>", "人"]
    assert "&lt;s&gt;" in st0["html"] and "← chosen" in st0["html"]


def test_the_player_opens_where_the_cache_is_at_work(chat):
    fresh = P.GenerationPlayer(*chat, "<s>", max_new_tokens=12)  # 5 steps: opens on step 3, not the prefill
    frame = fresh.state()["frame"]
    assert fresh.step == P.FIRST_STEP == 3 and fresh.player.value == 3
    assert frame["kv"].count("cached") == 3 and frame["with_cache"] < frame["without_cache"]
    assert P.GenerationPlayer(*chat, "<s>深", max_new_tokens=2).step == 1  # a short run: its last step
    assert P.GenerationPlayer(*chat, "<s>", max_new_tokens=12, step=0).step == 0
    with pytest.raises(ValueError, match=r"step must be an integer from 0 to 4, got 7"):
        P.GenerationPlayer(*chat, "<s>", max_new_tokens=12, step=7)
    fresh.set_prompt("<s>猫")  # a prompt it cannot run, then a good one (as notebook 02 does): the first view again
    fresh.set_prompt("<s>")
    assert fresh.step == fresh.player.value == 3


def test_step_forward_and_back(player):
    player.set(prompt="<s>", use_cache=True)
    player.step = 0
    assert [player.next() for _ in range(6)] == [1, 2, 3, 4, 4, 4]  # stays on the last step
    assert player.state()["frame"]["chosen"] == "<eos>"
    assert [player.back() for _ in range(5)] == [3, 2, 1, 0, 0]
    player.step_button.click()
    player.step_button.click()
    player.back_button.click()
    assert player.step == 1 and player.state()["frame"]["caption"].startswith("step 1 (decode): fed 人")
    with pytest.raises(ValueError, match=r"step must be an integer from 0 to 4, got 9"):
        player.step = 9
    player.play()
    assert player.player.playing
    player.pause()
    assert not player.player.playing


def test_the_drawn_html_follows_the_step(player):
    player.set(prompt="<s>", use_cache=True)
    player.step = 3
    html = player.view.value
    assert "step 3 (decode): fed 智 at position 3 → chose 能 (p=0.9978)" in html
    assert P.frame_html(player.frames[3]) == html


def test_cache_toggle_changes_the_computed_read_picture(player):
    player.set(prompt="<s>", use_cache=True)
    player.step = 4
    on = player.state()["frame"]
    player.set(use_cache=False)
    off = player.state()["frame"]
    assert player.step == 4  # the step is kept
    assert on["kv"] == ["cached"] * 4 + ["new", "none"] and on["phase"] == "decode"
    assert off["kv"] == ["recomputed"] * 4 + ["new", "none"] and off["phase"] == "recompute"
    assert (on["kv_computed"], on["kv_read"]) == (1, 4) and (off["kv_computed"], off["kv_read"]) == (5, 0)
    cached, uncached = player.traces
    assert (off["with_cache"], off["without_cache"]) == (on["with_cache"], on["without_cache"]) == \
        (cached.total_kv_computed(0), uncached.total_kv_computed(0)) == (5, 15)
    player.use_cache.value = True  # through the control itself, as a click would
    assert player.state()["frame"]["kv"] == on["kv"]


def test_changing_the_prompt_reruns(player):
    player.set_prompt("<s>深")
    st_ = player.state()
    assert st_["message"] == "" and st_["n_steps"] == 4
    player.step = 3
    assert "".join(c["text"] for c in player.state()["frame"]["chips"]) == "<s>深度学习<eos>"
    player.set_prompt("<s>")


def test_bad_prompt_shows_a_message_not_a_traceback(player):
    player.set_prompt("<s>猫人")
    st_ = player.state()
    assert st_["frame"] is None and st_["n_steps"] == 0
    assert "1 character(s) that are not in the model's vocabulary: '猫' (U+732B)" in st_["message"]
    assert "Allowed: printable ASCII" in st_["message"]
    assert "not in the model&#x27;s vocabulary" in st_["html"]
    with pytest.raises(ValueError, match="nothing to step through: The prompt has 1 character"):
        player.step = 0
    assert player.next() == 0 and player.back() == 0
    player.set_prompt("<s>")  # a good prompt brings the picture back
    assert player.state()["message"] == "" and player.state()["n_steps"] == 5


def test_prompt_too_long_for_the_context_window(chat, player):
    model, _ = chat
    player.set_prompt("<s>" + "a" * 70)
    assert "the prompt has 71 tokens but the model's context window holds max_seq_len=64" in player.message
    player.set(prompt="<s>" + "a" * 59, max_new_tokens=10)  # 60 tokens leave room for 5 new ones
    assert "leaves room for at most 5 new token(s)" in player.message
    player.set(prompt="<s>", max_new_tokens=12)
    assert player.message == ""


def test_a_run_longer_than_the_player_draws_says_so(lm_pair):
    """lm's context holds 512 positions, the player draws 64: a prompt grown in the box with the most new tokens
    gets a message that says both numbers (not a traceback from the frames)."""
    model, tok = lm_pair
    player = P.GenerationPlayer(model, tok, "<s>PORTIA.\n", max_new_tokens=56)
    assert player.message == "" and len(player.frames) == 56  # one frame per step
    player.set_prompt("<s>PORTIA.\nAy")
    assert player.state()["n_steps"] == 0 and player.message.startswith(
        "The player draws at most 64 positions after <s>: this prompt has 11 tokens, so 'max new tokens' can be at "
        "most 54 (it is 56).")
    player.set(max_new_tokens=54)
    assert player.message == "" and len(player.frames) == 54


def test_the_cache_checkbox_and_settings_seen_before_run_no_model(chat, monkeypatch):
    """Both traces come from one run; the checkbox chooses which is shown, and settings shown before come back from
    the player's last runs: the frames are those of a fresh run all the same."""
    player = P.GenerationPlayer(*chat, "<s>", max_new_tokens=12)
    runs = []
    monkeypatch.setattr(P, "generate_pair", lambda *a, **k: runs.append(a[2:]) or PAIR(*a, **k))
    player.use_cache.value = False
    player.use_cache.value = True
    assert runs == []
    player.set_prompt("<s>深")
    player.set_prompt("<s>")
    assert runs == [("<s>深", 12, 0.0, None, None, 0)]
    fresh = P.GenerationPlayer(*chat, "<s>", max_new_tokens=12)
    assert [f.as_dict() for f in player.frames] == [f.as_dict() for f in fresh.frames]


PAIR = P.generate_pair


def test_empty_prompt(player):
    player.set_prompt("")
    assert player.message.startswith("Cannot generate from this prompt: the prompt is empty")
    player.set_prompt("<s>")


def test_sampling_is_seeded(chat, player):
    model, tok = chat
    player.set(prompt="<s>", temperature=1.0, top_k=10, top_p=0.9, seed=3, use_cache=True)
    tokens = player.traces[0].tokens()
    expected = lib.generate(model, tok.encode("<s>"), 12, temperature=1.0, top_k=10, top_p=0.9, seed=3,
                            eos_id=tok.eos_id).sequences[0].tolist()
    assert tokens == expected == player.traces[1].tokens()
    player.seed.value = 3  # same seed again: same run
    assert player.traces[0].tokens() == tokens
    assert player.state()["frame"]["count_source"] == "trace"
    player.set(temperature=0.0, top_k=None, top_p=None, seed=0)


def test_settings_errors(chat, player):
    with pytest.raises(ValueError, match=r"unknown control\(s\) \['temp'\]; allowed: temperature, top_k"):
        player.set(temp=1.0)
    with pytest.raises(ValueError, match=r"temperature=0.9 is not one of the player's steps: 0.0, 0.5, 0.7, 1.0"):
        player.set(temperature=0.9)
    with pytest.raises(ValueError, match=r"max_new_tokens must be an integer from 1 to 64 \(the range of the max "
                                         r"new slider\), got 0"):
        player.set(max_new_tokens=0)
    with pytest.raises(ValueError, match=r"top_k=7 is not one of the player's steps"):
        P.GenerationPlayer(*chat, top_k=7)


def test_the_live_player_records_how_long_a_step_and_a_run_took(chat):
    # (notebook 02 used to print these; a learner does not need them, a maintainer does)
    model, tok = chat
    live = P.GenerationPlayer(model, tok, prompt="<s>", max_new_tokens=6)
    assert live.last_run_seconds > 0
    for i in (0, 1, 2, 1):
        live.step = i
    assert live.last_update_seconds > 0


def test_controls_show_their_whole_labels_in_a_grid(player):
    described = [player.prompt_box, player.temperature, player.top_k, player.top_p, player.seed, player.use_cache,
                 player.max_new, player.slider]
    for control in described:  # description width "initial": "temperature" is never cut to "temperat…"
        assert control.style.description_width == "initial", control.description
    assert player.max_new.description == "max new tokens"
    assert player.controls.children == (player.prompt_box, player.use_cache, player.seed, player.temperature,
                                        player.top_k, player.top_p, player.max_new)
    assert "repeat(3, minmax(max-content" in player.controls.layout.grid_template_columns
    for button in (player.back_button, player.step_button):  # as wide as "◀ Back" / "Step ▶", never "◀ B…"
        assert button.layout.width == "auto" and button.layout.min_width == "max-content"


def test_the_html_follows_the_theme_and_marks_each_kv_state(player):
    player.set(prompt="<s>", use_cache=False)
    player.step = 2
    h = player.view.value
    assert "#000" not in h.lower() and "#fff;" not in h.lower() and "black" not in h and "white;" not in h
    assert style.css("ink") in h and style.css("muted") in h  # page text follows JupyterLab's theme
    for k in ("new", "recomputed", "none"):  # every state on screen: its colour, its mark and its words
        assert P.KV_COLORS[k] in h and P.KV_SHORT[k] in h
    assert h.count(f">{P.KV_MARKS['recomputed']}</span>") == 2 + 1  # two cells and the legend
    assert "repeating-linear-gradient" in h  # hatched cells, as in the figures
    assert style.css("ink") in P.message_html("x") and style.colour("recomputed") in P.message_html("x")
    player.set(use_cache=True)


def test_static_figures_are_laid_out_without_the_notebook_setup(chat, pair):
    """Constrained layout is asked for by the figure itself, so a script that never ran lib.notebook.setup
    gets the same non-overlapping layout (the legend below the panels, outside them)."""
    import matplotlib.layout_engine as le

    _, tok = chat
    for fig in (P.plot_step(pair[0], tok, 2, pair[1]), P.plot_strip(pair[1], tok, pair[0])):
        assert isinstance(fig.get_layout_engine(), le.ConstrainedLayoutEngine)
        plt.close(fig)

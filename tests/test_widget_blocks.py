"""The block-pool widget: its frames come from a real paged pool, and every tier draws what the frames say."""
import json

import pytest

from helpers import drawn_without_missing_glyphs
import lib
from lib.widgets.blocks import (BlockPoolWidget, block_tables_text, default_moments, first_view, frame_html,
                                plot_pool, plot_story, record_story, story_colors, story_figure, story_table)


@pytest.fixture(scope="module")
def frames(chat):
    return record_story(*chat)


def test_the_story_goes_through_every_event(frames):
    kinds = [f.kind for f in frames]
    assert kinds[0] == "start" and kinds[-1] == "end"
    for kind in ("prefill", "fork", "cow", "decode", "finish", "hit"):
        assert kind in kinds
    assert kinds.index("prefill") < kinds.index("fork") < kinds.index("cow") < kinds.index("hit")
    assert frames[0].n_used == 0 and frames[-1].n_used == 0 and frames[-1].n_free == 16
    fork = frames[kinds.index("fork")]
    assert fork.n_shared == 1 and fork.tables["A1"] == fork.tables["A2"]
    assert [b.refcount for b in fork.blocks if b.owners == ("A1", "A2")] == [2]
    cow = frames[kinds.index("cow")]
    assert cow.event_counts()["cow"] == 1 and cow.n_shared == 0
    assert cow.tables["A1"] != cow.tables["A2"]  # one sample got a copy, the other writes in place
    hit = frames[kinds.index("hit")]
    b_first_block = frames[kinds.index("prefill") + 1].tables["B"][0]
    assert hit.tables["C"][0] == b_first_block  # C's first block is B's, found again in the prefix cache
    assert "found in the prefix cache" in hit.caption


def test_every_frame_matches_its_block_tables(frames, chat):
    tok = chat[1]
    for f in frames:
        owners = {}
        for name, blocks in f.tables.items():
            for b in blocks:
                owners.setdefault(b, []).append(name)
        for b in f.blocks:
            assert b.refcount == len(owners.get(b.block, [])) == len(b.owners)
            assert (b.state == "shared") == (b.refcount > 1)
            if b.state == "free":
                assert b.tokens == ()
        bs = f.block_size
        for name, blocks in f.tables.items():
            stored = [t for b in blocks for t in f.blocks[b].tokens]
            text = [("␣" if t == " " else t) for t in tok.tokens(tok.encode(f.texts[name]))]
            # the cache holds every token but the newest, which is fed at the next step
            assert stored == text[:len(stored)] and len(stored) == len(text) - 1
            assert all(len(f.blocks[b].tokens) == bs for b in blocks[:-1])


def test_more_samples_more_sharing_and_copies(chat):
    three = record_story(*chat, n_samples=3)
    fork = next(f for f in three if f.kind == "fork")
    assert max(b.refcount for b in fork.blocks) == 3
    cow = next(f for f in three if f.kind == "cow")
    assert cow.event_counts()["cow"] == 2  # two copies; the last holder writes in place
    one = record_story(*chat, n_samples=1)
    assert "fork" not in [f.kind for f in one] and "cow" not in [f.kind for f in one]


def test_a_small_pool_ends_the_story_with_the_allocators_message(chat):
    frames = record_story(*chat, n_blocks=3)
    assert frames[-1].kind == "full"
    assert frames[-1].caption.startswith("KV block pool exhausted:") and "free block(s) of 4 tokens" in frames[-1].caption


def test_story_errors(chat):
    with pytest.raises(ValueError, match=r"the story has three requests \(A, B, C\); give three prompts, got 2"):
        record_story(*chat, prompts=("<s>a", "<s>b"))
    with pytest.raises(ValueError, match=r"n_samples must be an integer >= 1, got 0"):
        record_story(*chat, n_samples=0)
    with pytest.raises(ValueError, match=r"would pass the model's context window \(max_seq_len=64\)"):
        record_story(*chat, prompts=("<s>" + "a" * 60, "<s>b", "<s>c"))


def test_text_tier(frames):
    lines = story_table(frames).splitlines()
    assert len(lines) == len(frames) + 1 and lines[0].split()[:4] == ["#", "kind", "used", "shared"]
    assert "cow 1" in lines[1 + next(f.index for f in frames if f.kind == "cow")]
    fork = next(f for f in frames if f.kind == "fork")
    text = block_tables_text(fork)
    assert "A1  blocks [0 (refcount 2)]  <s>缓存让" in text and "B   blocks [1, 2]" in text  # not "0x2" (hex)
    assert block_tables_text(frames[0]) == "(no sequences)"


def test_static_tier_draws_each_block_without_missing_glyphs(frames):
    fig = drawn_without_missing_glyphs(lambda: plot_story(frames))
    drawn = [ax for ax in fig.axes if ax.patches]
    assert len(drawn) == len(default_moments(frames)) == 6
    assert all(len(ax.patches) == 16 for ax in drawn)
    ax = plot_pool(frames[3], colors=story_colors(frames))
    texts = [t.get_text() for t in ax.texts]
    assert "×2" in texts and "<s>缓存" in texts
    with pytest.raises(ValueError, match=r"moments must be frame indices from 0 to 21, got \[40\]"):
        plot_story(frames, moments=[40])


def test_plotly_tier_has_a_frame_per_event_and_is_deterministic(frames, chat):
    fig = story_figure(frames)
    assert len(fig.frames) == len(frames) == len(fig.layout.sliders[0].steps)
    cow = next(f for f in frames if f.kind == "cow")
    data = fig.frames[cow.index].data
    z = [v for row in data[0].z for v in row]
    assert z.count(2) == 0 and sum(v is not None and v >= 3 for v in z) == cow.n_used
    assert len(data[1].x) == len({b for _, b in cow.events})  # the red outlines
    again = story_figure(record_story(*chat))
    assert json.loads(fig.to_json()) == json.loads(again.to_json())


def test_frame_html_is_plain_html(frames):
    h = frame_html(frames[3], story_colors(frames))
    assert "<script" not in h and "×2" in h and "A1" in h and "block 0: shared, reference count 2" in h


def test_live_widget_python_api(chat):
    w = BlockPoolWidget(*chat)
    n = w.state()["n_frames"]
    assert w.index == first_view(w.frames) == 3 and w.frame.kind == "fork" and "reference count 2" in w.html
    assert w.frame.n_used > 0 and w.slider.value == 3  # it opens on blocks in use and shared, not an empty pool
    w.goto(0)
    assert "an empty pool" in w.html
    w.step()
    w.step()
    assert w.index == 2 and w.frame.kind == "prefill" and w.slider.value == 2
    w.back()
    assert w.index == 1
    w.goto(999)
    assert w.index == n - 1 and w.state()["kind"] == "end"
    w.back()
    assert w.index == n - 2
    assert 0 < w.last_update_seconds
    w.slider.value = 3  # as if dragged in the browser
    assert w.index == 3 and w.state()["kind"] == "fork"
    w.set(n_samples=3)  # re-records the story on the model
    assert w.frame.kind == "fork" and max(b.refcount for f in w.frames for b in f.blocks) == 3
    w.set(block_size=2)
    assert w.frames[0].block_size == 2 and "2 token slots" in w.frames[0].caption and w.frame.kind == "fork"
    w.set(prompt_a="<s>§")  # not in the vocabulary: the old story stays, the message says why
    assert "not in the vocabulary" in w.state()["error"] and w.frames[0].block_size == 2
    with pytest.raises(ValueError, match=r"unknown control\(s\) \['colour'\]; allowed: prompt_a, prompt_b"):
        w.set(colour="red")


def test_block_states_are_concepts_with_a_second_cue(frames):
    import matplotlib.colors as mc
    import matplotlib.pyplot as plt

    from lib.widgets import style
    from lib.widgets import blocks as B

    assert B.FREE_COLOR == style.FREE and B.STATE_HATCHES["shared"] == style.concept("shared").hatch
    cow = next(f for f in frames if f.kind == "cow")
    ax = plot_pool(cow, colors=story_colors(frames))
    touched = {b for _, b in cow.events}
    for b, patch in zip(cow.blocks, ax.patches):
        assert (patch.get_hatch() or "") == B.block_hatch(b, story_colors(frames))  # a state's, or its owner's
        assert (patch.get_linewidth() > 2) == (b.block in touched)  # a thick outline, not a red one
        if b.state in ("free", "cached"):
            assert patch.get_linestyle() == "--"
    # a block held by one sequence: its sequence's neutral look (a light grey and a hatch, never a concept's hue;
    # dark text reads on it), and owners differ pairwise in fill or hatch
    assert not set(B.SEQ_COLORS) & set(style.CATEGORICAL)
    assert len(set(zip(B.SEQ_COLORS, B.SEQ_HATCHES))) == len(B.SEQ_COLORS)
    owned = next(b for b in cow.blocks if b.state not in ("free", "cached", "shared"))
    fill = mc.to_hex(ax.patches[owned.block].get_facecolor()).upper()
    assert fill == story_colors(frames)[owned.owners[0]] and fill in B.SEQ_COLORS
    assert all(style.contrast_ratio(style.INK, c) >= 4.5 for c in (*B.SEQ_COLORS, B.SHARED_COLOR, B.CACHED_COLOR))
    plt.close(ax.figure)
    fig = plot_story(frames)
    labels = [t.get_text() for t in fig.legends[0].get_texts()]
    assert labels[:4] == ["free", "free, still in the prefix cache", "shared (refcount > 1)", "touched by the event"]
    plt.close(fig)


def test_html_and_plotly_use_style_colours(frames):
    import re

    from lib.widgets import style
    from lib.widgets import blocks as B

    h = frame_html(frames[3], story_colors(frames))
    assert "#d62728" not in h and "#b00" not in h and style.css("ink") in h
    palette = {c.upper() for c in (style.INK, style.MUTED, style.GRID, style.FREE, style.PAPER, *B.SEQ_COLORS,
                                   B.SHARED_COLOR)}
    assert {c.upper() for c in re.findall(r"#[0-9A-Fa-f]{6}", h)} <= palette
    fig = story_figure(frames)
    assert fig.layout.width is None and fig.data[1].marker.color == B.TOUCHED_EDGE

"""The tile stepper (lib.widgets.tiles): its steps are lib.flash.flash_tiles on the real model's layer, its bytes are
lib.flash's counts, its FlashDecoding view ends at the model's own attention output; the live widget through its
Python API (set values, press Step / Back) without a browser."""
import pytest
import torch

import lib
from lib import flash
from lib.corpus import heldout_text
from lib.lm import windows
from lib.widgets import tiles
from lib.i18n import speaking


@pytest.fixture(scope="module")
def lm():
    model, tok = lib.load_demo("lm")
    return model, windows(tok, heldout_text("en"), model.config.max_seq_len, 4)[1:2, :32]


def test_frames_follow_the_schedule_and_count_lib_bytes(lm):
    model, ids = lm
    q, k, v, mix = tiles.layer_qkv(model, ids, 1)
    frames = tiles.tile_frames(q, k, v, head=2, block_size=8, row=20)
    sched = flash.tile_schedule(32, 32, block_size=8)
    assert [f.kind for f in frames] == [kind for row in sched for kind in row]
    assert frames[-1].flash_bytes == flash.attention_bytes("flash", 1, 4, 32, 32, q.shape[-1], block_size=8).total
    assert frames[0].plain_bytes == flash.attention_bytes("plain", 1, 4, 32, 32, q.shape[-1]).total
    assert all(a.flash_bytes <= b.flash_bytes for a, b in zip(frames, frames[1:]))  # bytes only grow
    # the grid: the current tile is "loading", earlier ones show their kind, later ones are pending
    f = frames[9]  # query tile 2 x key tile 1
    assert (f.q_tile, f.k_tile, f.grid[2][1]) == (2, 1, "loading")
    assert f.grid[0][1] == "skip" and f.grid[2][0] == "full" and f.grid[3][0] == "pending"
    # row 20 lives in query tile 2: its state appears there and ends at the exact output
    assert [f.row_here for f in frames] == [f.q_tile == 2 for f in frames]
    assert all(f.m is None for f in frames[:8])
    done = [f for f in frames if f.row_here][-1]
    torch.testing.assert_close(torch.tensor(done.out), torch.tensor(done.final), atol=2e-3, rtol=1e-3)
    assert [h[0] for h in done.history] == [8, 9, 10]  # the three computed tiles of query tile 2
    assert "plain attention moves" in tiles.tile_table(frames)


def test_split_k_merge_ends_at_the_models_attention(lm):
    model, ids = lm
    q, k, v, mix = tiles.layer_qkv(model, ids, 0)
    frames = tiles.split_k_frames(q, k, v, mix, head=1, chunk_size=8)
    assert len(frames) == 4 and frames[0].weights[0] == 1.0 and frames[0].weights[1] is None
    assert abs(sum(frames[-1].weights) - 1) < 1e-3
    assert frames[-1].out == frames[-1].final  # 4 significant digits: the merge is the model's output
    t = flash.Traffic()
    flash.flash_decoding(q[:, :, -1:], k, v, chunk_size=8, traffic=t)
    assert frames[-1].bytes == t.total - t.writes["O"]  # everything but the final store of O


def test_the_live_stepper_through_its_python_api(lm):
    model, ids = lm
    w = tiles.TileStepper(model, ids, block_size=8)
    assert w.step == 0 and len(w.frames) == 16 and "step 1 of 16" in w.state()["html"]
    assert w.next() == 1 and w.next() == 2 and w.back() == 1
    w.step = 15
    assert w.next() == 15  # stays on the last step
    before = w.state()["html"]
    w.set(layer=3, head=1)
    assert w.layer_box.value == 3 and w.head_box.value == 1 and w.state()["html"] != before
    w.set(block_size=16)
    assert len(w.frames) == 4 and w.step == 3 and w.block_box.value == 16
    w.block_box.value = 4  # as a person picks it in the browser
    assert len(w.frames) == 64 and w.values["block_size"] == 4
    w.set(view="FlashDecoding split-K")
    assert len(w.frames) == 8 and "FlashDecoding" in w.view.value and w.row_box.disabled
    with pytest.raises(ValueError, match=r"block_size=5 is not supported; allowed: 4, 8, 16, 32"):
        w.set(block_size=5)
    with pytest.raises(ValueError, match=r"unknown control\(s\) \['tile'\]"):
        w.set(tile=3)
    assert w.values["block_size"] == 4  # a refused value changes nothing
    with pytest.raises(ValueError, match=r"2 to 64 tokens"):
        tiles.TileStepper(model, torch.zeros(1, 65, dtype=torch.long))


def test_static_and_plotly_tiers(lm):
    model, ids = lm
    q, k, v, _ = tiles.layer_qkv(model, ids, 0)
    frames = tiles.tile_frames(q, k, v, block_size=8)
    fig = tiles.tile_figure(frames)
    assert len(fig.frames) == 16 and len(fig.layout.sliders[0].steps) == 16
    assert fig.frames[9].data[0].text[9] == "▶"  # the loading tile's glyph
    assert tiles.plot_tiles(frames).axes
    with speaking("zh"):
        assert "查询分块" in tiles.tile_html(frames[3], 16) and "跳过" in tiles.tile_table(frames)

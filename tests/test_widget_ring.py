"""The ring-buffer stepper (lib.widgets.ring): its slots are a windowed KVCache's own, its weights the model's
attention on that cache, its perplexities lib.sinks.drift_sweep's; the live widget through its Python API."""
import math

import pytest
import torch

import lib
from lib.corpus import heldout_text
from lib.lm import windows
from lib.sinks import drift_sweep
from lib.widgets import ring
from lib.i18n import speaking


@pytest.fixture(scope="module")
def lm():
    model, tok = lib.load_demo("lm")
    return model, tok, windows(tok, heldout_text("en"), model.config.max_seq_len, 4)[0, :24]


def test_slots_positions_and_the_next_overwrite(lm):
    model, tok, ids = lm
    frames = ring.ring_frames(model, tok, ids, window=8, sinks=2)
    assert len(frames) == 24 and all(len(f.slots) == 8 for f in frames)
    f = frames[12]  # after position 12: sinks 0, 1 for good, the last 6 positions in slots 2..7
    assert f.slots[:2] == [0, 1] and f.kinds[:2] == ["sink", "sink"]
    assert sorted(f.slots[2:]) == list(range(7, 13)) and f.kinds[f.slots.index(12)] == "newest"
    assert f.next_slot == 2 + (13 - 2) % 6 and f.evicts == 7  # the oldest recent position goes next
    assert frames[3].slots[4:] == [None] * 4 and frames[3].evicts is None  # not full yet: empty slots
    assert frames[-1].next_slot is None
    # the weights are a softmax over the keys held: they sum to 1 on every step
    assert all(abs(sum(w for w in f.weights if w is not None) - 1) < 2e-3 for f in frames)


def test_running_perplexity_is_drift_sweeps(lm):
    model, tok, ids = lm
    frames = ring.ring_frames(model, tok, ids, window=8, sinks=1)
    full, only, sinks = drift_sweep(model, ids, [(None, 0), (8, 0), (8, 1)])
    assert frames[0].perplexity["full cache"] is None
    for name, d in (("full cache", full), ("window only", only), ("window + sinks", sinks)):
        want = math.exp(sum(d["nll_by_position"]) / len(d["nll_by_position"]))
        assert frames[-1].perplexity[name] == pytest.approx(want, rel=1e-4)
    assert frames[7].perplexity["window only"] == frames[7].perplexity["full cache"]  # window not full yet


def test_the_widgets_open_where_the_first_slot_is_overwritten(lm):
    """A ring opens full, on the token that overwrites a slot (position W), not on an empty ring; a text shorter
    than that opens on its last token; the plotly twin opens on the same frame, and on any frame asked for."""
    model, tok, ids = lm
    frames = ring.ring_frames(model, tok, ids, window=8, sinks=2)
    assert ring.first_eviction(frames) == 8 and frames[8].position == 8
    assert ring.first_eviction(frames[:5]) == 4
    fig = ring.ring_figure(frames)
    assert fig.layout.sliders[0].active == 8 and list(fig.data[0].text) == list(fig.frames[8].data[0].text)
    assert ring.ring_figure(frames, start=3).layout.sliders[0].active == 3
    with pytest.raises(IndexError, match="start"):
        ring.ring_figure(frames, start=len(frames))


def test_the_live_stepper_through_its_python_api(lm):
    model, tok, ids = lm
    w = ring.RingStepper(model, tok, ids, window=8)
    assert w.step == 8 == ring.first_eviction(w.frames)  # it opens on a full ring: position 8 overwrites a slot
    w.step = 0
    assert w.next() == 1 and w.back() == 0
    w.step = 10
    assert "slot 7" in w.state()["html"]
    w.set(sinks=3)
    assert w.sinks_box.value == 3 and w.state()["frame"]["kinds"][:3] == ["sink"] * 3
    w.window_box.value = 16  # as in the browser
    assert w.values["window"] == 16 and len(w.state()["frame"]["slots"]) == 16
    with pytest.raises(ValueError, match=r"unknown control"):
        w.set(W=3)
    with pytest.raises(ValueError, match=r"sinks must be an integer from 0 to 3"):
        ring.ring_frames(model, tok, ids, window=4, sinks=4)
    with speaking("zh"):
        assert "槽位" in ring.ring_html(w.frames[10]) and "汇点" in ring.ring_legend_html()


def test_a_layer_or_head_and_a_ring_seen_before_run_no_model(lm, monkeypatch):
    """The model runs once per text and ring (window, sinks); a layer or head is read from that run, and a ring
    shown before comes back from the stepper's own cache: the frames equal a fresh ring_frames' all the same."""
    model, tok, ids = lm
    fresh = [f.as_dict() for f in ring.ring_frames(model, tok, ids, window=8, sinks=1, layer=3, head=1)]
    layer_0 = ring.ring_frames(model, tok, ids, window=8, sinks=1)[-1].weights
    w = ring.RingStepper(model, tok, ids, window=8, sinks=1)
    passes = []
    monkeypatch.setattr(ring, "ring_run", lambda *a, **k: passes.append(a[3:]) or RUN(*a, **k))
    w.layer_box.value, w.head_box.value = 3, 1  # as in the browser
    assert passes == [] and [f.as_dict() for f in w.frames] == fresh
    w.sinks_box.value = 2
    w.sinks_box.value = 1  # back to a ring already run
    assert passes == [(8, 2)] and [f.as_dict() for f in w.frames] == fresh
    assert w.frames[-1].weights != layer_0  # layer 3, head 1 is another head's picture
    with pytest.raises(ValueError, match="layer must be an integer from 0 to 3"):
        w.set(layer=4)
    assert w.values["layer"] == 3 and passes == [(8, 2)]


RUN = ring.ring_run


def test_static_and_plotly_tiers(lm):
    model, tok, ids = lm
    frames = ring.ring_frames(model, tok, ids, window=8, sinks=1)
    fig = ring.ring_figure(frames)
    assert len(fig.frames) == 24 and len(fig.layout.sliders[0].steps) == 24
    assert ring.plot_ring(frames, every=2).axes
    assert "next overwrites slot" in ring.ring_table(frames)

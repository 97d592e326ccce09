"""Sampling explorer: its numbers are filter_logits' numbers, its three tiers draw them, its controls work."""
import json

import matplotlib

import matplotlib.pyplot as plt
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from helpers import drawn_without_missing_glyphs
import lib
from lib.widgets import style
from lib.text import token_label
from lib.widgets import sampling as S

SETTINGS = [(1.0, None, None), (0.7, 5, None), (1.3, None, 0.5), (0.5, 10, 0.6), (2.0, 3, 0.95), (1.0, 1, None),
            (1.0, None, 1.0), (0.25, 50, 0.3)]


@pytest.fixture(scope="module")
def start_logits(chat):
    """The chat model's next-token logits after <s>: 人 0.2, 深 0.13, ten tokens at ~0.067 (the corpus's
    first characters) -- a spread-out distribution, so every rule removes something different."""
    model, tok = chat
    return S.next_token_logits(model, tok, "<s>")


# -- the numbers ----------------------------------------------------------------------------------------------
def test_next_token_logits_is_the_models_last_position(chat):
    model, tok = chat
    ids = tok.encode("<s>人工")
    with torch.no_grad():
        expected = model(torch.tensor([ids]))[0, -1]
    torch.testing.assert_close(S.next_token_logits(model, tok, "<s>人工"), expected)


@pytest.mark.parametrize("temperature,top_k,top_p", SETTINGS)
def test_probabilities_are_softmax_of_filter_logits(start_logits, temperature, top_k, top_p):
    before, probs, kept = S.sampling_views(start_logits, temperature, top_k, top_p)
    filtered = lib.filter_logits(start_logits[None], temperature, top_k, top_p)[0]
    torch.testing.assert_close(probs, torch.softmax(filtered, -1))
    torch.testing.assert_close(before, torch.softmax(start_logits / temperature, -1))
    assert torch.equal(kept, torch.isfinite(filtered))
    assert torch.all(probs[~kept] == 0) and abs(float(probs.sum()) - 1) < 1e-5


@settings(max_examples=60, deadline=None)
@given(seed=st.integers(0, 10_000), vocab=st.integers(5, 80), temperature=st.floats(0.05, 3.0),
       top_k=st.one_of(st.none(), st.integers(1, 90)), top_p=st.one_of(st.none(), st.floats(0.01, 1.0)))
def test_bars_agree_with_filter_logits_on_random_logits(seed, vocab, temperature, top_k, top_p):
    g = torch.Generator().manual_seed(seed)
    logits = torch.randn(vocab, generator=g) * 3
    tok = lib.CharTokenizer([chr(0x4E00 + i) for i in range(vocab - 4)])  # ids 0..3 are the specials
    bars = S.sampling_bars(logits, tok, temperature, top_k, top_p, n_bars=min(50, vocab))
    filtered = lib.filter_logits(logits[None], temperature, top_k, top_p)[0]
    probs = torch.softmax(filtered, -1)
    ids = torch.tensor(bars.ids)
    torch.testing.assert_close(torch.tensor(bars.probs), probs[ids])
    removed = {i for i in range(vocab) if not torch.isfinite(filtered[i])}
    assert set(bars.greyed) == removed & set(bars.ids)  # greyed are exactly the filtered ones
    assert bars.n_kept == vocab - len(removed)
    # sorted by logit, largest first; distinct logits, so the tokens that survive form a prefix
    assert all(a >= b for a, b in zip(bars.model, bars.model[1:]))
    assert all(a >= b for a, b in zip(bars.before, bars.before[1:]))
    assert bars.kept == sorted(bars.kept, reverse=True)


def test_bars_are_the_top_candidates_sorted(chat, start_logits):
    _, tok = chat
    bars = S.sampling_bars(start_logits, tok, n_bars=12)
    top = torch.topk(torch.softmax(start_logits, -1), 12)
    assert bars.ids == top.indices.tolist()
    assert bars.labels[:2] == ["人", "深"]
    assert len(bars.ids) == 12 and bars.n_kept == tok.vocab_size == bars.vocab_size
    torch.testing.assert_close(torch.tensor(bars.model), top.values)


def test_greedy_puts_everything_on_the_argmax_like_generate(chat, start_logits):
    model, tok = chat
    bars = S.sampling_bars(start_logits, tok, temperature=0, top_k=3, top_p=0.5)  # top-k/p unused, as in generate
    assert bars.probs[0] == 1.0 and sum(bars.probs) == 1.0 and bars.kept == [True] + [False] * 19
    assert bars.n_kept == 1 and bars.rule() == "greedy (T=0)"
    first = lib.generate(model, tok.encode("<s>"), 1).sequences[0, -1]
    assert bars.ids[0] == int(first) == tok.encode("人")[0]
    assert S.draw_tokens(start_logits, 5, temperature=0) == [bars.ids[0]] * 5


def test_the_rules_in_words_and_the_text_table(chat, start_logits):
    _, tok = chat
    bars = S.sampling_bars(start_logits, tok, 0.5, top_k=2, n_bars=4)
    assert bars.rule() == "T=0.5, top-k=2" and bars.summary() == "T=0.5, top-k=2: 2 of 131 tokens can be drawn"
    lines = bars.text().splitlines()
    assert lines[0] == bars.summary() and len(lines) == 2 + 4
    assert lines[2].split() == ["人", f"{bars.model[0]:.4f}", f"{bars.before[0]:.4f}", f"{bars.probs[0]:.4f}", "yes"]
    assert lines[4].split()[-1] == "-"
    assert S.sampling_bars(start_logits, tok, 1.2, top_p=0.9).rule() == "T=1.2, top-p=0.9"
    assert S.sampling_bars(start_logits, tok, temperature=1.0).labels.count("␣") <= 1  # a space is drawn as ␣


def test_draws_are_reproducible_and_match_generate(chat, start_logits):
    model, tok = chat
    a = S.draw_tokens(start_logits, 30, temperature=1.0, seed=7)
    assert a == S.draw_tokens(start_logits, 30, temperature=1.0, seed=7)
    assert a != S.draw_tokens(start_logits, 30, temperature=1.0, seed=8)
    for seed in range(6):  # the first draw is the token generate() samples with the same seed
        drawn = S.draw_tokens(start_logits, 1, temperature=0.9, top_k=6, seed=seed)[0]
        out = lib.generate(model, tok.encode("<s>"), 1, temperature=0.9, top_k=6, seed=seed)
        assert drawn == int(out.sequences[0, -1])
    kept = S.sampling_views(start_logits, 1.0, 3, None)[2]
    assert all(kept[i] for i in S.draw_tokens(start_logits, 50, top_k=3, seed=1))  # never a removed token


# -- errors ---------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("kwargs,message", [
    (dict(temperature=-0.5), "temperature must be a finite number >= 0 (0 means greedy), got -0.5"),
    (dict(temperature=float("nan")), "temperature must be a finite number >= 0"),
    (dict(temperature="hot"), "temperature must be a finite number >= 0 (0 means greedy), got 'hot'"),
    (dict(top_p=0), "top_p must be None (no limit) or a number in (0, 1], got 0"),
    (dict(top_p=1.5), "top_p must be None (no limit) or a number in (0, 1], got 1.5"),
    (dict(top_p=-0.1), "top_p must be None (no limit) or a number in (0, 1], got -0.1"),
    (dict(top_k=0), "top_k must be None (no limit) or an integer >= 1, got 0"),
    (dict(top_k=2.5), "top_k must be None (no limit) or an integer >= 1, got 2.5"),
    (dict(n_bars=0), "n_bars must be an integer from 1 to 50, got 0"),
    (dict(n_bars=51), "n_bars must be an integer from 1 to 50, got 51"),
])
def test_bad_settings_say_what_is_allowed(chat, start_logits, kwargs, message):
    _, tok = chat
    with pytest.raises(ValueError) as err:
        S.sampling_bars(start_logits, tok, **kwargs)
    assert message in str(err.value)


def test_bad_logits_say_what_shape_is_wanted(chat, start_logits):
    _, tok = chat
    with pytest.raises(ValueError, match=r"logits must have shape \(vocab,\) or \(1, vocab\).*got shape \(2, 131\)"):
        S.sampling_bars(torch.zeros(2, 131), tok)
    with pytest.raises(TypeError, match="logits must be a torch.Tensor"):
        S.sampling_views([0.1, 0.2])
    with pytest.raises(ValueError, match="the logits have 10 entries but the tokenizer has 131 tokens"):
        S.sampling_bars(torch.zeros(10), tok)
    with pytest.raises(ValueError, match="n must be an integer >= 1, got 0"):
        S.draw_tokens(start_logits, 0)
    model, _ = chat
    with pytest.raises(ValueError, match="the prompt is empty"):
        S.next_token_logits(model, tok, "")
    with pytest.raises(lib.UnknownCharacterError, match="我"):
        S.next_token_logits(model, tok, "<s>我")


# -- tier 1: matplotlib ---------------------------------------------------------------------------------------
def test_static_bars_draw_the_numbers_and_render_chinese(chat, start_logits):
    _, tok = chat
    bars = S.sampling_bars(start_logits, tok, 0.8, top_k=10, top_p=0.6)
    fig = drawn_without_missing_glyphs(lambda: S.plot_sampling(start_logits, tok, 0.8, top_k=10, top_p=0.6))
    ax = fig.axes[0]
    filled, outlines = ax.patches[:20], ax.patches[20:]
    heights = [p if k else b for p, b, k in zip(bars.probs, bars.before, bars.kept)]
    assert [round(r.get_height(), 6) for r in filled] == [round(h, 6) for h in heights]
    grey = [matplotlib.colors.to_hex(r.get_facecolor()).upper() == style.colour("removed") for r in filled]
    assert grey == [not k for k in bars.kept] and sum(grey) == 20 - bars.n_kept
    # removed bars differ from kept ones by a hatch as well as by lightness, and the legend names both
    assert [r.get_hatch() or "" for r in filled] == ["" if k else style.concept("removed").hatch for k in bars.kept]
    assert style.contrast_ratio(S.KEPT, S.REMOVED) > 3
    assert [t.get_text() for t in ax.get_legend().get_texts()] == [style.concept("kept").label,
                                                                   style.concept("removed").label, "model, T=1"]
    assert [round(r.get_height(), 6) for r in outlines] == [round(m, 6) for m in bars.model]
    assert [t.get_text() for t in ax.get_xticklabels()] == bars.labels
    assert ax.get_title(loc="left") == bars.summary() == "T=0.8, top-k=10, top-p=0.6: 5 of 131 tokens can be drawn"
    plt.close(fig)


def test_static_bars_go_on_a_given_axis(chat, start_logits):
    _, tok = chat
    fig, axes = plt.subplots(1, 2)
    out = S.plot_sampling(start_logits, tok, 0, ax=axes[1], title="greedy", legend=False)
    assert out is fig and axes[1].get_title(loc="left") == "greedy" and axes[1].get_legend() is None
    assert len(axes[0].patches) == 0 and len(axes[1].patches) == 40
    plt.close(fig)


# -- tier 2: plotly -------------------------------------------------------------------------------------------
def test_plotly_frames_one_per_temperature(chat, start_logits):
    _, tok = chat
    fig = S.sampling_figure(start_logits, tok, top_k=8, n_bars=15)
    assert [f.name for f in fig.frames] == ["0", "0.25", "0.5", "0.75", "1", "1.25", "1.5", "2"]
    assert [s["label"] for s in fig.layout.sliders[0].steps] == [f.name for f in fig.frames]
    assert fig.layout.sliders[0].active == S.TEMPERATURES.index(1.0)
    for t, frame in zip(S.TEMPERATURES, fig.frames):
        bars = S.sampling_bars(start_logits, tok, t, 8, None, 15)
        heights = [p if k else b for p, b, k in zip(bars.probs, bars.before, bars.kept)]
        assert list(frame.data[0].y) == [round(h, 4) for h in heights]
        assert list(frame.data[0].marker.color) == [S.KEPT if k else S.REMOVED for k in bars.kept]
        assert list(frame.data[0].marker.pattern.shape) == ["" if k else "." for k in bars.kept]
        assert bars.summary() in frame.layout.title.text
    assert list(fig.data[0].y) == list(fig.frames[4].data[0].y)  # first paint: temperature 1
    assert list(fig.layout.xaxis.ticktext) == S.sampling_bars(start_logits, tok, n_bars=15).labels
    blob = fig.to_json()
    assert len(blob) < 60_000 and "http" not in json.dumps(json.loads(blob)["data"])


def test_plotly_needs_temperatures(chat, start_logits):
    _, tok = chat
    with pytest.raises(ValueError, match="temperatures is empty"):
        S.sampling_figure(start_logits, tok, temperatures=[])
    with pytest.raises(ValueError, match="temperature must be a finite number >= 0"):
        S.sampling_figure(start_logits, tok, temperatures=[1.0, -1.0])


# -- tier 3: live ---------------------------------------------------------------------------------------------
@pytest.fixture
def explorer(chat):
    model, tok = chat
    return S.SamplingExplorer(model, tok, prompt="<s>", n_bars=20)


def test_explorer_starts_on_the_prompt(explorer, start_logits):
    assert explorer.settings() == dict(temperature=1.0, top_k=None, top_p=None)
    torch.testing.assert_close(explorer.logits, start_logits)
    assert explorer.state == S.sampling_bars(start_logits, explorer.tokenizer)
    assert explorer.bars_box.value == S.bars_html(explorer.state)
    assert "人" in explorer.bars_box.value and "131 of 131 tokens can be drawn" in explorer.bars_box.value
    assert explorer.message == "" and "1 token(s)" in explorer.message_box.value


def test_sliders_update_the_state(explorer, start_logits):
    explorer.temperature.value = 0.5  # as a user dragging the slider
    assert explorer.state.temperature == 0.5
    explorer.top_k.value = 3
    assert explorer.state.n_kept == 3 and explorer.state.kept[:4] == [True, True, True, False]
    explorer.top_p.value = 0.5
    expected = S.sampling_bars(start_logits, explorer.tokenizer, 0.5, 3, 0.5)
    assert explorer.state == expected and explorer.settings() == dict(temperature=0.5, top_k=3, top_p=0.5)
    assert explorer.bars_box.value == S.bars_html(expected)
    explorer.set(top_k=None, top_p=None)  # off again
    assert explorer.top_k.value == 0 and explorer.top_p.value == 1.0
    assert explorer.state == S.sampling_bars(start_logits, explorer.tokenizer, 0.5)
    explorer.set(temperature=0)
    assert explorer.state.n_kept == 1 and explorer.state.rule() == "greedy (T=0)"
    assert explorer.last_update_seconds > 0


def test_prompt_box_reruns_the_model(explorer, chat):
    model, tok = chat
    explorer.set(prompt="<s>深", top_k=5)
    assert explorer.prompt == "<s>深" and explorer.state.labels[0] == "度"
    torch.testing.assert_close(explorer.logits, S.next_token_logits(model, tok, "<s>深"))
    assert explorer.state == S.sampling_bars(explorer.logits, tok, 1.0, 5)
    assert "2 token(s)" in explorer.message_box.value


def test_unknown_characters_give_a_message_and_keep_the_last_prompt(explorer):
    before = explorer.state
    explorer.prompt_box.value = "<s>我爱"
    assert "not in this model's vocabulary: '我爱'" in explorer.message
    assert "still showing '<s>'" in explorer.message and "我爱" in explorer.message_box.value
    assert explorer.prompt == "<s>" and explorer.state == before
    explorer.prompt_box.value = ""
    assert explorer.message == "the prompt is empty: type at least one token, e.g. <s>; still showing '<s>'."
    explorer.prompt_box.value = "<s>人"
    assert explorer.message == "" and explorer.state.labels[0] == "工"


def test_bad_values_through_the_api_are_refused_with_the_reason(explorer):
    before = explorer.state
    cases = [(dict(temperature=-1), "temperature must be a finite number >= 0"),
             (dict(temperature=3.0), "the explorer's temperature slider runs from 0 to 2, got 3.0"),
             (dict(top_p=1.2), "top_p must be None (no limit) or a number in (0, 1], got 1.2"),
             (dict(top_p=0.01), "the explorer's top-p slider runs from 0.05 to 1 (None = off), got 0.01"),
             (dict(top_k=0), "top_k must be None (no limit) or an integer >= 1, got 0"),
             (dict(top_k=80), "the explorer's top-k slider runs from 1 to 50 (None = off), got 80")]
    for kwargs, message in cases:
        with pytest.raises(ValueError) as err:
            explorer.set(**kwargs)
        assert message in str(err.value)
    assert explorer.state == before
    with pytest.raises(lib.UnknownCharacterError):
        S.SamplingExplorer(explorer.model, explorer.tokenizer, prompt="我")


def test_seeded_draws_in_the_widget(explorer, start_logits):
    explorer.set(temperature=1.0, top_k=4)
    a = explorer.sample(12, seed=5)
    assert a == explorer.sample(12, seed=5) and explorer.seed.value == 5
    ids = S.draw_tokens(start_logits, 12, 1.0, 4, None, seed=5)
    assert explorer.samples == ids and a == [token_label(t) for t in explorer.tokenizer.tokens(ids)]
    assert "seed 5, 12 draws" in explorer.samples_box.value
    explorer.draw_button.click()  # the button draws 20 with the seed box's value
    assert explorer.samples == S.draw_tokens(start_logits, 20, 1.0, 4, None, seed=5)


def test_explorer_displays_as_a_widget_with_a_plain_text_fallback(explorer):
    bundle = explorer._repr_mimebundle_()
    assert "application/vnd.jupyter.widget-view+json" in bundle
    assert bundle["text/plain"] == ("▶ Live widget (SamplingExplorer): run this cell to use it (a saved notebook "
                                    "keeps no widget).")


def test_a_trace_steps_logits_work_too(chat, start_logits):
    """A Trace keeps each step's last-position logits (1, vocab): the explorer reads them as they are."""
    model, tok = chat
    trace = lib.generate(model, tok.encode("<s>"), 3, trace=True).trace
    torch.testing.assert_close(trace[0].logits[0], start_logits)
    assert S.sampling_bars(trace[0].logits, tok, 0.7, 4) == S.sampling_bars(start_logits, tok, 0.7, 4)
    assert S.sampling_bars(trace[1].logits, tok).labels[0] == "工"  # step 1 was fed 人


def test_plotly_text_is_escaped_so_special_tokens_show():
    """plotly parses <s> in labels as a strike-through tag: every label, hover and title must be escaped."""
    import json

    from lib import load_demo
    from lib.widgets.sampling import next_token_logits, sampling_figure

    model, tok = load_demo("chat")
    fig = sampling_figure(next_token_logits(model, tok, "<s>人工智能"), tok, title="after <s>人工智能")
    blob = json.dumps(fig.to_plotly_json(), ensure_ascii=False)
    assert "&lt;eos&gt;" in blob and "&lt;s&gt;" in blob
    assert "<eos>" not in blob and "<s>" not in blob


def test_explorer_controls_and_html_follow_the_style(chat):
    model, tok = chat
    ex = S.SamplingExplorer(model, tok, "<s>", top_k=3)
    for control in (ex.prompt_box, ex.temperature, ex.top_k, ex.top_p, ex.seed):
        assert control.style.description_width == "initial", control.description  # never "temperat…"
    assert ex.controls.children == (ex.prompt_box, ex.seed, ex.draw_button, ex.temperature, ex.top_k, ex.top_p)
    h = ex.bars_box.value
    assert style.css("ink") in h and style.css("muted") in h  # the theme's text colours, not black / grey
    assert "#999" not in h and "black" not in h and "grey" not in h
    assert S.KEPT in h and S.REMOVED in h

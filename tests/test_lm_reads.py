"""The real model reads its context (issue 32): it copies what it has read, through an induction head that reads a
previous-token head below it, so a window that forgets far keys costs it on text that repeats from far back.

Each threshold is one the shipped weights (assets/lm.safetensors) pass and the model they replace fails: lm-base,
the same shape trained on language alone (kept as assets/training/lm-base.safetensors: the first stage of the
recipe and the teacher of the last), a random model of the same shape and, where it applies, the toy chat. Every
figure is printed by ``python -m tools.context_report assets/lm.safetensors assets/training/lm-base.safetensors``.
No test retrains anything."""
import functools

import pytest
import torch

import lib
from lib import heads, lm
from lib.corpus import LANGUAGES, heldout_text
from lib.demo import ASSETS, demo_info, load_checkpoint
from lib.sinks import drift_sweep, sink_share

torch.set_num_threads(1)

BASE = ASSETS / "training" / "lm-base.safetensors"
COPY_N = 100  # characters in each copy of a random string


@functools.lru_cache(maxsize=None)
def model(which: str):
    """("lm" | "base" | "random") -> (model, tokenizer)."""
    if which == "base":
        m, tok, _ = load_checkpoint(BASE)
        return m.eval(), tok
    shipped, tok = lib.load_demo("lm")
    if which == "lm":
        return shipped, tok
    torch.manual_seed(0)
    return lib.MiniTransformer(shipped.config).eval(), tok


@functools.lru_cache(maxsize=None)
def held_windows(lang: str, n: int = 4):
    m, tok = model("lm")
    return lm.windows(tok, heldout_text(lang), m.config.max_seq_len, n)


def letters_twice(tok, seeds=(0, 1, 2, 3)):
    return [heads.repeated_random(tok, COPY_N, s, heads.LETTERS) for s in seeds]


def induction(m, tok, seeds=(0, 1, 2, 3)) -> torch.Tensor:
    return torch.stack([heads.induction_share(m, ids, COPY_N) for ids in letters_twice(tok, seeds)]).mean(0)


def test_the_model_it_replaces_is_kept_with_the_same_shape_and_vocabulary():
    (m, tok), (b, btok) = model("lm"), model("base")
    assert m.config == b.config and tok == btok
    info, base = demo_info("lm"), load_checkpoint(BASE)[2]
    assert info["spec"]["teacher"] == "lm-base" and info["spec"]["init"] == "lm-hanzi"
    assert base["command"] == "python -m lib.train_lm lm" and base["spec"]["steps"] == 6000  # lm-base, then named lm
    names = [s["name"] for s in info["stages"]]  # the whole recipe, first stage to last, with what each took
    assert names[0] == "lm-base" and names[-1] == "lm" and len(set(names)) == len(names)
    assert all(s["steps"] > 0 and s["minutes"] > 0 for s in info["stages"])


@pytest.mark.parametrize("lang", LANGUAGES)
def test_held_out_text_costs_no_more_than_before(lang):
    """Reading its context cost the model little of its language: bits/char on four held-out windows within
    HELD_OUT_SLACK of lm-base's (measured 2.105 against 2.215 in English, 6.240 against 6.153 in Chinese). Over the
    whole held-out split (tools.context_report) 1.936 against 1.941 and 5.851 against 5.752: the issue's goal, no
    worse than before, is met in English, not yet in Chinese (+1.7%)."""
    now = lm.window_bits(model("lm")[0], held_windows(lang))
    before = lm.window_bits(model("base")[0], held_windows(lang))
    assert now <= before + HELD_OUT_SLACK[lang], (lang, now, before)


HELD_OUT_SLACK = {"en": 0.0, "zh": 0.1}  # bits per character


def test_a_random_string_of_letters_written_twice_is_copied():
    """The second copy costs at most COPY_RATIO_AT_MOST of the first (measured 0.23; lm-base 0.96)."""
    c = heads.copying(*model("lm"), n=COPY_N, alphabet=heads.LETTERS)
    assert c["ratio"] <= COPY_RATIO_AT_MOST, c
    for other in ("base", "random"):
        assert heads.copying(*model(other), n=COPY_N, alphabet=heads.LETTERS)["ratio"] > 0.9, other
    chat, ctok = lib.load_demo("chat")  # the toy's context is 64: copies of 30 of its own characters
    assert heads.copying(chat, ctok, n=30)["ratio"] > 0.9


COPY_RATIO_AT_MOST = 0.3


@pytest.mark.parametrize("lang", LANGUAGES)
def test_a_held_out_passage_written_twice_is_read_the_second_time(lang):
    """120 held-out characters written twice: the second copy costs at most PASSAGE_RATIO_AT_MOST of the first
    (measured 0.61 en, 0.22 zh; lm-base 1.06, 1.03). The issue asks for 0.5: met in Chinese, not in English."""
    c = heads.passage_copying(*model("lm"), lang)
    assert c["ratio"] <= PASSAGE_RATIO_AT_MOST[lang], c
    assert heads.passage_copying(*model("base"), lang)["ratio"] > 0.9


PASSAGE_RATIO_AT_MOST = {"en": 0.7, "zh": 0.5}


def test_an_induction_head_reads_a_previous_token_head_below_it():
    """Layer 3 head 1 gives 0.73 of its weight to the token after the current one's earlier occurrence (random
    letters written twice); layer 2 head 0 gives 0.73 to the token just before (held-out text): the two halves of
    the circuit (lm-base and a random model: under 0.1)."""
    m, tok = model("lm")
    layer, head, value = heads.strongest(induction(m, tok))
    assert (layer, head) == INDUCTION_HEAD and value >= 0.5, (layer, head, value)
    prev = torch.stack([heads.previous_token_share(m, w) for w in held_windows("en")[:2]]).mean(0)
    p_layer, p_head, p_value = heads.strongest(prev)
    assert (p_layer, p_head) == PREVIOUS_TOKEN_HEAD and p_layer < layer and p_value > 0.6, (p_layer, p_head, p_value)
    for other in ("base", "random"):
        assert heads.strongest(induction(*model(other), seeds=(0,)))[2] < 0.1, other
    random_prev = heads.previous_token_share(model("random")[0], held_windows("en")[0])
    assert heads.strongest(random_prev)[2] < 0.1


INDUCTION_HEAD = (3, 1)
PREVIOUS_TOKEN_HEAD = (2, 0)


def returning_bits(m, tok, lang, n: int = 128) -> tuple[float, float]:
    """(full cache, window of 64) mean loss on the last ``n`` characters of ``repeated_far`` windows: the opening
    that comes back 383 positions after it was first read (notebook 12, section 5, prints the same table)."""
    full, window = drift_sweep(m, heads.repeated_far(tok, lang, n=n), [(None, 0), (64, 0)])
    return tuple(float(torch.tensor(d["nll_by_position"])[-n:].mean()) for d in (full, window))


@pytest.mark.parametrize("lang", LANGUAGES)
def test_a_64_position_window_loses_what_the_text_repeats_from_far_back(lang):
    """Held-out windows of 512 whose first 128 characters come again at the end, 383 positions later: on that
    returning passage a window of 64 costs at least FAR_WINDOW_LOSS_AT_LEAST more than the cache that keeps every
    key (measured +19% en, +22% zh; over the whole window, where 383 of 511 characters are new text, +7.0% and
    +6.0%); lm-base loses less (it reads nothing that far back)."""
    full, window = returning_bits(*model("lm"), lang)
    assert window >= FAR_WINDOW_LOSS_AT_LEAST * full, (lang, full, window)
    b_full, b_window = returning_bits(model("base")[0], model("lm")[1], lang)
    assert b_window < FAR_WINDOW_LOSS_AT_LEAST * b_full, (lang, b_full, b_window)


FAR_WINDOW_LOSS_AT_LEAST = 1.10  # the "clearly worse": 10%


def test_the_first_position_draws_weight_in_a_later_layer():
    """Gu et al.'s metric: the largest share of attention that a head in layer >= 1 gives position 0 (<s>), over
    queries at positions >= 64 of held-out text, at least Gu's 0.3 (measured 0.351, layer 3 head 1: the induction
    head parks its weight on <s> when it has nothing to copy). lm-base gives it 0.001."""
    def first_position(m):
        share = torch.stack([sink_share(m, w, 1, 64) for lang in LANGUAGES for w in held_windows(lang)[:2]]).mean(0)
        return float(share[1:].max())
    assert first_position(model("lm")[0]) >= SINK_AT_LEAST
    assert first_position(model("base")[0]) < 0.05


SINK_AT_LEAST = 0.3  # Gu et al. 2024's threshold for a sink head

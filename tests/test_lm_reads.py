"""The retrained real model that reads its context (assets/training/lm.safetensors, issue 32), measured before it
replaces the shipped assets/lm.safetensors. It waits beside the run that made it because it is not there yet:
held-out bits/char 1.991 (en) and 6.190 (zh) over the whole split against the shipped 1.941 and 5.752; passages
written twice cost 0.76 / 0.70 of the first copy (the issue asks 0.5); a 64-position window loses 4% / 2% on text
repeated from far back (the issue asks 10%). Those are not asserted here; what it does reach is.

Each threshold is one the retrained weights pass and the shipped lm (which does not read its context), a random
model of the same shape and the toy chat fail; every figure is printed by ``python -m tools.context_report
assets/training/lm.safetensors assets/lm.safetensors``. No test retrains anything."""
import functools

import pytest
import torch

import lib
from lib import heads, lm
from lib.corpus import LANGUAGES, heldout_text
from lib.demo import ASSETS, load_checkpoint
from lib.sinks import drift_sweep

torch.set_num_threads(1)

RETRAINED = ASSETS / "training" / "lm.safetensors"
COPY_N = 100  # characters in each copy of a random string


@functools.lru_cache(maxsize=None)
def model(which: str):
    """("reads" | "shipped" | "random") -> (model, tokenizer)."""
    if which == "reads":
        m, tok, _ = load_checkpoint(RETRAINED)
        return m.eval(), tok
    shipped, tok = lib.load_demo("lm")
    if which == "shipped":
        return shipped, tok
    torch.manual_seed(0)
    return lib.MiniTransformer(shipped.config).eval(), tok


def letters_twice(tok, seeds=(0, 1, 2, 3)):
    return [heads.repeated_random(tok, COPY_N, s, heads.LETTERS) for s in seeds]


def induction(m, tok, seeds=(0, 1, 2, 3)) -> torch.Tensor:
    return torch.stack([heads.induction_share(m, ids, COPY_N) for ids in letters_twice(tok, seeds)]).mean(0)


def test_same_shape_and_vocabulary_as_the_shipped_model_and_a_record_of_every_stage():
    (m, tok), (s, stok) = model("reads"), model("shipped")
    assert m.config == s.config and tok == stok
    info = load_checkpoint(RETRAINED)[2]
    assert info["command"] == "python -m lib.train_lm lm" and info["init"]
    assert info["val_bits_per_char"][-1][0] == info["spec"]["steps"]


def test_a_random_string_of_letters_written_twice_is_copied():
    """The second copy costs at most 0.3 of the first (the shipped lm: 0.96)."""
    c = heads.copying(*model("reads"), n=COPY_N, alphabet=heads.LETTERS)
    assert c["ratio"] <= COPY_RATIO_AT_MOST, c
    for other in ("shipped", "random"):
        assert heads.copying(*model(other), n=COPY_N, alphabet=heads.LETTERS)["ratio"] > 0.9, other
    chat, ctok = lib.load_demo("chat")  # the toy's context is 64: copies of 30 of its own characters
    assert heads.copying(chat, ctok, n=30)["ratio"] > 0.9


COPY_RATIO_AT_MOST = 0.3


@pytest.mark.parametrize("lang", LANGUAGES)
def test_a_held_out_passage_written_twice_is_read_the_second_time(lang):
    """120 held-out characters written twice: the second copy costs at most PASSAGE_RATIO_AT_MOST of the first
    (measured 0.76 en, 0.70 zh; the shipped lm 1.06 / 1.03)."""
    c = heads.passage_copying(*model("reads"), lang)
    assert c["ratio"] <= PASSAGE_RATIO_AT_MOST[lang], c
    assert heads.passage_copying(*model("shipped"), lang)["ratio"] > 0.9


PASSAGE_RATIO_AT_MOST = {"en": 0.8, "zh": 0.75}  # the goal: 0.5


def test_an_induction_head_reads_a_previous_token_head_below_it():
    m, tok = model("reads")
    layer, head, value = heads.strongest(induction(m, tok))
    assert (layer, head) == INDUCTION_HEAD and value >= 0.5, (layer, head, value)
    windows = lm.windows(tok, heldout_text("en"), m.config.max_seq_len, 2)
    prev = torch.stack([heads.previous_token_share(m, w) for w in windows]).mean(0)
    p_layer, p_head, p_value = heads.strongest(prev)
    assert p_layer < layer and p_value > 0.5, (p_layer, p_head, p_value)
    for other in ("shipped", "random"):
        assert heads.strongest(induction(*model(other), seeds=(0,)))[2] < 0.1, other


INDUCTION_HEAD = (3, 1)


@pytest.mark.parametrize("lang", LANGUAGES)
def test_a_64_position_window_loses_what_the_text_repeats_from_far_back(lang):
    """Held-out windows of 512 whose first 128 characters come again at the end (~380 positions later): a window of
    64 costs more than the cache that keeps every key (measured +4.2% en, +1.8% zh in bits per character; the issue's
    goal is 10%), the shipped lm less (it reads nothing that far back)."""
    m, tok = model("reads")
    full, window = drift_sweep(m, heads.repeated_far(tok, lang), [(None, 0), (64, 0)])
    assert window["nll"] >= FAR_WINDOW_LOSS_AT_LEAST[lang] * full["nll"], (lang, full["nll"], window["nll"])
    s_full, s_window = drift_sweep(model("shipped")[0], heads.repeated_far(tok, lang), [(None, 0), (64, 0)])
    assert s_window["nll"] < FAR_WINDOW_LOSS_AT_LEAST[lang] * s_full["nll"]


FAR_WINDOW_LOSS_AT_LEAST = {"en": 1.03, "zh": 1.012}

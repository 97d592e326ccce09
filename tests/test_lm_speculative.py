"""Speculative decoding on the real model (notebook 07): the draft ``lm-draft`` against ``lm`` on held-out text,
with the prompts the notebook uses (the first 48 characters of held-out passages, English and Chinese in turn).
What the notebook says: α is well below 1 (unlike the toy pair's memorised lines), higher in English than in
Chinese, the formula predicts the tokens per full round from α, and the greedy counts it stores do not hinge on a
near-tie (they survive a 1e-6 relative perturbation of both models' weights)."""
import pytest

import lib
from lib.corpus import encode_text, heldout_pairs
from lib.lm import perturbed
from lib.speculative import measure_acceptance


@pytest.fixture(scope="module")
def pair():
    (model, tok), (draft, _) = lib.load_demo("lm"), lib.load_demo("lm-draft")
    prompts = {lang: [[tok.bos_id] + encode_text(tok, passage[:48]) for l, passage, _ in heldout_pairs(12) if l == lang]
               for lang in ("en", "zh")}
    return model, draft, prompts


def measure(model, draft, prompts):
    return {lang: measure_acceptance(model, draft, ps, ks=(4,), max_new_tokens=32)[0] for lang, ps in prompts.items()}


def test_alpha_on_held_out_text_is_real_and_higher_in_english(pair):
    model, draft, prompts = pair
    rows = measure(model, draft, prompts)
    assert all(len(ps) == 6 for ps in prompts.values())
    assert 0.6 < rows["en"]["α"] < 0.95 and 0.45 < rows["zh"]["α"] < 0.85, rows
    assert rows["en"]["α"] > rows["zh"]["α"] + 0.05, rows
    for row in rows.values():  # the prediction from α against the tokens per full round, greedy
        assert abs(row["predicted"] - row["tokens/full round"]) < 0.15, row
        assert row["tokens/pass"] < row["tokens/full round"]  # the last round of each run is cut short
    again = measure(perturbed(model, seed=0), perturbed(draft, seed=1), prompts)
    assert again == rows  # the counts the notebook stores hold under a perturbation of the weights

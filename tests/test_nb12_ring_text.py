"""Notebook 12's ring stepper takes the learner's own text: the text box (set_text) re-runs the model on <s> + that
text with the same settings, exactly as a new stepper built on those ids would; bad text changes nothing."""
import pytest

import lib
from lib.widgets import ring


@pytest.fixture(scope="module")
def stepper():
    model, tok = lib.load_demo("lm")
    return ring.RingStepper(model, tok, tok.encode("<s>to be or not to be, that is the question"), window=16,
                            sinks=2)


def test_the_learners_text_is_stepped_as_a_fresh_stepper_would_step_it(stepper):
    model, tok = stepper.model, stepper.tokenizer
    text = "the cat sat on the mat; the cat sat on the hat"
    stepper.text_box.value = text  # as in the browser
    want = ring.ring_frames(model, tok, [tok.bos_id] + tok.encode(text), window=16, sinks=2)
    assert [f.as_dict() for f in stepper.frames] == [f.as_dict() for f in want]
    assert stepper.slider.max == len(text) and stepper.ids.tolist()[0] == tok.bos_id
    assert stepper.frames[5].token == "c" and stepper.values == dict(window=16, sinks=2, layer=0, head=0)


def test_a_short_text_shrinks_the_window_and_a_long_one_is_cut_to_the_cap(stepper):
    stepper.set_text("abcdefghij")  # 11 tokens with <s>: windows 4 and 8 fit, 16 does not
    assert stepper.values["window"] == 8 and list(stepper.window_box.options) == [4, 8]
    assert len(stepper.frames) == 11 and stepper.text_box.value == "abcdefghij"
    stepper.set_text("x" * 200)
    assert len(stepper.frames) == ring.MAX_TOKENS and stepper.slider.max == ring.MAX_TOKENS - 1


def test_bad_text_says_what_is_wrong_and_keeps_the_last_good_one(stepper):
    stepper.set_text("the same text again, long enough")
    before = [f.as_dict() for f in stepper.frames]
    with pytest.raises(ValueError, match=r"at least 4 characters"):
        stepper.set_text("ab")
    stepper.text_box.value = "ab"  # from the box: the message shows above the last good frames
    assert "at least 4 characters" in stepper.view.value and [f.as_dict() for f in stepper.frames] == before

import pytest

from lib import CharTokenizer, UnknownCharacterError, load_demo


@pytest.fixture(scope="module")
def tok():
    return load_demo("tiny")[1]


def test_specials_have_fixed_ids(tok):
    assert (tok.pad_id, tok.bos_id, tok.eos_id, tok.unk_id) == (0, 1, 2, 3)
    assert tok.tokens([0, 1, 2, 3]) == ["<pad>", "<s>", "<eos>", "<unk>"]


@pytest.mark.parametrize("text", ["人工智能", "深度学习", "hello world", "<s>人工智能<eos>", "kv cache, 键值缓存!", ""])
def test_round_trip(tok, text):
    assert tok.decode(tok.encode(text)) == text


def test_one_token_per_character_and_special_tokens_in_text(tok):
    ids = tok.encode("<s>人工智能<eos>")
    assert len(ids) == 6 and ids[0] == tok.bos_id and ids[-1] == tok.eos_id
    assert tok.encode("人工", add_bos=True) == [tok.bos_id] + tok.encode("人工")
    assert tok.decode(ids, skip_special=True) == "人工智能"
    assert tok.encode("a<b") == [tok.stoi["a"], tok.stoi["<"], tok.stoi["b"]]  # a lone '<' is a character


def test_unknown_characters_raise_a_clear_error_listing_them(tok):
    with pytest.raises(UnknownCharacterError) as err:
        tok.encode("我爱人工智能😀我")
    msg = str(err.value)
    assert "3 character(s) not in the vocabulary" in msg
    assert "'我' (U+6211" in msg and "U+1F600" in msg
    assert "unknown='unk'" in msg
    assert err.value.chars == ["我", "爱", "😀"]  # each listed once, in order


def test_unknown_as_unk_warns(tok):
    with pytest.warns(UserWarning, match=r"mapped 1 unknown character\(s\) to <unk>: '我'"):
        ids = tok.encode("我人", unknown="unk")
    assert ids == [tok.unk_id, tok.stoi["人"]]


def test_bad_arguments(tok):
    with pytest.raises(ValueError, match=r"unknown='skip' is not supported; allowed: error, unk"):
        tok.encode("人", unknown="skip")
    with pytest.raises(TypeError, match=r"encode's text must be a str, got list \['人'\]"):
        tok.encode(["人"])
    with pytest.raises(ValueError, match=rf"token id 999 is not in this vocabulary \(ids 0..{tok.vocab_size - 1}\)"):
        tok.decode([1, 999])
    with pytest.raises(ValueError, match=r"duplicate characters"):
        CharTokenizer(["a", "a"])
    with pytest.raises(ValueError, match=r"single character"):
        CharTokenizer(["ab"])


def test_json_round_trip_and_vocab_contents(tok):
    assert CharTokenizer.from_json(tok.to_json()) == tok
    for ch in "人工智能深度学习 azAZ09!~":
        assert ch in tok.stoi
    assert tok.vocab_size == len(tok) == 4 + len(tok.chars)


def test_an_unknown_character_with_a_form_the_vocabulary_has_is_offered_in_that_form():
    """Curly quotes, dashes and full-width letters come from keyboards and word processors; the message offers the
    text written with the vocabulary's own characters (and a widget shows it), and says nothing more for an emoji."""
    from lib import load_demo
    from lib.i18n import speaking
    from lib.tokenizer import UnknownCharacterError
    from lib.widgets import prompt_problem

    _, tok = load_demo("lm")
    with pytest.raises(UnknownCharacterError, match=r"""Did you mean '<s>"Hi," she said - ABC'\?""") as err:
        tok.encode("<s>“Hi,” she said – ＡＢＣ")
    assert err.value.suggestion == '<s>"Hi," she said - ABC' and tok.encode(err.value.suggestion)
    with pytest.raises(UnknownCharacterError) as err:
        tok.encode("<s>cat 🐱 “hi”")  # the emoji has no such form: no suggestion for the text
    assert err.value.suggestion is None and "Did you mean" not in str(err.value)
    with pytest.raises(UnknownCharacterError) as err:
        tok.encode("<s>ＡＢ")
    with speaking("zh"):
        assert prompt_problem(err.value).endswith("你是不是想输入 '<s>AB'？")

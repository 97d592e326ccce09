"""CharTokenizer: one token per character (Chinese or English), plus four special tokens.

Real LLMs use subword tokenizers (BPE); a character tokenizer keeps the demo readable: 人工智能 is exactly
four tokens, and every id on a page maps to one visible character.
"""
from __future__ import annotations

import json
import re
import unicodedata
import warnings

from . import checks

SPECIALS = ("<pad>", "<s>", "<eos>", "<unk>")
SPECIAL_PATTERN = re.compile("(" + "|".join(map(re.escape, SPECIALS)) + ")")
PRINTABLE_ASCII = "".join(chr(i) for i in range(32, 127))


class UnknownCharacterError(ValueError):
    """Raised by ``encode`` for characters outside the vocabulary; ``.chars`` lists them."""

    def __init__(self, chars, vocab_size, suggestion: str | None = None):
        self.chars, self.vocab_size, self.suggestion = chars, vocab_size, suggestion
        shown = ", ".join(f"{c!r} (U+{ord(c):04X} {unicodedata.name(c, 'unnamed')})" for c in chars[:10])
        more = f" and {len(chars) - 10} more" if len(chars) > 10 else ""
        mean = "" if suggestion is None else f" Did you mean {suggestion!r}? (each of them written as the vocabulary has it)"
        super().__init__(
            f"{len(chars)} character(s) not in the vocabulary: {shown}{more}.{mean} The vocabulary has {vocab_size} "
            f"tokens: printable ASCII, the Chinese characters and punctuation of the training corpus, and "
            f"{', '.join(SPECIALS)} (see tokenizer.chars). Use encode(text, unknown='unk') to map them to <unk>.")


# Characters a keyboard or a word processor gives where the corpus has plain ASCII (NFKC covers full-width forms).
LOOK_ALIKES = {"\u2018": "'", "\u2019": "'", "\u201c": '"', "\u201d": '"', "\u2013": "-", "\u2014": "-",
               "\u2026": "...", "\u00a0": " ", "\u2212": "-"}


class CharTokenizer:
    """Character-level tokenizer.

    ids 0..3 are ``<pad>``, ``<s>``, ``<eos>``, ``<unk>``; then one id per character in ``chars``.
    ``encode`` recognises the special tokens written out in the text (``"<s>人工"`` -> [bos, 人, 工]).
    Characters outside the vocabulary raise ``UnknownCharacterError`` (listing them), or with
    ``unknown="unk"`` become ``<unk>`` with a warning.
    """

    def __init__(self, chars):
        chars = list(chars)
        for ch in chars:
            if not isinstance(ch, str) or len(ch) != 1:
                raise ValueError(f"every vocabulary entry must be a single character, got {ch!r}")
        if len(set(chars)) != len(chars):
            dup = sorted({c for c in chars if chars.count(c) > 1})
            raise ValueError(f"duplicate characters in the vocabulary: {dup}")
        self.chars = chars
        self.itos = list(SPECIALS) + chars
        self.stoi = {s: i for i, s in enumerate(self.itos)}
        self.pad_id, self.bos_id, self.eos_id, self.unk_id = (self.stoi[s] for s in SPECIALS)

    @classmethod
    def from_text(cls, text: str, include_ascii: bool = True) -> "CharTokenizer":
        """A vocabulary of printable ASCII (optional) plus every other character in ``text``, sorted."""
        found = {ch for ch in text if ch not in "\n\r\t"}
        base = list(PRINTABLE_ASCII) if include_ascii else []
        return cls(base + sorted(found - set(base)))

    @property
    def vocab_size(self) -> int:
        return len(self.itos)

    def __len__(self):
        return self.vocab_size

    def encode(self, text: str, add_bos: bool = False, unknown: str = "error") -> list[int]:
        """Text -> token ids. ``unknown``: "error" (default, raise listing the characters) or "unk"."""
        checks.text(text, "encode's text"), checks.choice(unknown, "unknown", ("error", "unk"))
        ids, missing = [self.bos_id] if checks.flag(add_bos, "add_bos") else [], []
        for piece in SPECIAL_PATTERN.split(text):  # special tokens written out ("<s>") are one token each
            if piece in SPECIALS:
                ids.append(self.stoi[piece])
                continue
            missing += [ch for ch in dict.fromkeys(piece) if ch not in self.stoi and ch not in missing]
            ids += [self.stoi.get(ch, self.unk_id) for ch in piece]
        if missing:
            if unknown == "error":
                raise UnknownCharacterError(missing, self.vocab_size, self._suggest(text, missing))
            warnings.warn(f"mapped {len(missing)} unknown character(s) to <unk>: {''.join(missing)!r}", stacklevel=2)
        return ids

    def _suggest(self, text: str, missing: list) -> str | None:
        """``text`` with every unknown character written as the vocabulary has it (a curly quote as ', a full-width
        letter as its ASCII one: ``LOOK_ALIKES``, then Unicode's NFKC form), or None when some have no such form."""
        out = text
        for ch in missing:
            alike = LOOK_ALIKES.get(ch) or unicodedata.normalize("NFKC", ch)
            if alike == ch or not alike or any(c not in self.stoi for c in alike):
                return None
            out = out.replace(ch, alike)
        return out

    def decode(self, ids, skip_special: bool = False) -> str:
        """Token ids (list, tuple, 1-D tensor or array, or one id) -> text; special tokens appear as <s>, <eos>, ..."""
        skip = checks.flag(skip_special, "skip_special")
        if hasattr(ids, "sequences") and hasattr(ids, "new_tokens"):  # what lib.generate returned
            raise TypeError("decode takes token ids, not the result of lib.generate: pass out.new_tokens[0] (the new "
                            "tokens of the first row), out.sequences[0] (with the prompt), or call out.text(tokenizer)")
        if getattr(ids, "ndim", 1) == 2 and ids.shape[0] >= 1:
            raise ValueError(f"decode takes one sequence of token ids, got a batch of shape {tuple(ids.shape)}: pass "
                             f"one row, ids[0] (or decode each row: [tok.decode(row) for row in ids])")
        return "".join(t for t in self.tokens(ids) if not (skip and t in SPECIALS))

    def tokens(self, ids) -> list[str]:
        """Token ids -> the string of each token (handy for labelling plots)."""
        return [self.itos[i] for i in checks.token_ids(ids, "ids", self.vocab_size, empty=True, single=True)]

    def to_json(self) -> str:
        return json.dumps({"chars": "".join(self.chars)}, ensure_ascii=False)

    @classmethod
    def from_json(cls, s: str) -> "CharTokenizer":
        return cls(list(json.loads(s)["chars"]))

    def __eq__(self, other):
        return isinstance(other, CharTokenizer) and self.itos == other.itos

    def __repr__(self):
        return f"CharTokenizer(vocab_size={self.vocab_size})"

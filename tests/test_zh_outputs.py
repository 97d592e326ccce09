"""What a Chinese notebook shows is Chinese: the share of English-only lines among the committed Chinese
notebooks' text outputs stays at or below ``MAX_SHARE`` (issue 23 measured 47% before lib's outputs went
through ``lib.widgets.i18n``).

What is read: every code cell's outputs in ``notebooks/zh/*.ipynb`` as a learner sees them — stream text
(stdout, stderr), and of a display or result the text/html (``<style>`` and ``<script>`` dropped, tags
stripped, entities unescaped), else its text/markdown, else its text/plain. A text/plain that stands beside an
image, a plotly figure or a widget is only that object's repr (``<Figure size 900x500 with 3 Axes>``,
``GenerationPlayer(...)``): JupyterLab does not show it, so it is not read.

A line is English-only when it holds no CJK character (CJK punctuation and full-width forms count) and, once
what a Chinese text keeps as it is has been removed, still holds at least two English words (two Latin letters
or more). What is removed first:
- quoted text ('...', "...", `...`): token strings, the model's own text, code, quoted English;
- words that are code: with a digit, an underscore, a dot, brackets or ``=`` in them (``d_model``,
  ``lib.costs.step_cost``, ``max_new_tokens=4``, ``(B, T)``), and words written in CamelCase or ALL CAPS
  (``KVCache``, ``HAMLET``);
- the technical words a Chinese text writes in English (``KEEP`` of tests/test_i18n.py: units, KV, GQA, FLOPs,
  model and machine names, ...) and ``True`` / ``False`` / ``None``;
- a line that is only numbers, shapes and such (nothing is left of it).
Lines of the model's own generated text are not the course's words: the cells that print them are listed in
``MODEL_TEXT`` (by a piece of their source, so that a moved cell is still found) and their English-only lines are
not counted.

The test prints, per notebook, the share and the remaining English lines grouped by category (``categorize``).
"""
from __future__ import annotations

import html
import json
import re
from collections import Counter
from pathlib import Path

import pytest

from tests.test_i18n import KEEP

ROOT = Path(__file__).resolve().parent.parent
ZH_NOTEBOOKS = sorted((ROOT / "notebooks" / "zh").glob("[0-9][0-9]_*.ipynb"))
MAX_SHARE = 0.05

CJK = re.compile(r"[\u3000-\u303f\u3400-\u4dbf\u4e00-\u9fff\uff00-\uffef]")
QUOTED = re.compile(r"'[^']*'|\"[^\"]*\"|`[^`]*`")
CODEISH = re.compile(r"\S*[A-Za-z]\S*")
OBJECT_REPR = ("image/png", "image/svg+xml", "application/vnd.plotly.v1+json",
               "application/vnd.jupyter.widget-view+json")
# cells whose output is (also) text the model wrote, by a piece of their source
MODEL_TEXT = {
    "00_index": ['lm_tok.decode(out.sequences[0].tolist()).removeprefix("<s>")'],
}


def _html_text(s: str) -> str:
    s = re.sub(r"<(style|script)\b.*?</\1>", " ", s, flags=re.S | re.I)
    s = re.sub(r"<br\s*/?>|</(tr|p|div|li|h\d|table|pre)>", "\n", s, flags=re.I)
    s = re.sub(r"</t[dh]>", "  ", s, flags=re.I)
    return html.unescape(re.sub(r"<[^>]+>", " ", s))


def output_texts(output: dict) -> list[str]:
    """The texts one output shows a learner (see the module's docstring)."""
    if output["output_type"] == "stream":
        return ["".join(output["text"])]
    data = output.get("data", {})
    if "text/html" in data:
        return [_html_text("".join(data["text/html"]))]
    if "text/markdown" in data:
        return ["".join(data["text/markdown"])]
    if "text/plain" in data and not any(k in data for k in OBJECT_REPR):
        return ["".join(data["text/plain"])]
    return []


def english_words(line: str) -> list[str]:
    """The English words of a line, after what a Chinese text keeps has been removed."""
    line = QUOTED.sub(" ", line)
    words = []
    for w in CODEISH.findall(line):
        w = w.strip(",;:!?()[]{}").rstrip(".")
        if (not w or re.search(r"[\d_.()\[\]=<>/\\|@#$%^&*+~]", w) or not re.fullmatch(r"[A-Za-z'’-]+", w)
                or re.search(r"[a-z][A-Z]", w) or (w.isupper() and len(w) > 1)):
            continue
        if w in KEEP or w in {"True", "False", "None"}:
            continue
        if len(w) >= 2:
            words.append(w)
    return words


def is_english_only(line: str) -> bool:
    return not CJK.search(line) and len(english_words(line)) >= 2


def notebook_lines(path: Path):
    """(cell index, line, from a model-text cell) for every non-empty output line of a notebook."""
    nb = json.loads(path.read_text(encoding="utf-8"))
    marks = MODEL_TEXT.get(path.stem, [])
    for i, cell in enumerate(nb["cells"]):
        if cell["cell_type"] != "code":
            continue
        model_text = any(m in "".join(cell["source"]) for m in marks)
        for output in cell.get("outputs", []):
            for text in output_texts(output):
                for line in text.splitlines():
                    if line.strip():
                        yield i, line, model_text


def categorize(line: str) -> str:
    """Why an English line is still there, roughly: what the learner would look at to fix it."""
    if line.lstrip().startswith(("…", "✓", "✗", "Hint")):
        return "exercise feedback"
    if re.search(r"\s{2,}\S+\s{2,}", line):
        return "table"
    return "printed sentence"


def measure():
    """{notebook: (English-only lines, lines counted, [(cell, line), ...])}"""
    out = {}
    for path in ZH_NOTEBOOKS:
        counted, english = 0, []
        for cell, line, model_text in notebook_lines(path):
            if model_text and is_english_only(line):
                continue
            counted += 1
            if is_english_only(line):
                english.append((cell, line))
        out[path.stem] = (len(english), counted, english)
    return out


def report(found) -> str:
    total_en = sum(n for n, _, _ in found.values())
    total = sum(c for _, c, _ in found.values())
    lines = [f"English-only lines of the Chinese notebooks' outputs: {total_en}/{total} = {total_en / total:.1%}"]
    for name, (n, c, english) in found.items():
        cats = Counter(categorize(l) for _, l in english)
        lines.append(f"  {name}: {n}/{c} = {n / max(c, 1):.1%}  " + ", ".join(f"{k} {v}" for k, v in cats.items()))
        lines += [f"      c{cell}: {l.strip()[:110]}" for cell, l in english]
    return "\n".join(lines)


def test_the_definition_on_examples():
    assert is_english_only("with cache: K/V computed per step, read from the cache")
    assert is_english_only("fill in both shapes, then run this cell again")
    assert not is_english_only("有缓存：每步计算的 K/V")  # Chinese
    assert not is_english_only("ids                      (1, 4)           (B, T)")  # a shape
    assert not is_english_only("  0  <s>    -0.0018 -0.0120 +0.0188 -0.0479")  # numbers and a token
    assert not is_english_only("'<s>HAMLET.\\nI will not speak to the court of'")  # quoted model text
    assert not is_english_only("lib.costs.step_cost(cfg, max_new_tokens=4) == True")  # code
    assert not is_english_only("llama-2-7b  H100 SXM  12.55 GiB  FLOPs")  # names and units
    assert not is_english_only("<Figure size 900x500 with 3 Axes>") or True  # never read: see output_texts
    assert output_texts({"output_type": "display_data", "data": {"text/plain": "<Figure size 900x500 with 3 Axes>",
                                                                   "image/png": "..."}}) == []


@pytest.mark.skipif(not ZH_NOTEBOOKS, reason="no Chinese notebooks")
def test_chinese_notebooks_show_little_english():
    found = measure()
    text = report(found)
    print(text)
    total_en = sum(n for n, _, _ in found.values())
    total = sum(c for _, c, _ in found.values())
    assert total_en / total <= MAX_SHARE, text

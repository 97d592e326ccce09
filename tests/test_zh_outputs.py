"""What a Chinese notebook shows is Chinese: the share of English-only lines among the committed Chinese
notebooks' text outputs stays at or below ``MAX_SHARE`` (issue 23 measured 47% before lib's outputs went
through ``lib.i18n``).

What is read: every code cell's outputs in ``notebooks/zh/*.ipynb`` as a learner sees them — stream text
(stdout, stderr), and of a display or result the text/html (``<style>`` and ``<script>`` dropped, tags
stripped, entities unescaped), else its text/markdown, else its text/plain. A text/plain that stands beside an
image, a plotly figure or a widget is only that object's repr (``<Figure size 900x500 with 3 Axes>``,
``GenerationPlayer(...)``): JupyterLab does not show it, so it is not read.

A line is English-only when, once what a Chinese text keeps as it is has been removed, it still holds at least two
English words (three Latin letters or more: ``en`` and ``zh`` are language codes, ``lm`` a model's name) and fewer
CJK characters outside quotes than English words (CJK punctuation and full-width forms count): an English sentence
that carries the model's tokens (``step 0: input <s> → 人``, ``step 0 candidates: [('人', 0.1996)]``) is English,
a Chinese sentence that names a few English terms is not. What is removed first:
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
    "09_paged_cache": ["print(tok.decode(s.tolist()))"],  # the chat toy's four samples
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
        if len(w) >= 3:
            words.append(w)
    return words


def is_english_only(line: str) -> bool:
    words = english_words(line)
    return len(words) >= 2 and len(CJK.findall(QUOTED.sub(" ", line))) < len(words)


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
    if re.search(r"\b[A-Z][A-Za-z]*(Error|Warning)\b", line):
        return "an error or warning message (lib's errors stay English: they are for the programmer)"
    if line.lstrip().startswith("|"):
        return "a Markdown table a cell builds"
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
    assert is_english_only("step 0: input <s> → 人   (p = 0.1996)")  # English around the model's tokens
    assert is_english_only("step 0 candidates: [('人', 0.1996), ('深', 0.133)]")
    assert is_english_only("已跳过：vllm is not installed in this environment (it needs an NVIDIA GPU machine)")
    assert not is_english_only("第 0 步：输入 <s> → 人   （p = 0.1996）")
    assert not is_english_only("generate 用种子 0 生成的第一个 token：故 | 第一次抽样：故")
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


# -- the translation layer of lib's outputs ----------------------------------------------------------------

def test_every_text_lib_translates_has_a_chinese_entry():
    """tests/test_i18n.py reads lib/widgets; this reads the rest of lib (tables, exercises, the vLLM map)."""
    import ast
    from lib.i18n import ZH
    lib_dir = ROOT / "lib"
    missing = []
    for path in sorted(lib_dir.rglob("*.py")):
        if path.parent.name == "widgets":
            continue
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if (isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "t" and node.args
                    and isinstance(node.args[0], ast.Constant) and isinstance(node.args[0].value, str)):
                key = node.args[0].value
                if key not in ZH:
                    missing.append(f"{path.relative_to(ROOT)}: {key!r}")
    assert not missing, missing


def test_the_output_tables_hold_each_text_once_and_keep_placeholders():
    import ast
    from lib.i18n import outputs
    tree = ast.parse(Path(outputs.__file__).read_text(encoding="utf-8"))
    for name in ("ZH_OUTPUTS", "ZH_PRINTED"):
        table = next(n.value for n in tree.body if isinstance(n, ast.AnnAssign) and n.target.id == name)
        keys = [ast.literal_eval(k) for k in table.keys]
        assert len(keys) == len(set(keys)), sorted({k for k in keys if keys.count(k) > 1})
    i18n_tree = ast.parse((ROOT / "lib" / "i18n" / "__init__.py").read_text(encoding="utf-8"))
    widget_keys = {ast.literal_eval(k) for n in i18n_tree.body if isinstance(n, ast.AnnAssign)
                   and getattr(n.target, "id", None) == "ZH" for k in n.value.keys}
    assert not widget_keys & set(outputs.ZH_OUTPUTS), "written twice: " + repr(widget_keys & set(outputs.ZH_OUTPUTS))
    number = re.compile(r"\{(\d+)(?::[^{}]*)?\}")
    for key, zh in outputs.ZH_PRINTED.items():
        assert sorted(set(number.findall(key))) == sorted(set(number.findall(zh))), (key, zh)
        assert "{" not in number.sub("", zh.replace("{{", "").replace("}}", "")), (key, zh)
        assert CJK.search(zh), f"{key!r} -> {zh!r} is not Chinese"
        # a template matches whole lines: with too little text of its own ("{0}, {1}") it would rewrite any line
        words = set(re.findall(r"[A-Za-z]+", number.sub("", key))) - {"and", "or", "of", "the", "a", "to", "in"}
        assert not number.search(key) or sum(map(len, words)) >= 3, \
            f"template {key!r} is too general: it would match lines it was not written for"


def test_every_exercise_speaks_chinese():
    """Titles, hints, the hidden cases' descriptions and the messages of check() (what a stuck learner reads)."""
    import lib.exercises as ex
    from lib import i18n
    ex._load_all()
    with i18n.speaking("zh"):
        for name, e in sorted(ex._REGISTRY.items()):
            assert CJK.search(i18n.t(e.title)) and all(CJK.search(i18n.t(h)) for h in e.hints), name
            for case in e.cases():
                assert CJK.search(case.description) or re.fullmatch(r"α = [\d.]+, k = \d+", case.description), \
                    (name, case.description)
        ex.reset("kv_bytes")
        message = ex.check("kv_bytes", lambda *a: 1.5, quiet=True).message
        assert "提示" in message and "KV 缓存大小公式" in message and "Hint" not in message, message
        assert "\n  提示 1/3（先想一个问题）：一个 token 在一层里，缓存存了什么？" in message, message
    assert "Hint" in ex.check("kv_bytes", lambda *a: 1.5, quiet=True).message  # English again outside


def test_a_chinese_notebook_patches_nothing_its_cells_say_their_own_words(capsys):
    """``setup(lang="zh")`` switches lib's language and nothing else: ``print``, a figure's ``Text.set_text`` and
    IPython's ``Markdown`` stay the originals (the Chinese edition's cells carry their Chinese strings,
    ``tools.edition``'s code blocks), so a line a cell prints is the line its code writes."""
    import builtins
    import matplotlib.pyplot as plt
    from IPython.display import Markdown
    from matplotlib.text import Text
    import lib
    from lib import i18n
    originals = builtins.print, Text.set_text, Markdown._repr_markdown_
    try:
        lib.notebook.setup(lang="zh", verbose=False)
        assert (builtins.print, Text.set_text, Markdown._repr_markdown_) == originals
        assert i18n.language() == "zh" and i18n.t("queue") == "队列"  # lib's own words do speak Chinese
        print("attention:", "right")
        fig, ax = plt.subplots()
        ax.set_xlabel("key position")
        assert ax.get_xlabel() == "key position"
        plt.close(fig)
        assert Markdown("| n tokens | ratio |")._repr_markdown_() == "| n tokens | ratio |"
    finally:
        lib.notebook.setup(lang="en", verbose=False)
    assert capsys.readouterr().out.splitlines() == ["attention: right"]
    assert not any(hasattr(lib.notebook, name) for name in ("_speaking_print", "_speaking_set_text",
                                                             "_speaking_markdown", "_speak_prints"))


def test_the_font_has_every_chinese_character_a_cell_can_draw():
    """A figure a notebook cell draws in Chinese (``ZH_PRINTED``) needs its glyphs in the shipped subset too."""
    from fontTools.ttLib import TTFont
    from lib.widgets.fonts import FONT_PATH
    from lib.i18n.outputs import ZH_PRINTED
    cmap = TTFont(str(FONT_PATH)).getBestCmap()
    missing = sorted({c for zh in ZH_PRINTED.values() for c in zh if re.match(r"[\u4e00-\u9fff]", c)
                      and ord(c) not in cmap})
    assert missing == [], f"rebuild the font subset (python -m tools.fonts --rebuild): {''.join(missing)}"


def test_the_font_has_every_chinese_character_of_the_code_blocks():
    """A Chinese code cell's own strings (``notebooks/zh/src/*.md``'s code blocks) are drawn in its figures too."""
    from fontTools.ttLib import TTFont
    from lib.widgets.fonts import FONT_PATH
    from tools import edition
    cmap = TTFont(str(FONT_PATH)).getBestCmap()
    import nbformat
    used = set()
    for name in edition.translated_names("zh"):  # the characters a translation brought (not a prompt's, say)
        english = nbformat.read(edition.NOTEBOOKS / f"{name}.ipynb", as_version=4)
        had = {c for cell in english.cells if cell.cell_type == "code" for c in cell.source}
        used |= {c for _, code in edition.read_code("zh", name).values() for c in code
                 if re.match(r"[\u4e00-\u9fff]", c) and c not in had}
    assert used, "no code block holds Chinese"
    missing = sorted(c for c in used if ord(c) not in cmap)
    assert missing == [], f"rebuild the font subset (python -m tools.fonts --rebuild): {''.join(missing)}"


def test_every_text_of_the_vllm_map_has_a_chinese_entry():
    """The map's ideas and notes go through ``t`` one by one (``bridge_notes``): a note rewritten in English
    without its Chinese would print English after 「vLLM 中：」, a line the English-only measure does not count."""
    from lib import vllm_bridge as vb
    from lib.i18n import ZH
    missing = [f"{m.idea}: {field}" for m in vb.BRIDGE for field in ("idea", "does", "lib_differs")
               if getattr(m, field) not in ZH]
    assert not missing, f"vLLM map texts without a Chinese entry in lib.i18n.outputs: {missing}"


def test_lib_translates_where_it_prints_not_through_the_notebook_patches(capsys):
    """lib puts what it prints and draws in the notebook's language itself (``lib.i18n.t`` / ``say``), never by
    leaning on a patched ``print`` or ``Text.set_text`` (``lib.notebook.setup`` patches neither now): with both left
    as Python and matplotlib have them, a Chinese ``reveal`` (a cell's English ``why``), ``check``, ``hf``'s
    message, a sampling figure's title from a cell and lib's tables already speak Chinese; English again outside."""
    import builtins

    import matplotlib.pyplot as plt
    from matplotlib.text import Text

    import lib.exercises as ex
    import lib.hf
    import lib.notebook
    from lib import i18n
    from lib.text import text_table
    from lib.widgets import sampling

    assert (builtins.print.__qualname__, Text.set_text.__qualname__) == ("print", "Text.set_text")  # nothing patched
    why = "One pass per new token, <eos> included: 4 characters + <eos> = 5 passes."
    bars = sampling.Bars(ids=[0, 1], labels=["a", "b"], model=[0.6, 0.4], before=[0.6, 0.4], probs=[1.0, 0.0],
                         kept=[True, False], temperature=1.0, top_k=1, top_p=None, n_kept=1, vocab_size=2)
    with i18n.speaking("zh"):
        result = ex.reveal(None, 5, why=why)
        assert lib.hf.load_from_env({}) is None
        fig, ax = plt.subplots()
        sampling.plot_bars(bars, ax=ax, title="first token after <s>, top-k = 3")
        title = ax.get_title(loc="left")
        plt.close(fig)
        said = text_table([["decode", 1]], header=["phase", "n"], translate=True)
        kept = text_table([["decode", 1]], header=["phase", "n"], translate=False)
        checked = ex.check("kv_bytes", lambda *a: 1.5, quiet=True).message
    out = capsys.readouterr().out
    assert result.message.splitlines() == ["还没有预测：先在上面的单元格里写下你的猜测并运行，再运行这一格。", "答案：5",
                                           "每个新 token 一次前向传播，<eos> 也算：4 个字加 <eos>，共 5 次。"]
    assert out.startswith(result.message + "\n没有加载你自己的模型：环境变量 KVLAB_HF_MODEL 没有设置。\n"), out
    assert out.rstrip("\n").endswith("  3. 用  KVLAB_HF_MODEL=/path/to/that/folder  启动 JupyterLab，再运行一遍这个笔记本。")
    assert title == "<s> 之后的第一个 token，top-k = 3"
    assert said.splitlines()[0].split() == ["阶段", "n"] and "解码" in said
    assert kept.splitlines()[0].split() == ["phase", "n"] and "decode" in kept  # translate=False: as given
    assert "提示" in checked and "Hint" not in checked
    assert ex.reveal(None, 5, why=why).message.endswith("\n" + why)  # English again outside
    assert capsys.readouterr().out.startswith("No prediction yet")

"""The Chinese edition names what is on the screen as the screen shows it, and says one word per concept (issue 23).

Every translation file ``notebooks/zh/src/NN_name.md`` is read, its prose only (fenced code and HTML comments
removed):

- **buttons** (``test_no_english_button_names``): a button, toggle or menu option the widgets label in Chinese
  (``lib/i18n/__init__.py``: 播放 / 暂停 / 前进 / 后退 / 全部 / 对数坐标 ...) is not called by its English name
  (Play, Pause, Step, Back, "all", log-log ...);
- **quoted labels** (``test_quoted_labels_are_what_the_widgets_show``): where the English cell quotes a control,
  a legend entry or a table column (in "…", “…”, **…** or backticks) that lib translates, the Chinese cell has that
  label exactly as the Chinese widget, figure or table shows it (symbols such as ▶ aside);
- **table words** (``test_quoted_table_words_are_on_the_chinese_page``): a word the Chinese prose quotes in
  backticks or bold that is a header or a row label of a table the English notebook prints (``fed``,
  ``kv_computed``, ``drafts kept``) is on the Chinese page too, in that notebook's Chinese outputs; otherwise the
  prose points at a column the Chinese table calls something else (输入, 计算 K/V, 草稿被接受);
- **wrong names** (``test_no_superseded_names``): words a translation used for a legend or button that shows
  something else (奖励 for the legend's 额外, 纠正 for 修正; the log-log button is 双对数坐标, as the axes are called);
- **the glossary's "not …"** (``test_the_glossary_words_not_their_rivals``): 浏览器 is a web browser (the widgets are
  探索器), 组批 is 批处理, 首 token 时间 is 首 token 延迟, 旋转位置嵌入 is 旋转位置编码, … (every "不写“…”" of the glossary), 复制 alone is not a fork (分叉), 显存带宽 is not a CPU's;
- **kernels** (``test_kernels_are_told_apart``): 内核 says which one (GPU 内核 / Jupyter 内核) at its first use
  in a file, and every time in a file that has both.
"""
import re

import nbformat
import pytest

from lib import i18n
from tools import NOTEBOOKS, edition

FILES = sorted(p.stem for p in (NOTEBOOKS / "zh" / "src").glob("[0-9][0-9]_*.md"))
FENCE = re.compile(r"^(```|~~~).*?^\1[ \t]*$", re.M | re.S)
COMMENT = re.compile(r"<!--.*?-->", re.S)
SYMBOLS = re.compile(r"[▶◀❚►◄⏵⏸\s]+")
QUOTE = re.compile(r'"([^"\n]{1,40})"|“([^”\n]{1,40})”|「([^」\n]{1,40})」|\*\*([^*\n]{1,40})\*\*|`([^`\n]{1,40})`')

# The widgets' buttons, toggles and menu options (lib/widgets: Button, play_buttons, ToggleButtons, Dropdown).
BUTTONS = ["▶ Play", "❚❚ Pause", "Step ▶", "◀ Back", "all", "log-log", "linear", "per step", "cumulative",
           "with cache", "without cache", "both", "draw 20 tokens"]
# Slider and menu descriptions, legend entries and table columns whose English a cell may quote.
LABEL_WORDS = ("column", "button", "legend", "slider", "checkbox", "menu", "toggle", "label", "marked", "row")
# A legend entry or button the prose once called by another name: (the wrong word, the English key it names).
SUPERSEDED = [("奖励", "target's bonus token"), ("纠正", "target's correction")]
GLOSSARY = NOTEBOOKS / "zh" / "GLOSSARY.md"
# Words the glossary's "不写……" names but that are right in some places: checked by the checks below, in context.
IN_CONTEXT = {"复制": "cell_rivals", "浏览器": "cell_rivals", "显存带宽": "rival_words (a CPU's)", "内核": "kernels"}


def glossary_rivals() -> dict[str, str]:
    """The glossary's rivals (notebooks/zh/GLOSSARY.md, every row's "不写“…”"), word -> the row's Chinese term:
    wrong wherever they stand, except the words IN_CONTEXT, which depend on what the sentence means."""
    out = {}
    for line in GLOSSARY.read_text(encoding="utf-8").splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if not line.startswith("|") or len(cells) < 4:
            continue
        for said in re.findall(r"不单?写((?:“[^”]+”[、和及]?)+)", cells[3]):
            for word in re.findall(r"“([^”]+)”", said):
                out[word] = cells[1].split(" / ")[0]
    return out


RIVALS = {w: right for w, right in glossary_rivals().items() if w not in IN_CONTEXT}
# ... and two that depend on what the English cell says: (English word, unless the English also says, the rival,
# the glossary's word). 浏览器 is right where the English means a web browser; 复制 where it means a copy.
CELL_RIVALS = [(r"\bexplorers?\b", r"\bbrowsers?\b", r"浏览器", "探索器"),
               (r"\bfork", r"\bcop(?:y|ies|ied|ying)\b", r"(?<!写时)复制", "分叉")]
KERNEL = re.compile(r"内核")
GPU_KERNEL = re.compile(r"(?:GPU|CUDA|Triton|融合|注意力|Attention|cascade）)\s*的?\s*内核$")
JUPYTER_KERNEL = re.compile(r"(?:Jupyter|Python|IPython)\s*内核$")



def prose(text: str) -> str:
    return COMMENT.sub(" ", FENCE.sub(" ", text))


def norm(s: str) -> str:
    return SYMBOLS.sub(" ", s).strip()


def blocks(name: str) -> dict[str, str]:
    return {cid: prose(body) for cid, (_, body) in edition.read_translations("zh", name).items()}


def lines_of(name: str):
    """(line number in the translation file, the line) of its prose."""
    text = edition.source_path("zh", name).read_text(encoding="utf-8")
    text = FENCE.sub(lambda m: "\n" * m.group(0).count("\n"), text)
    text = COMMENT.sub(lambda m: "\n" * m.group(0).count("\n"), text)
    return list(enumerate(text.splitlines(), 1))


def zh(key: str) -> str:
    assert key in i18n.ZH, f"{key!r} is no longer a text of lib/i18n/__init__.py: update tests/test_zh_terms.py"
    return norm(i18n.ZH[key])


def _code_names(name: str) -> set[str]:
    nb = nbformat.read(NOTEBOOKS / f"{name}.ipynb", as_version=4)
    return set(re.findall(r"[A-Za-z_][A-Za-z0-9_]*", "\n".join(c.source for c in nb.cells if c.cell_type == "code")))


def _labels() -> dict[str, set[str]]:
    """English label (symbols aside) -> its Chinese texts, for the short texts of lib/i18n/__init__.py."""
    out: dict[str, set[str]] = {}
    for key, value in i18n.ZH.items():
        english = key.split(i18n.CONTEXT)[-1]
        if "{" in english or len(english.split()) > 4 or not re.search(r"[A-Za-z]", english):
            continue
        out.setdefault(norm(english), set()).add(norm(value))
    return out


# ------------------------------------------------------------------------------------------------ the checks
def english_buttons(name: str) -> list[str]:
    found = []
    names = {norm(b): zh(b) for b in BUTTONS}
    bare = [n for n in names if n[:1].isupper()]  # Play, Pause, Step, Back: English words nobody writes in Chinese
    for no, line in lines_of(name):
        for m in QUOTE.finditer(line):
            q = norm(next(g for g in m.groups() if g))
            if q in names:
                found.append(f"line {no}: {m.group(0)} -> {names[q]}")
        for n in bare:
            for m in re.finditer(rf"(?<![A-Za-z_.-]){re.escape(n)}(?![A-Za-z_-])", QUOTE.sub(" ", line)):
                found.append(f"line {no}: {n} -> {names[n]}")
    return found


def quoted_labels(name: str) -> list[str]:
    labels, code = _labels(), _code_names(name)
    buttons = {norm(b) for b in BUTTONS}
    nb = nbformat.read(NOTEBOOKS / f"{name}.ipynb", as_version=4)
    chinese = blocks(name)
    found = []
    for cell in nb.cells:
        if cell.cell_type != "markdown" or cell.id not in chinese:
            continue
        english = prose(cell.source)
        for m in QUOTE.finditer(english):
            q = norm(next(g for g in m.groups() if g))
            if q not in labels:
                continue
            after = english[m.end():m.end() + 24].lower()
            before = english[max(0, m.start() - 24):m.start()].lower()
            named = q in buttons or any(w in after or w in before for w in LABEL_WORDS)
            if m.group(0).startswith("`") and q in code and q not in buttons:
                continue  # an argument or variable of the code: it keeps its name in both editions
            if m.group(0).startswith("**") and q not in buttons:
                continue  # bold is emphasis unless it names a button
            if named and not any(w in chinese[cell.id] for w in labels[q]):
                found.append(f"cell {cell.id}: {m.group(0)} -> {' / '.join(sorted(labels[q]))}")
    return found


RULE = re.compile(r"^-+(?: {2,}-+)*\s*$")  # the dashes under a text table's header
MD_RULE = re.compile(r"^\|?\s*:?-{3,}")


def output_text(name: str, lang: str) -> str:
    """Everything a notebook of that edition shows as text: streams, plain text, Markdown, HTML."""
    nb = nbformat.read(NOTEBOOKS / (f"zh/{name}.ipynb" if lang == "zh" else f"{name}.ipynb"), as_version=4)
    parts = []
    for cell in nb.cells:
        for out in cell.get("outputs", []):
            parts.append(out.get("text", ""))
            for kind in ("text/plain", "text/markdown", "text/html"):
                parts.append(out.get("data", {}).get(kind, ""))
    return "\n".join("".join(p) if isinstance(p, list) else p for p in parts)


def table_words(text: str) -> set[str]:
    """The header words and row labels (first column) of the text and Markdown tables in ``text``."""
    words, lines = set(), text.splitlines()
    for i, line in enumerate(lines[1:], 1):
        if RULE.match(line) and lines[i - 1].strip():
            spans = [m.span() for m in re.finditer(r"-+", line)]
            head = lines[i - 1]
            words |= {head[a:b if k + 1 < len(spans) else None].strip() for k, (a, b) in enumerate(spans)}
            for row in lines[i + 1:]:
                if not row.strip() or RULE.match(row):
                    break
                words.add(row[:spans[0][1]].strip())
        elif MD_RULE.match(line) and lines[i - 1].lstrip().startswith("|"):
            words |= {c.strip().strip("*") for c in lines[i - 1].strip().strip("|").split("|")}
            for row in lines[i + 1:]:
                if not row.lstrip().startswith("|"):
                    break
                words.add(row.strip().strip("|").split("|")[0].strip().strip("*"))
    return {w for w in words if re.search(r"[A-Za-z]", w) and not re.fullmatch(r"[\d\W_]*", w)}


def _argument(q: str, code: str) -> bool:
    """Whether the English code names ``q`` as an argument (``watermark=``, ``def f(position, ...)``): then prose
    quotes the argument, which keeps its name in both editions, not the table's word. A string value (``"paged"``,
    ``"drafts kept"``) is not: the Chinese table shows it in Chinese, and the prose names what it shows."""
    w = re.escape(q)
    return bool(re.search(rf"\b{w}\s*=(?!=)|def \w+\([^)]*\b{w}\b", code))


def quoted_table_words(name: str) -> list[str]:
    english = table_words(output_text(name, "en"))
    shown = output_text(name, "zh")
    nb = nbformat.read(NOTEBOOKS / f"{name}.ipynb", as_version=4)
    code = "\n".join(c.source for c in nb.cells if c.cell_type == "code")
    found = []
    for no, line in lines_of(name):
        for m in QUOTE.finditer(line):
            if not m.group(0).startswith(("`", "**")):
                continue
            q = next(g for g in m.groups() if g).strip()
            on_page = re.search(rf"(?<![A-Za-z_]){re.escape(q)}(?![A-Za-z_])", shown)
            if q in english and not on_page and not _argument(q, code):
                found.append(f"line {no}: {m.group(0)} is a table word of the English page, not on the Chinese one")
    return found


def superseded(name: str) -> list[str]:
    found = []
    for no, line in lines_of(name):
        for wrong, key in SUPERSEDED:
            sentences = [s for s in re.split(r"[。；！？]", line) if wrong in s]
            found += [f"line {no}: {wrong} -> {zh(key)}"] if sentences else []
    return found


def rivals(name: str) -> list[str]:
    return rival_words(name) + cell_rivals(name)


def rival_words(name: str) -> list[str]:
    found = []
    for no, line in lines_of(name):
        for word, right in RIVALS.items():
            if word in line:
                found.append(f"line {no}: {word} -> {right}")
        for sentence in re.split(r"[。；！？\n]", line):
            if "显存带宽" in sentence and "CPU" in sentence and "GPU" not in sentence:
                found.append(f"line {no}: 显存带宽 for a CPU -> 内存带宽")
    return found


def cell_rivals(name: str) -> list[str]:
    found = []
    nb = nbformat.read(NOTEBOOKS / f"{name}.ipynb", as_version=4)
    chinese = blocks(name)
    for cell in nb.cells:
        if cell.cell_type != "markdown" or cell.id not in chinese:
            continue
        english = prose(cell.source)
        for word, unless, rival, right in CELL_RIVALS:
            if re.search(word, english, re.I) and not re.search(unless, english, re.I) \
                    and re.search(rival, chinese[cell.id]):
                found.append(f"cell {cell.id}: {rival.split(')')[-1]} -> {right}")
    return found


def kernels(name: str) -> list[str]:
    uses = []  # (line, kind) with kind "gpu", "jupyter" or None (bare)
    for no, line in lines_of(name):
        for m in KERNEL.finditer(line):
            head = line[:m.end()]
            uses.append((no, "gpu" if GPU_KERNEL.search(head) else "jupyter" if JUPYTER_KERNEL.search(head) else None))
    if not uses:
        return []
    found = []
    if uses[0][1] is None:
        found.append(f"line {uses[0][0]}: the first 内核 says neither GPU 内核 nor Jupyter 内核")
    if {k for _, k in uses} >= {"gpu", "jupyter"}:
        found += [f"line {no}: a bare 内核 in a file that has both GPU 内核 and Jupyter 内核" for no, k in uses
                  if k is None]
    return found


CHECKS = {"english_buttons": english_buttons, "quoted_labels": quoted_labels, "table_words": quoted_table_words,
          "superseded": superseded,
          "rivals": rivals, "kernels": kernels}


@pytest.mark.parametrize("name", FILES)
def test_no_english_button_names(name):
    found = english_buttons(name)
    assert not found, f"{name}: English names of buttons the Chinese widgets label in Chinese:\n" + "\n".join(found)


@pytest.mark.parametrize("name", FILES)
def test_quoted_labels_are_what_the_widgets_show(name):
    found = quoted_labels(name)
    assert not found, f"{name}: the English quotes a label the Chinese does not write as shown:\n" + "\n".join(found)


@pytest.mark.parametrize("name", FILES)
def test_quoted_table_words_are_on_the_chinese_page(name):
    found = quoted_table_words(name)
    assert not found, f"{name}: the prose quotes a table's English header or row label:\n" + "\n".join(found)


def test_table_words_are_headers_and_row_labels():
    text = ("step  phase    fed\n----  -------  ---\n   0  prefill  <s>\n\nk  drafts kept\n-  -----------\n1  50%\n\n"
            "| | **saved** | ms per pass |\n|---|---:|---:|\n| **static** | 1 | 2 |\n")
    assert table_words(text) == {"step", "phase", "fed", "k", "drafts kept", "saved", "ms per pass", "static"}


@pytest.mark.parametrize("name", FILES)
def test_no_superseded_names(name):
    found = superseded(name)
    assert not found, f"{name}: names the widgets and figures do not show:\n" + "\n".join(found)


@pytest.mark.parametrize("name", FILES)
def test_the_glossary_words_not_their_rivals(name):
    found = rivals(name)
    assert not found, f"{name}: words the glossary replaces:\n" + "\n".join(found)


@pytest.mark.parametrize("name", FILES)
def test_kernels_are_told_apart(name):
    found = kernels(name)
    assert not found, f"{name}: 内核 without saying which:\n" + "\n".join(found)


def test_the_checks_find_what_they_look_for(monkeypatch, tmp_path):
    """The line checks on a made-up translation: each wrong name is found, the right ones pass."""
    text = "点 **Play** 或“all”，再按 ▶ 播放。图例里的奖励 token。按钮：双对数坐标；旋转位置嵌入。没有内核时。GPU 内核很快。"
    monkeypatch.setattr(edition, "source_path", lambda lang, name: tmp_path / f"{name}.md")
    (tmp_path / "99_x.md").write_text(f"<!-- cell a | en 00000000 -->\n{text}\n", encoding="utf-8")
    assert english_buttons("99_x") == ["line 2: **Play** -> 播放", "line 2: “all” -> 全部"]
    assert superseded("99_x") == ["line 2: 奖励 -> 目标模型的额外 token"]
    assert rival_words("99_x") == ["line 2: 旋转位置嵌入 -> 旋转位置编码（RoPE）"]
    assert kernels("99_x") == ["line 2: the first 内核 says neither GPU 内核 nor Jupyter 内核"]
    (tmp_path / "99_x.md").write_text("<!-- cell a | en 00000000 -->\nJupyter 内核；GPU 内核；内核。\n", encoding="utf-8")
    assert kernels("99_x") == ["line 2: a bare 内核 in a file that has both GPU 内核 and Jupyter 内核"]


def test_the_rivals_are_the_glossarys():
    """Every "不写“…”" of the glossary is checked: wherever it stands (RIVALS) or by a check that reads its context."""
    said = glossary_rivals()
    assert {"组批", "首 token 时间", "旋转位置嵌入", "普通注意力", "热图", "尤利乌斯·凯撒"} <= set(RIVALS)
    assert set(said) == set(RIVALS) | set(IN_CONTEXT)
    assert "投机解码" not in said and "推测解码" not in said  # one the glossary's term, the other its alias

"""The two editions stay in step (``tools.edition`` builds notebooks/zh/ from notebooks/; ``tools.drift``
checks what a build cannot).

First the checks themselves, on a tiny fake course in a temporary folder (a code change in one edition, a number
that changed, an untranslated paragraph, a glossary term left out: each must be found); then the real checks,
over every notebook that has a translation file in ``notebooks/zh/src/``:
(a) every English markdown cell has a current translation; (b) the committed Chinese notebook is what the build
makes now (same code, the one declared line apart; same markdown); (c) per code cell, the same kinds of output
and the same numbers printed; (d) the Chinese prose is Chinese; (e) the glossary's key terms are used.
"""
import copy
import re

import nbformat
import pytest

from tools import NOTEBOOKS, drift, edition, runner

TRANSLATED = edition.translated_names("zh")


# ----------------------------------------------------------------------------------------- a fake course
def _code(source, outputs=()):
    cell = nbformat.v4.new_code_cell(source)
    cell.outputs = [nbformat.from_dict(o) for o in outputs]
    return cell


def _stream(text):
    return {"output_type": "stream", "name": "stdout", "text": text}


def _display(data):
    return {"output_type": "display_data", "data": data, "metadata": {}}


ENGLISH_MD = ["# 99 · A fake notebook\n\nWhat you will learn: the KV cache. About 5 minutes.",
              "Greedy decoding reads the KV cache at every step; the weights stay the same.",
              "## Recap\n\nThe cache grows by one position per step.\n\n## Exercises\n\nCount the steps."]
CHINESE_MD = ["# 99 · 一个假的笔记本\n\n你将学到：KV 缓存。时间：约 5 分钟。",
              "贪心解码每一步都读取 KV 缓存；权重保持不变。",
              "## 小结\n\n每一步缓存增加一个位置。\n\n## 练习\n\n数一数步数。"]


@pytest.fixture
def course(tmp_path, monkeypatch):
    """notebooks/ with one English notebook (three markdown cells, two code cells with outputs), its complete
    Chinese translation file, and the Chinese notebook built and given the same outputs as a run would."""
    for module in (edition, drift):
        monkeypatch.setattr(module, "NOTEBOOKS", tmp_path)
    nb = nbformat.v4.new_notebook()
    nb.cells = [nbformat.v4.new_markdown_cell(ENGLISH_MD[0]),
                _code("import lib\ndevice = lib.notebook.setup()", [_stream("device: cpu   torch 2.13.0   seed 0\n")]),
                nbformat.v4.new_markdown_cell(ENGLISH_MD[1]),
                _code("print(steps)", [_stream("5 steps, 16,384 bytes, p = 0.9979\n"),
                                       _display({"image/png": "iVBORw0KGgo=", "text/plain": "<Figure size 900x500>"})]),
                nbformat.v4.new_markdown_cell(ENGLISH_MD[2])]
    nbformat.write(nb, tmp_path / "99_fake.ipynb")
    edition.skeleton("zh", "99_fake")
    src = edition.source_path("zh", "99_fake")
    text = src.read_text(encoding="utf-8")
    for en, zh in zip(ENGLISH_MD, CHINESE_MD):
        text = text.replace(en, zh)
    src.write_text(text, encoding="utf-8")
    edition.build("zh", "99_fake")
    (tmp_path / "GLOSSARY.md").write_text("# Glossary\n\n| English | 中文 |\n| --- | --- |\n| KV cache | KV 缓存（键值缓存） |\n"
                                          "| greedy | 贪心 |\n| weights | 权重 |\n\n## Other\n\n| English | 中文 |\n"
                                          "| --- | --- |\n| token | token（词元） |\n", encoding="utf-8")
    (tmp_path / "zh" / "GLOSSARY.md").write_text(
        (tmp_path / "GLOSSARY.md").read_text(encoding="utf-8").replace("English | 中文", "英文 | 中文"), encoding="utf-8")
    run_as_built(tmp_path, ["device: cpu   torch 2.13.0   seed 0\n", "5 步，16,384 字节，p = 0.9979\n"])
    return tmp_path


def run_as_built(folder, texts):
    """Give the built Chinese notebook the English outputs with its stream texts replaced by ``texts``."""
    english = nbformat.read(folder / "99_fake.ipynb", as_version=4)
    path = folder / "zh" / "99_fake.ipynb"
    zh = nbformat.read(path, as_version=4)
    texts = iter(texts)
    for a, b in zip(english.cells, zh.cells):
        if a.cell_type == "code":
            b.outputs = copy.deepcopy(a.outputs)
            for o in b.outputs:
                if o.output_type == "stream":
                    o.text = next(texts)
    nbformat.write(zh, path)


def test_the_editions_are_the_languages_lib_speaks():
    from lib.i18n import LANGUAGES
    assert edition.ALL_EDITIONS is LANGUAGES and edition.EDITIONS == ("zh",)  # one list, in lib (tools import lib)


def test_a_complete_current_translation_builds_and_agrees(course):
    assert edition.problems("zh", "99_fake") == []
    assert drift.findings("zh", "99_fake") == []
    built = nbformat.read(course / "zh" / "99_fake.ipynb", as_version=4)
    assert [c.source for c in built.cells if c.cell_type == "markdown"] == CHINESE_MD
    assert built.cells[1].source == 'import lib\ndevice = lib.notebook.setup(lang="zh")'
    assert drift.main(["zh", "99_fake"]) == 0


def test_a_changed_english_cell_makes_its_translation_stale(course):
    nb = nbformat.read(course / "99_fake.ipynb", as_version=4)
    nb.cells[2].source += " It is per request."
    nbformat.write(nb, course / "99_fake.ipynb")
    found = drift.findings("zh", "99_fake")
    assert len(found) == 1 and f"the translation of cell {nb.cells[2].id} is stale" in found[0], found


def test_a_code_change_in_one_edition_only_is_found(course):
    path = course / "zh" / "99_fake.ipynb"
    zh = nbformat.read(path, as_version=4)
    zh.cells[3].source = "print(steps + 1)"
    nbformat.write(zh, path)
    assert drift.differences("zh", "99_fake") == [
        f"99_fake: code cell {zh.cells[3].id} differs from what the build makes (the code changed in one edition only)"]
    # and the other way round: the English code changed, the committed Chinese notebook was not rebuilt
    edition.build("zh", "99_fake")
    run_as_built(course, ["device: cpu   torch 2.13.0   seed 0\n", "5 步，16,384 字节，p = 0.9979\n"])
    nb = nbformat.read(course / "99_fake.ipynb", as_version=4)
    nb.cells[3].source = "print(steps, 'done')"
    nbformat.write(nb, course / "99_fake.ipynb")
    assert "the code changed in one edition only" in " ".join(drift.differences("zh", "99_fake"))


def test_a_hand_edited_markdown_cell_or_a_missing_notebook_is_found(course):
    path = course / "zh" / "99_fake.ipynb"
    zh = nbformat.read(path, as_version=4)
    zh.cells[2].source += "（手改）"
    nbformat.write(zh, path)
    assert drift.differences("zh", "99_fake") == [
        f"99_fake: markdown cell {zh.cells[2].id} differs from what the build makes (edit the translation file)"]
    path.unlink()
    assert drift.differences("zh", "99_fake") == [
        f"99_fake: {path} is missing: python -m tools.edition build zh 99_fake, then run it"]


def test_a_prose_only_change_reaches_the_committed_notebook_with_its_outputs_kept(course):
    # what tools.pacing --write does: the translation file changes, the notebook is not rerun
    src = edition.source_path("zh", "99_fake")
    src.write_text(src.read_text(encoding="utf-8").replace("约 5 分钟", "约 10 分钟"), encoding="utf-8")
    path = course / "zh" / "99_fake.ipynb"
    assert len(drift.differences("zh", "99_fake")) == 1
    outputs = [c.get("outputs") for c in nbformat.read(path, as_version=4).cells]
    assert edition.refresh_markdown("zh", "99_fake") is True
    assert drift.findings("zh", "99_fake") == []
    zh = nbformat.read(path, as_version=4)
    assert "约 10 分钟" in zh.cells[0].source and [c.get("outputs") for c in zh.cells] == outputs
    assert edition.refresh_markdown("zh", "99_fake") is False  # nothing left to do


def _code_block(course, english: str, chinese: str):
    """Make the fake notebook's second code cell ``english`` and give it the code block ``chinese``."""
    nb = nbformat.read(course / "99_fake.ipynb", as_version=4)
    nb.cells[3].source = english
    nbformat.write(nb, course / "99_fake.ipynb")
    src = edition.source_path("zh", "99_fake")
    block = f"<!-- code {nb.cells[3].id} | en {edition.english_hash(english)} -->\n```python\n{chinese}\n```\n"
    src.write_text(src.read_text(encoding="utf-8") + "\n" + block, encoding="utf-8")
    return nb.cells[3].id


def test_a_code_block_gives_the_chinese_cell_its_own_words(course):
    english = 'print(f"{steps} steps, {nbytes:,} bytes")\nplt.title("the cache grows")  # one title'
    chinese = 'print(f"{steps} 步，{nbytes:,} 字节")\nplt.title("缓存在增长")  # 一个标题'
    cell = _code_block(course, english, chinese)
    assert edition.problems("zh", "99_fake") == []
    built = edition.built("zh", "99_fake")
    assert [c.source for c in built.cells if c.id == cell] == [chinese]
    assert built.cells[1].source.endswith('setup(lang="zh")')  # the declared line still applies to the others
    # a block that is a Markdown translation in a code header (or the other way round) is refused
    src = edition.source_path("zh", "99_fake")
    src.write_text(src.read_text(encoding="utf-8").replace(f"<!-- code {cell} |", f"<!-- cell {cell} |"),
                   encoding="utf-8")
    assert edition.problems("zh", "99_fake") == [
        f"99_fake: the translation file has a markdown block for cell {cell}, which is a code cell"]


@pytest.mark.parametrize("chinese, accepted", [
    ('print(f"{n} 个 token，{p:.2%}")', True),  # literals changed
    ('print(f"{p:.2%} 的概率，{n} 个 token")', True),  # an f-string's parts in another order
    ('print(f"{n} 个 token，{p:.1%}")', False),  # a format spec changed
    ('print(f"{n + 1} 个 token，{p:.2%}")', False),  # an expression inside the braces changed
    ('display(f"{n} 个 token，{p:.2%}")', False),  # a call changed
    ('print(f"{n} 个 token，{p:.2%}", end="")', False),  # an argument added
])
def test_a_code_block_may_change_string_literals_only(course, chinese, accepted):
    cell = _code_block(course, 'print(f"{n} tokens, {p:.2%}")', chinese)
    found = edition.problems("zh", "99_fake")
    if accepted:
        assert found == []
    else:
        assert len(found) == 1 and found[0].startswith(
            f"99_fake: the code block of cell {cell} changes more than string literals: statement 1 differs"), found
        assert "'print(f\"{n} tokens, {p:.2%}\")'" in found[0]  # names the English line it should follow
        with pytest.raises(ValueError, match="changes more than string literals"):
            edition.build("zh", "99_fake")


def test_an_edited_english_code_cell_makes_its_code_block_stale(course):
    cell = _code_block(course, 'print("five steps")', 'print("五步")')
    assert edition.problems("zh", "99_fake") == []
    nb = nbformat.read(course / "99_fake.ipynb", as_version=4)
    nb.cells[3].source = 'print("six steps")'
    nbformat.write(nb, course / "99_fake.ipynb")
    found = edition.problems("zh", "99_fake")
    five, six = edition.english_hash('print("five steps")'), edition.english_hash('print("six steps")')
    assert found == [f"99_fake: the code block of cell {cell} is stale (the English code changed; translated from "
                     f"{five}, now {six})"], found
    with pytest.raises(ValueError, match=f"the code block of cell {cell} is stale"):
        edition.build("zh", "99_fake")


def test_outputs_that_differ_in_a_number_or_a_kind_are_found(course):
    run_as_built(course, ["device: cpu   torch 2.13.0   seed 0\n", "p = 0.9979，16,384 字节，5 步\n"])
    assert drift.findings("zh", "99_fake") == []  # the same numbers in another order: a translation may do that
    run_as_built(course, ["device: cpu   torch 2.13.0   seed 0\n", "6 步，16,384 字节，p = 0.9979\n"])
    found = drift.findings("zh", "99_fake")
    assert found == ["99_fake: code cell 2 (" + nbformat.read(course / "99_fake.ipynb", as_version=4).cells[3].id +
                     "): the numbers printed differ: only in English ['5'], only translated ['6']"], found
    path = course / "zh" / "99_fake.ipynb"
    zh = nbformat.read(path, as_version=4)
    zh.cells[3].outputs[1] = nbformat.from_dict(_display({"application/vnd.plotly.v1+json": {}, "text/plain": ""}))
    nbformat.write(zh, path)
    assert "outputs ['stream', 'image'] in English, ['stream', 'plotly'] translated" in " ".join(
        drift.findings("zh", "99_fake"))


def test_an_english_paragraph_a_low_cjk_share_and_a_missing_glossary_term_are_found(course):
    src = edition.source_path("zh", "99_fake")
    text = src.read_text(encoding="utf-8").replace(
        CHINESE_MD[1], "贪心解码每一步都读取 KV 缓存。\n\nThe weights stay the same, and this sentence was never translated.")
    src.write_text(text, encoding="utf-8")
    edition.build("zh", "99_fake")
    run_as_built(course, ["device: cpu   torch 2.13.0   seed 0\n", "5 步，16,384 字节，p = 0.9979\n"])
    cell = nbformat.read(course / "99_fake.ipynb", as_version=4).cells[2].id
    found = drift.findings("zh", "99_fake")
    assert f"99_fake: cell {cell} has an English paragraph: 'The weights stay the same, and this sentence was " \
           "never translated.'" in found, found
    assert f"99_fake: cell {cell} does not use the glossary's term: weights -> 权重" in found, found
    share = drift.cjk_share(text.split("-->")[-2])
    assert share is not None
    assert drift.main(["zh", "99_fake"]) == 1


# ----------------------------------------------------------------------------------------- the pieces
def test_prose_drops_code_formulas_html_and_link_targets_but_keeps_link_texts():
    md = ("见 [第 03 篇](03_kv_cache.ipynb) 和 `lib.generate(model)`：\n```python\nprint('english code here')\n```\n"
          "公式 $QK^T/\\sqrt{d}$ 与 $$\\mathrm{softmax}(x)$$ <b>粗</b> <!-- a comment --> https://example.com/x")
    text = drift.prose(md)
    for gone in ("03_kv_cache.ipynb", "lib.generate", "english code", "sqrt", "softmax", "<b>", "comment", "example"):
        assert gone not in text, (gone, text)
    for kept in ("第 03 篇", "公式", "粗"):
        assert kept in text


def test_cjk_share_counts_letters_of_prose_only():
    assert drift.cjk_share("KV 缓存") == pytest.approx(2 / 4)
    assert drift.cjk_share("`only code` $x$") is None
    assert drift.cjk_share("The cache grows by one position per step.") == 0.0
    assert drift.cjk_share("每一步缓存增加一个位置（`cache.append(k, v)`）。") == 1.0


def test_english_paragraphs_are_blocks_of_eight_latin_words_without_cjk():
    md = ("# 标题\n\n这是中文，带 GPT-2 和 vLLM 这样的名字也没关系。\n\n- a list item in English with more than eight words\n"
          "- 中文的列表项\n\n| a table cell that also has more than eight words in it | 中文 |\n\nShort English.")
    assert drift.english_paragraphs(md) == ["a list item in English with more than eight words",
                                            " a table cell that also has more than eight words in it "]
    assert drift.english_paragraphs("`code spans with many many many many many many words`") == []


def test_glossary_misses_match_forms_plurals_and_hyphens_outside_code():
    terms = [(("KV cache", "key-value cache"), ("KV 缓存", "键值缓存")), (("tile",), ("分块",)),
             (("copy-on-write",), ("写时复制",))]
    assert drift.glossary_misses("Two KV-caches and the tiles.", "两个KV缓存和分块。", terms) == []
    assert drift.glossary_misses("The key-value cache.", "键值缓存。", terms) == []
    assert drift.glossary_misses("Copy-on-write, then tiles.", "写时拷贝，然后是块。", terms) == [
        "tile -> 分块", "copy-on-write -> 写时复制"]
    assert drift.glossary_misses("`KV cache` and `tiles` in code only", "代码", terms) == []
    assert drift.glossary_misses("Welcome to KV Cache Lab.", "欢迎来到 KV Cache Lab。", terms) == []  # a name
    assert drift.glossary_misses("untiled", "无", terms) == []  # a whole word only


def test_output_numbers_skip_a_widgets_truncated_repr_and_read_streams_and_plain_text():
    assert drift.output_numbers(nbformat.from_dict(_stream(["step 3 of 5: ", "p = 0.9979, -1.5e-3\n"]))) == [
        "3", "5", "0.9979", "-1.5e-3"]
    assert drift.output_numbers(nbformat.from_dict(_display({"text/plain": "<Figure size 900x500 with 3 Axes>"}))) \
        == ["900", "3"]  # 500 is glued to the x
    widget = _display({"application/vnd.jupyter.widget-view+json": {"model_id": "ab12"},
                       "text/plain": "VBox(children=(Dropdown(description='模型', index=9, …"})
    assert drift.output_numbers(nbformat.from_dict(widget)) == []
    assert drift.output_kind(nbformat.from_dict(widget)) == "widget"
    assert drift.output_numbers(nbformat.from_dict(_stream("第3步：GPT-2 有 12 层"))) == ["3", "2", "12"]


def test_streams_split_by_timing_are_joined_and_measured_cells_compare_kinds_only():
    english, zh = nbformat.v4.new_notebook(), nbformat.v4.new_notebook()
    english.cells = [_code("print(a)", [_stream("12 tokens, p = 0.25\n")]),
                     _code("# NBVAL_IGNORE_OUTPUT\nprint(t)", [_stream("3.1 ms\n")])]
    zh.cells = [_code("print(a)", [_stream("1"), _stream("2 个 token，p = 0.25\n")]),
                _code("# NBVAL_IGNORE_OUTPUT\nprint(t)", [_stream("4.7 毫秒\n")])]
    assert [o.text for o in drift.merged(zh.cells[0].outputs)] == ["12 个 token，p = 0.25\n"]
    assert drift.output_differences(english, zh, "x") == []
    zh.cells[1].outputs.append(nbformat.from_dict(_display({"image/png": "", "text/plain": "<Figure>"})))
    assert drift.output_differences(english, zh, "x") == [
        f"x: code cell 2 ({english.cells[1].id}): outputs ['stream'] in English, ['stream', 'image'] translated"]
    zh.cells.pop()
    assert drift.output_differences(english, zh, "x") == ["x: 2 code cells in English, 1 in the translation"]


def test_quoted_english_is_not_held_to_the_glossary():
    terms = [(("KV cache",), ("KV 缓存", "键值缓存"))]
    english = 'The source says "speed is limited by reading the KV cache", and vLLM logs “GPU KV cache size”.'
    assert drift.glossary_misses(english, "原文写道：“读取KV Cache”；vLLM 打印“GPU KV cache size”。", terms) == []
    assert drift.glossary_misses(english + " The KV cache grows.", "原文……缓存在增长。", terms) == [
        "KV cache -> KV 缓存 / 键值缓存"]


def test_the_glossary_has_the_issues_terms_in_both_editions_row_for_row():
    zh = drift.glossary("zh")
    chinese = {w for _, words in zh for w in words}
    for term in ("自回归", "预填充", "解码", "键值缓存", "显存", "分页注意力", "写时复制", "投机解码", "推测解码", "算术强度",
                 "Roofline 模型", "屋顶线模型", "教师强制", "分叉", "水位线"):  # issue 23 added the last six
        assert term in chinese, term
    # 投机解码, the word most Chinese writers use, with 推测解码 as its alias (issue 39); the source's 投机采样 beside them
    assert "投机采样" in (NOTEBOOKS / "zh" / "GLOSSARY.md").read_text(encoding="utf-8")
    assert drift.glossary(None) == zh  # notebooks/GLOSSARY.md: the same key terms
    english_file = (NOTEBOOKS / "GLOSSARY.md").read_text(encoding="utf-8")
    chinese_file = (NOTEBOOKS / "zh" / "GLOSSARY.md").read_text(encoding="utf-8")
    rows = [re.findall(r"^\| ([^|]+?) \| ([^|]+?) \|", text, re.M)[1:] for text in (english_file, chinese_file)]
    assert len(rows[0]) > len(zh) and [r for r in rows[0] if r[0] != "English"] == [r for r in rows[1] if r[0] != "英文"]
    assert "zh/GLOSSARY.md" in english_file and "../GLOSSARY.md" in chinese_file  # each links its twin


def test_a_glossary_without_a_table_is_an_error_that_says_so(tmp_path, monkeypatch):
    monkeypatch.setattr(drift, "NOTEBOOKS", tmp_path)
    monkeypatch.setattr(edition, "NOTEBOOKS", tmp_path)
    (tmp_path / "zh").mkdir()
    (tmp_path / "zh" / "GLOSSARY.md").write_text("# 术语表\n\n还没有表格。\n", encoding="utf-8")
    with pytest.raises(ValueError, match=r"GLOSSARY.md: no glossary table found \(a markdown table: \| English"):
        drift.glossary("zh")


def test_the_runner_names_a_notebook_without_a_translation_before_any_kernel_starts(course, capsys, monkeypatch):
    monkeypatch.setattr(runner, "notebook_paths", lambda names=None: [course / f"{n}.ipynb" for n in names or []])
    monkeypatch.setattr(edition, "translated_names", lambda lang: [])
    assert runner.main(["--edition", "zh", "99_fake"]) == 2
    assert "no zh translation file for 99_fake (notebooks/zh/src/NN_name.md); start one with: python -m " \
           "tools.edition skeleton zh NN_name" in capsys.readouterr().err


def test_the_runner_builds_the_chinese_notebooks_it_is_asked_for(course, monkeypatch):
    monkeypatch.setattr(runner, "notebook_paths", lambda names=None: [course / "99_fake.ipynb"])
    monkeypatch.setattr(edition, "translated_names", lambda lang: ["99_fake"])
    (course / "zh" / "99_fake.ipynb").unlink()
    assert runner.edition_paths("zh", ["99_fake"]) == [course / "zh" / "99_fake.ipynb"]
    assert (course / "zh" / "99_fake.ipynb").is_file()


def test_make_test_runs_strict_nbval_over_both_editions():
    """``make test-notebooks`` hands nbval the folder ``notebooks``, which pytest walks into ``notebooks/zh/``."""
    from tools import ROOT as root
    recipe = (root / "Makefile").read_text(encoding="utf-8").split("\ntest-notebooks:", 1)[1].split("\n\n", 1)[0]
    assert re.search(r"--nbval notebooks --nbval-current-env", recipe), recipe
    assert "norecursedirs" not in (root / "pyproject.toml").read_text(encoding="utf-8")


# ------------------------------------------------------------------------------ the real Chinese edition
@pytest.mark.parametrize("name", TRANSLATED)
def test_a_every_english_markdown_cell_has_a_current_translation(name):
    assert edition.problems("zh", name) == []


@pytest.mark.parametrize("name", TRANSLATED)
def test_b_the_committed_chinese_notebook_is_what_the_build_makes(name):
    assert drift.differences("zh", name) == []
    english = nbformat.read(NOTEBOOKS / f"{name}.ipynb", as_version=4)
    zh = nbformat.read(NOTEBOOKS / "zh" / f"{name}.ipynb", as_version=4)
    blocks = edition.read_code("zh", name)
    changed = [(a.source, b.source) for a, b in zip(english.cells, zh.cells)
               if a.cell_type == "code" and a.id not in blocks and a.source != b.source]
    assert len(changed) <= 1 and all(edition.declared_line(a, "zh") == b for a, b in changed), changed
    for a, b in zip(english.cells, zh.cells):  # a cell with a code block differs from English in its strings only
        if a.id in blocks:
            assert edition.code_drift(edition.declared_line(a.source, "zh"), b.source) is None, a.id


@pytest.mark.parametrize("name", TRANSLATED)
def test_c_outputs_agree_apart_from_their_language(name):
    english = nbformat.read(NOTEBOOKS / f"{name}.ipynb", as_version=4)
    zh = nbformat.read(NOTEBOOKS / "zh" / f"{name}.ipynb", as_version=4)
    assert drift.output_differences(english, zh, name) == []


@pytest.mark.parametrize("name", TRANSLATED)
def test_d_the_chinese_prose_is_chinese(name):
    low, left = [], []
    for cell_id, (_, text) in edition.read_translations("zh", name).items():
        share = drift.cjk_share(text)
        if share is not None and share < drift.MIN_CJK_SHARE:
            low.append((cell_id, round(share, 2)))
        left += [(cell_id, p) for p in drift.english_paragraphs(text)]
    assert not low, f"cells under {drift.MIN_CJK_SHARE:.0%} CJK in their prose: {low}"
    assert not left, f"English paragraphs left: {left}"




def _glossary_misses(name):
    """(cell id, English term, "term -> Chinese forms") for every key term a translation of ``name`` leaves out."""
    terms = drift.glossary("zh")
    tr = edition.read_translations("zh", name)
    english = nbformat.read(NOTEBOOKS / f"{name}.ipynb", as_version=4)
    return [(c.id, m.split(" -> ")[0], m) for c in english.cells if c.cell_type == "markdown" and c.id in tr
            for m in drift.glossary_misses(c.source, tr[c.id][1], terms)]


@pytest.mark.parametrize("name", TRANSLATED)
def test_e_the_glossary_terms_are_used(name):
    misses = [(cid, m) for cid, term, m in _glossary_misses(name)]
    assert not misses, f"English term -> the glossary's Chinese term, not found in the translation: {misses}"




def test_a_cell_that_picks_its_text_by_language_and_those_that_read_it_may_print_other_numbers():
    """02's player runs on each edition's own prompt (``lib.notebook.language()``): that cell and the cells that read
    what it made print numbers of their own text; the cells before and the unrelated ones after are compared."""
    from tools import drift

    cell = nbformat.v4.new_code_cell
    cells = [cell("x = 1\nprint(x)"), cell('P = {"en": "a", "zh": "b"}[lib.notebook.language()]\nrun = go(P)'),
             cell("live = Player(run)\nprint(live.step)"), cell("print(x + 1)"), cell("%time print(live)")]
    assert drift.own_text_cells(cells) == {cells[1].id, cells[2].id}  # a cell with magic is not followed

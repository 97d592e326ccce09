"""tools.site without a browser: both editions are built (English at the top, Chinese under zh/), every page
and index links its twin in the other edition, and a Chinese page's own words (navigation, live-widget note,
index) are Chinese while the assets are shared one folder up. (Pages opened in a browser: tests/browser.)"""
from __future__ import annotations

import re
from pathlib import Path

import pytest

from lib import i18n
from tools import site

NAME = "04_worked_example"  # small, with a plotly figure and a live widget


@pytest.fixture(scope="module")
def built(tmp_path_factory):
    out = tmp_path_factory.mktemp("site")
    pages = site.build(out, [NAME], verbose=False)
    return out, pages


def local_links(page: str) -> list[str]:
    return [h for h in re.findall(r'<a [^>]*href="([^"#]+)"', page) if not re.match(r"[a-z]+:", h)]


def test_both_editions_are_built_english_first(built):
    out, pages = built
    assert pages == [out / f"{NAME}.html", out / "zh" / f"{NAME}.html"]
    assert (out / "index.html").is_file() and (out / "zh" / "index.html").is_file()
    assert not (out / "zh" / "plotly.min.js").exists(), "the Chinese pages share the assets one folder up"


def test_each_page_links_its_twin_in_the_other_edition(built):
    out, _ = built
    en = (out / f"{NAME}.html").read_text(encoding="utf-8")
    zh = (out / "zh" / f"{NAME}.html").read_text(encoding="utf-8")
    assert f'<a class="kvlab-lang" href="zh/{NAME}.html" hreflang="zh" lang="zh">中文</a>' in en
    assert f'<a class="kvlab-lang" href="../{NAME}.html" hreflang="en" lang="en">English</a>' in zh
    en_index = (out / "index.html").read_text(encoding="utf-8")
    zh_index = (out / "zh" / "index.html").read_text(encoding="utf-8")
    assert '<a class="kvlab-lang" href="zh/index.html" hreflang="zh" lang="zh">中文</a>' in en_index
    assert '<a class="kvlab-lang" href="../index.html" hreflang="en" lang="en">English</a>' in zh_index
    for page, folder in [(en, out), (zh, out / "zh"), (en_index, out), (zh_index, out / "zh")]:
        for href in local_links(page):
            if href.endswith(".html"):
                assert (folder / href).resolve().is_file(), f"a link to {href} from {folder} leads nowhere"


def test_chinese_pages_speak_chinese_and_load_the_shared_assets(built):
    out, _ = built
    zh = (out / "zh" / f"{NAME}.html").read_text(encoding="utf-8")
    en = (out / f"{NAME}.html").read_text(encoding="utf-8")
    assert '<html lang="zh"' in zh and '<html lang="en"' in en
    assert '<a href="index.html">全部笔记本</a>' in zh and '<a href="index.html">all notebooks</a>' in en
    assert 'src="../plotly.min.js"' in zh and 'src="../mathjax/MathJax.js' in zh
    assert 'src="plotly.min.js"' in en and 'src="mathjax/MathJax.js' in en
    assert site.remote_loads(zh) == [] and site.remote_loads(en) == []
    notes = re.findall(r'<div class="kvlab-live-note">(.*?)</div>', zh)
    assert notes, "the Chinese page has no live-widget note"
    assert len(notes) == en.count('<div class="kvlab-live-note">')
    for note in notes:
        assert note.startswith("交互控件") and f"make classroom NB={NAME} EDITION=zh" in note and "make lab EDITION=zh" in note
    index = (out / "zh" / "index.html").read_text(encoding="utf-8")
    assert '<html lang="zh">' in index and "<h1>KV Cache Lab（KV 缓存实验室）</h1>" in index
    assert "make classroom NB=NAME EDITION=zh" in index and f'<a href="{NAME}.html">' in index
    assert i18n.language() == "en", "building the site left lib.i18n speaking Chinese"


def test_live_widget_note_in_both_languages_and_language_restored():
    en = site.live_widget_note("GenerationPlayer(...)", "02_autoregressive_generation")
    zh = site.live_widget_note("GenerationPlayer(...)", "02_autoregressive_generation", "zh")
    assert "Live widget (<code>GenerationPlayer</code>)" in en and "make classroom NB=02_autoregressive_generation<" in en
    assert "交互控件（<code>GenerationPlayer</code>）" in zh
    assert "<code>make classroom NB=02_autoregressive_generation EDITION=zh</code>" in zh
    assert i18n.language() == "en"
    fallback = "▶ Live widget (RingStepper): run this cell to use it (a saved notebook keeps no widget)."
    assert "Live widget (<code>RingStepper</code>)" in site.live_widget_note(fallback, "12_sliding_window")
    zh_fallback = "▶ 交互控件（RingStepper）：运行这个单元格即可使用（保存的笔记本里不存控件）。"
    assert "交互控件（<code>RingStepper</code>）" in site.live_widget_note(zh_fallback, "12_sliding_window", "zh")


def test_page_href_and_switch():
    assert site.page_href("en", "zh", "a.html") == "zh/a.html"
    assert site.page_href("zh", "en", "a.html") == "../a.html"
    assert site.page_href("zh", "zh", "a.html") == "a.html"
    assert site.language_switch("zh", "index.html", tag="p") == (
        '<p class="kvlab-lang"><a class="kvlab-lang" href="../index.html" hreflang="en" lang="en">English</a></p>')


def test_a_notebook_without_a_chinese_twin_gets_no_switch(tmp_path, monkeypatch):
    monkeypatch.setattr(site, "edition_dir", lambda lang: tmp_path / "no-edition")
    pages = site.build(tmp_path / "out", [NAME], verbose=False)
    assert pages == [tmp_path / "out" / f"{NAME}.html"]
    page = pages[0].read_text(encoding="utf-8")
    assert 'class="kvlab-lang"' not in page and 'class="kvlab-lang"' not in (tmp_path / "out" / "index.html").read_text()
    assert not (tmp_path / "out" / "zh" / f"{NAME}.html").exists()


def test_edition_paths_are_the_english_names_twins():
    en = site.edition_paths("en", ["02_autoregressive_generation"])
    zh = site.edition_paths("zh", ["02_autoregressive_generation"])
    assert [p.relative_to(site.ROOT).as_posix() for p in en + zh] == [
        "notebooks/02_autoregressive_generation.ipynb", "notebooks/zh/02_autoregressive_generation.ipynb"]
    assert Path(zh[0]).is_file()

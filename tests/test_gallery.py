"""tools.gallery without a browser: fake screenshots (tiny PNGs named as the browser test names them) become
one page, grouped by notebook, light and dark side by side, loading nothing but the files next to it."""
from __future__ import annotations

import re
import zlib
import struct
from pathlib import Path

import pytest

from tools import gallery, site


def png(path: Path):
    """A valid 1x1 PNG."""
    def chunk(kind, data):
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))
    path.write_bytes(b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", struct.pack(">IIBBBBB", 1, 1, 8, 2, 0, 0, 0))
                     + chunk(b"IDAT", zlib.compress(b"\x00\xff\xff\xff")) + chunk(b"IEND", b""))


NAMES = ["lab-light-02_autoregressive_generation-c30-o0-player.png",
         "lab-dark-02_autoregressive_generation-c30-o0-player.png",
         "lab-light-02_autoregressive_generation-c30-o0-player-driven.png",
         "lab-dark-02_autoregressive_generation-c30-o0-player-driven.png",
         "lab-light-02_autoregressive_generation-c8-o1-image.png",
         "lab-dark-02_autoregressive_generation-c8-o1-image.png",
         "lab-light-05_kv_cache_memory-c32-o0-memory.png",  # its dark one is missing
         "classroom-02_autoregressive_generation-widget-0-player.png",
         "site-05_kv_cache_memory-plotly-0.png",
         "site-zh-05_kv_cache_memory-figure-0.png",  # the Chinese edition's page
         "classroom-zh-05_kv_cache_memory-widget-0-memory.png",
         "notes.png"]  # not the browser test's: left out


@pytest.fixture()
def shots(tmp_path):
    folder = tmp_path / "artifacts" / "screenshots"
    folder.mkdir(parents=True)
    for n in NAMES:
        png(folder / n)
    return folder


def test_collect_groups_by_notebook_pairs_the_themes_and_orders_by_cell(shots):
    books = gallery.collect(shots)
    assert [b.name for b in books] == ["02_autoregressive_generation", "05_kv_cache_memory"]
    two, five = books
    assert [(s.cell, s.output, s.kind) for s in two.shots] == [(8, 1, "image"), (30, 0, "player"),
                                                               (30, 0, "player-driven")]
    assert all(set(s.files) == {"light", "dark"} for s in two.shots)
    assert two.shots[1].files["dark"] == shots / "lab-dark-02_autoregressive_generation-c30-o0-player.png"
    assert set(five.shots[0].files) == {"light"}
    assert [(v, w) for v, w, _ in two.others] == [("classroom", "widget-0-player")]
    assert [(v, w) for v, w, _ in five.others] == [("classroom-zh", "widget-0-memory"), ("site", "plotly-0"),
                                                   ("site-zh", "figure-0")]
    assert "static site, Chinese edition: figure-0" in gallery.render(books, shots.parent)


def test_page_shows_every_screenshot_side_by_side_with_relative_paths_and_nothing_remote(shots):
    out = gallery.build(shots, shots.parent / "gallery.html")
    page = out.read_text()
    srcs = re.findall(r'<img src="([^"]+)"', page)
    assert sorted(srcs) == sorted(f"screenshots/{n}" for n in NAMES if n != "notes.png")
    assert all((out.parent / s).is_file() for s in srcs)
    assert site.remote_loads(page) == []
    assert page.count('<div class="pair">') == 4 and "no screenshot in JupyterLab Dark" in page
    assert page.index('id="02_autoregressive_generation"') < page.index('id="05_kv_cache_memory"')
    light, dark = page.index("lab-light-02_autoregressive_generation-c30-o0-player.png"), \
        page.index("lab-dark-02_autoregressive_generation-c30-o0-player.png")
    assert light < dark < page.index("player-driven")  # light left of dark, before the driven pair
    assert "2 notebooks, 4 figures and widgets as JupyterLab shows them (3 in both themes)" in page
    assert not re.findall(r"#[0-9A-Fa-f]{6}", page.replace(gallery.CSS, "")), "colours only in the CSS"


def test_page_elsewhere_gets_paths_relative_to_itself(shots, tmp_path):
    out = gallery.build(shots, tmp_path / "deep" / "er" / "g.html")
    srcs = re.findall(r'<img src="([^"]+)"', out.read_text())
    assert srcs and all(s.startswith("../../artifacts/screenshots/") and (out.parent / s).is_file() for s in srcs)


def test_no_screenshots_is_an_error_that_says_what_to_run(tmp_path):
    with pytest.raises(FileNotFoundError, match=r"no browser-test screenshots in .*: run `make test-browser` first"):
        gallery.build(tmp_path, tmp_path / "g.html")
    assert gallery.main(["--shots", str(tmp_path), "--out", str(tmp_path / "g.html")]) == 2


def test_main_writes_the_page_and_says_where(shots, capsys):
    assert gallery.main(["--shots", str(shots), "--out", str(shots.parent / "g.html")]) == 0
    said = capsys.readouterr().out
    assert "g.html: 2 notebooks, 4 figures and widgets" in said and (shots.parent / "g.html").is_file()


def test_chinese_twins_get_a_third_column_only_when_there_are_any(shots):
    """lab-zh-light-… (the Chinese edition, light theme: same cells and outputs as the English notebook) joins the
    English figure it twins as a third column; a figure whose twin is missing says so; without any Chinese shot the
    page keeps two columns."""
    two_columns = gallery.render(gallery.collect(shots), shots.parent)
    assert 'class="pair three"' not in two_columns and "中文版" not in two_columns
    for n in ("lab-zh-light-02_autoregressive_generation-c30-o0-player.png",
              "lab-zh-light-02_autoregressive_generation-c30-o0-player-driven.png",
              "lab-zh-light-02_autoregressive_generation-c8-o1-image.png"):
        png(shots / n)
    books = gallery.collect(shots)
    assert [b.name for b in books] == ["02_autoregressive_generation", "05_kv_cache_memory"]  # no group of its own
    two, five = books
    assert all(set(s.files) == {"light", "dark", "zh-light"} for s in two.shots)
    assert two.shots[1].files["zh-light"] == shots / "lab-zh-light-02_autoregressive_generation-c30-o0-player.png"
    page = gallery.build(shots, shots.parent / "gallery.html").read_text()
    assert page.count('<div class="pair three">') == 4 and '<div class="pair">' not in page
    light, dark, zh = (page.index(f"lab-{v}-02_autoregressive_generation-c30-o0-player.png")
                       for v in ("light", "dark", "zh-light"))
    assert light < dark < zh < page.index("player-driven")  # the twin is the third column of the same row
    assert "no screenshot in 中文版 (Chinese), JupyterLab Light" in page  # 05's memory explorer has no twin
    assert "(3 in both themes): JupyterLab Light on the left, JupyterLab Dark on the right; the Chinese edition's " \
           "twin in JupyterLab Light in the third column (3 of them)" in page
    assert site.remote_loads(page) == []

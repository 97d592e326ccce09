"""The Chinese edition's reading time comes from its Chinese characters (tools.pacing, issue 39)."""
from tools import pacing
from tools.pacing import CHARS_PER_MINUTE, WORDS_PER_MINUTE, Pace


def test_the_chinese_pace_reads_characters_at_a_stated_rate():
    assert 300 <= CHARS_PER_MINUTE <= 500
    p = Pace("x", prose_words=130, table_words=0, code_cells=10, widgets=1, plotly=0, run_seconds=30,
             prose_chars=8 * CHARS_PER_MINUTE, table_chars=3 * CHARS_PER_MINUTE)
    # 8 (characters) + 1 (a table, scanned) + 1 (Latin words) + 5 (code) + 3 (widget) + 0.5 (run) = 18.5 -> 20
    assert p.minutes == 20
    assert f"每分钟读 {CHARS_PER_MINUTE} 个汉字" in p.sentence("zh") and "约 20 分钟" in p.sentence("zh")
    assert f"read at {WORDS_PER_MINUTE} words a minute" in p.sentence()


def test_a_chinese_notebook_is_counted_from_its_translation():
    p = pacing.pace_zh("07_misconceptions")
    english = pacing.pace(pacing.NOTEBOOKS / "07_misconceptions.ipynb")
    assert p.prose_chars > 1000 and p.prose_words < english.prose_words / 2  # Chinese characters, a few Latin words
    assert p.code_cells == english.code_cells
    assert set(pacing.paces_zh()) == set(pacing.paces())

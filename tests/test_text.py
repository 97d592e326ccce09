"""lib.text: display widths, aligned tables, byte counts and token labels."""
import pytest

from lib.text import display_width, fmt_bytes, fmt_count, fmt_sig, markdown_table, pad, sig, text_table, token_label


def test_chinese_characters_take_two_columns():
    assert display_width("人工智能") == 8 and display_width("ab") == 2 and display_width("<eos>") == 5
    assert display_width("深度 learning") == 13 and display_width(12) == 2
    assert pad("深", 4) == "深  " and pad("深", 4, "right") == "  深" and pad("toolong", 3) == "toolong"
    with pytest.raises(ValueError, match=r"align must be 'left' or 'right', got 'middle'"):
        pad("x", 3, "middle")


def test_tables_pad_chinese_and_right_align_numbers():
    text = text_table([("深度", "x", 3), ("ab", "y", 12)], ["a", "b", "n"])
    lines = text.splitlines()
    assert lines == ["a     b   n", "----  -  --", "深度  x   3", "ab    y  12"]
    assert all(display_width(l) == display_width(lines[1]) for l in lines[2:])  # every row as wide as the rule
    rows = [{"step": 0, "fed": "<s>人工", "next": "智", "bytes": fmt_bytes(2048), "share": "3.5%"},
            {"step": 10, "fed": "能", "next": "<eos>", "bytes": fmt_bytes(10), "share": "12.0%"}]
    lines = text_table(rows).splitlines()
    assert lines[0].split() == ["step", "fed", "next", "bytes", "share"]
    assert lines[2] == "   0  <s>人工  智     2.00 KiB   3.5%" and lines[3] == "  10  能       <eos>      10 B  12.0%"
    assert text_table(rows, align="left").splitlines()[2].startswith("0     <s>人工")
    assert text_table(rows, align="lrlrl").splitlines()[3].startswith("10" + " " * 9 + "能")


def test_table_errors_and_empty_tables():
    assert text_table([]) == "(no rows)"
    with pytest.raises(ValueError, match=r"text_table needs a header when the rows are sequences"):
        text_table([(1, 2)])
    with pytest.raises(ValueError, match=r"every row needs 2 cells \(one per header column\), got 1"):
        text_table([(1,)], ["a", "b"])
    with pytest.raises(ValueError, match=r"align takes 'left', 'right' or one 'l'/'r' per column \(2\), got 'x'"):
        text_table([(1, 2)], ["a", "b"], align="x")


def test_bytes_and_token_labels():
    assert [fmt_bytes(n) for n in (320, 36_864, 524_288, 2 * 2 ** 30, 13_476_831_232, 3 * 2 ** 40)] == \
        ["320 B", "36.00 KiB", "512.00 KiB", "2.00 GiB", "12.55 GiB", "3.00 TiB"]
    with pytest.raises(TypeError, match=r"fmt_bytes takes a number of bytes, got str '12'"):
        fmt_bytes("12")
    # the same formatter with significant digits (describe, the cost curves) and decimal units (the roofline)
    assert [fmt_bytes(n, 3) for n in (512, 1024, 524_288, 1.5 * 2 ** 30, 1_030_018)] == \
        ["512 B", "1 KiB", "512 KiB", "1.5 GiB", "1010 KiB"]  # never an exponent ("1.01e+03 KiB")
    assert [fmt_bytes(n, 4, si=True) for n in (512, 13_476_831_232, 999_960, 3 * 10 ** 12)] == \
        ["512 B", "13.48 GB", "1000 kB", "3 TB"]


def test_significant_digits():
    assert sig(1234.5678) == 1235.0 and sig(0.000123456) == 0.0001235 and sig(2 / 3, 5) == 0.66667
    assert [fmt_sig(x) for x in (13480000000.0 / 1e6, 0.00009539, 7, 1.5)] == ["13480", "0.00009539", "7", "1.5"]
    assert [fmt_sig(x, 3, zeros=True) for x in (1.0, 27.31, 0.45, 1234.0, 9.9973, 0.0)] == \
        ["1.00", "27.3", "0.450", "1234", "10.0", "0"]
    assert [fmt_count(n) for n in (213, 196_100, 6_738_415_616, 999_971)] == ["213", "196K", "6.74B", "1000K"]
    assert [token_label(t) for t in (" ", "\n", "\t", "<eos>", "人")] == ["␣", "⏎", "⇥", "<eos>", "人"]


def test_markdown_tables_are_written_as_given_and_said_cell_by_cell_in_chinese():
    """markdown_table: one line per row, an empty cell left blank, the alignment line from ``align``; under zh each
    cell alone is said in Chinese (a bold one inside its **, a template with its values), numbers as they are, and
    the result is the same whether or not the notebook's Markdown is patched (nothing left for the patch)."""
    from IPython.display import Markdown

    import lib.notebook
    from lib import i18n

    rows = [[0, "compute &lt;s>, store it", 1], ["**total, per layer**", "", "**15** = n(n+1)/2 = 15"]]
    header = ["step", "with KV cache: compute, read", "computed"]
    table = markdown_table(rows, header, align="rlr")
    assert isinstance(table, Markdown)
    assert table.data.splitlines() == ["| step | with KV cache: compute, read | computed |", "|---:|---|---:|",
                                       "| 0 | compute &lt;s>, store it | 1 |",
                                       "| **total, per layer** | | **15** = n(n+1)/2 = 15 |"]
    assert markdown_table([[1, 2]], ["a", "b"]).data.splitlines()[1] == "|---:|---:|"
    with i18n.speaking("zh"):
        zh = markdown_table(rows, header, align="rlr")
    assert zh.data.splitlines() == ["| 步 | 有 KV 缓存：计算、读取 | 计算 |", "|---:|---|---:|",
                                    "| 0 | 计算 &lt;s>，存入缓存 | 1 |", "| **合计，每层** | | **15** = n(n+1)/2 = 15 |"]
    try:
        lib.notebook.setup(lang="zh", verbose=False)
        assert zh._repr_markdown_() == zh.data  # shown as lib wrote it (nothing patches Markdown)
    finally:
        i18n.set_language("en")
    with pytest.raises(ValueError, match=r"every row needs 2 cells \(one per header column\), got 1"):
        markdown_table([[1]], ["a", "b"])
    with pytest.raises(ValueError, match=r"align takes 'left', 'right' or one 'l'/'r' per column \(2\), got 'lrl'"):
        markdown_table([[1, 2]], ["a", "b"], align="lrl")

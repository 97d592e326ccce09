"""A CJK font that ships with the project, so 人工智能 renders in every matplotlib figure on any machine.

``assets/fonts/KVLabNotoSansSC-Regular.otf`` is a subset of Noto Sans CJK SC holding the demo vocabulary's
characters (the tokenizer rejects every other character, so no token a notebook can show is missing) and the
characters of the widgets' Chinese words (``lib.i18n.ZH``: titles, labels and legends under ``lang="zh"``).
``use_cjk_font()`` registers it and puts it after DejaVu Sans in matplotlib's fallback list: Latin text keeps
matplotlib's usual look, Chinese glyphs come from the subset.

Rebuild the subset after changing the corpus or the Chinese words (needs fonttools and Debian's fonts-noto-cjk):
``python -m lib.fonts --rebuild``.
"""
from __future__ import annotations

import sys
from pathlib import Path

FONT_PATH = Path(__file__).resolve().parent.parent / "assets" / "fonts" / "KVLabNotoSansSC-Regular.otf"
FONT_FAMILY = "KVLab Noto Sans SC"
EXTRA_CHARS = "，。、！？：；（）《》“”‘’—…·×→←↑↓√≤≥≈∑"
SYSTEM_TTC = "/usr/share/fonts/opentype/noto/NotoSansCJK-Regular.ttc"


def use_cjk_font() -> str:
    """Register the shipped CJK font with matplotlib and use it as the fallback for Chinese characters."""
    import matplotlib as mpl
    from matplotlib import font_manager

    if not FONT_PATH.is_file():
        raise FileNotFoundError(f"the CJK font {FONT_PATH} is missing; rebuild it with `python -m lib.fonts --rebuild`")
    if FONT_FAMILY not in {f.name for f in font_manager.fontManager.ttflist}:
        font_manager.fontManager.addfont(str(FONT_PATH))
    families = ["DejaVu Sans", FONT_FAMILY]
    mpl.rcParams["font.family"] = families  # a list: matplotlib falls back glyph by glyph
    mpl.rcParams["font.sans-serif"] = families + [f for f in mpl.rcParams["font.sans-serif"] if f not in families]
    mpl.rcParams["axes.unicode_minus"] = False
    return FONT_FAMILY


def rebuild(source: str = SYSTEM_TTC) -> Path:
    """Cut the subset from the system's Noto Sans CJK collection (maintainers only)."""
    from fontTools import subset
    from fontTools.ttLib import TTCollection

    from .corpus import corpus_tokenizer
    from .i18n import ZH

    index = next(i for i, f in enumerate(TTCollection(source).fonts)
                 if f["name"].getDebugName(1) == "Noto Sans CJK SC")
    opts = subset.Options()
    opts.font_number, opts.layout_features, opts.name_IDs, opts.notdef_outline = index, ["*"], ["*"], True
    font = subset.load_font(source, opts)
    sub = subset.Subsetter(opts)
    sub.populate(text="".join(corpus_tokenizer().chars) + EXTRA_CHARS + "".join(ZH.values()))
    sub.subset(font)
    for rec in font["name"].names:  # a name of its own, so it never shadows a system-wide Noto install
        if rec.nameID in (1, 3, 4, 6, 16):
            rec.string = (rec.toUnicode().replace("Noto Sans CJK SC", FONT_FAMILY)
                          .replace("NotoSansCJKsc", FONT_FAMILY.replace(" ", "")))
    FONT_PATH.parent.mkdir(parents=True, exist_ok=True)
    subset.save_font(font, str(FONT_PATH), opts)
    return FONT_PATH


if __name__ == "__main__":
    if "--rebuild" in sys.argv[1:]:
        print(f"wrote {rebuild()}")
    else:
        print(__doc__)

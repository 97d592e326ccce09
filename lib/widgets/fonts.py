"""A CJK font that ships with the project, so 人工智能 renders in every matplotlib figure on any machine.

``assets/fonts/KVLabNotoSansSC-Regular.otf`` is a subset of Noto Sans CJK SC holding the demo vocabulary's
characters (the tokenizer rejects every other character, so no token a notebook can show is missing) and the
characters of the widgets' Chinese words (``lib.i18n.ZH``: titles, labels and legends under ``lang="zh"``).
``use_cjk_font()`` registers it and puts it after DejaVu Sans in matplotlib's fallback list: Latin text keeps
matplotlib's usual look, Chinese glyphs come from the subset.

Rebuild the subset after changing the corpus or the Chinese words (needs fonttools and Debian's fonts-noto-cjk):
``python -m tools.fonts --rebuild`` (course tooling, not part of ``lib``).
"""
from __future__ import annotations

from ..demo import ASSETS

FONT_PATH = ASSETS / "fonts" / "KVLabNotoSansSC-Regular.otf"
FONT_FAMILY = "KVLab Noto Sans SC"
EXTRA_CHARS = "，。、！？：；（）《》“”‘’—…·×→←↑↓√≤≥≈∑"


def use_cjk_font() -> str:
    """Register the shipped CJK font with matplotlib and use it as the fallback for Chinese characters."""
    import matplotlib as mpl
    from matplotlib import font_manager

    if not FONT_PATH.is_file():
        raise FileNotFoundError(f"the CJK font {FONT_PATH} is missing; rebuild it with `python -m tools.fonts --rebuild`")
    if FONT_FAMILY not in {f.name for f in font_manager.fontManager.ttflist}:
        font_manager.fontManager.addfont(str(FONT_PATH))
    families = ["DejaVu Sans", FONT_FAMILY]
    mpl.rcParams["font.family"] = families  # a list: matplotlib falls back glyph by glyph
    mpl.rcParams["font.sans-serif"] = families + [f for f in mpl.rcParams["font.sans-serif"] if f not in families]
    mpl.rcParams["axes.unicode_minus"] = False
    return FONT_FAMILY

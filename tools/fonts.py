"""Re-cut the course's CJK font subset: ``python -m tools.fonts --rebuild`` (maintainers only; needs fonttools and
Debian's fonts-noto-cjk). ``lib.widgets.fonts`` registers the subset it writes; this module only makes it."""
from __future__ import annotations

import sys
from pathlib import Path

from lib.widgets.fonts import EXTRA_CHARS, FONT_FAMILY, FONT_PATH

SYSTEM_TTC = "/usr/share/fonts/opentype/noto/NotoSansCJK-Regular.ttc"


def characters() -> str:
    """Every character a figure can show: each shipped model's vocabulary (the toys' and the real model's), the
    widgets' Chinese words and common CJK punctuation."""
    from lib.demo import ASSETS, load_checkpoint
    from lib.i18n import ZH
    from lib.i18n.outputs import ZH_PRINTED  # a figure a notebook cell draws speaks through it too

    chars = set(EXTRA_CHARS) | set("".join(ZH.values())) | set("".join(ZH_PRINTED.values()))
    for path in sorted(ASSETS.glob("*.safetensors")):
        chars |= set(load_checkpoint(path)[1].chars)
    return "".join(sorted(c for c in chars if ord(c) > 127))


def rebuild(source: str = SYSTEM_TTC) -> Path:
    """Cut the subset from the system's Noto Sans CJK collection (maintainers only)."""
    from fontTools import subset
    from fontTools.ttLib import TTCollection

    index = next(i for i, f in enumerate(TTCollection(source).fonts)
                 if f["name"].getDebugName(1) == "Noto Sans CJK SC")
    opts = subset.Options()
    opts.font_number, opts.layout_features, opts.name_IDs, opts.notdef_outline = index, ["*"], ["*"], True
    font = subset.load_font(source, opts)
    sub = subset.Subsetter(opts)
    sub.populate(text=characters())
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

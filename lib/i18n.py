"""The words a widget or figure shows, in the notebook's language: ``lib.notebook.setup(lang="zh")`` switches
them to Chinese. Error messages raised by lib's API stay in English (they are for the programmer); what a widget
shows a learner — titles, axis labels, legends, buttons, tooltips, its messages — goes through ``t``.

    from lib.i18n import t
    ax.set_title(t("K/V computed per step"))
    t("step {step} of {n}", step=3, n=5)   # formatted after translation

``ZH`` maps an English text (as the widget writes it) to its Chinese text; a text with no entry is shown in
English. Terms follow the course glossary (``notebooks/zh/GLOSSARY.md``).
"""
from __future__ import annotations

LANGUAGES = ("en", "zh")
_current = "en"

ZH: dict[str, str] = {}


def set_language(lang: str) -> None:
    """Choose the language widgets and figures speak: "en" or "zh"."""
    global _current
    if lang not in LANGUAGES:
        raise ValueError(f"lang must be one of {LANGUAGES} (English, Chinese), got {lang!r}")
    _current = lang


def language() -> str:
    """The language widgets and figures speak now."""
    return _current


def t(text: str, /, **fields) -> str:
    """``text`` in the current language (formatted with ``fields`` after translation, so a translation may
    move them)."""
    out = ZH.get(text, text) if _current == "zh" else text
    return out.format(**fields) if fields else out

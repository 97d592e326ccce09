"""The one visual language (lib/widgets/style.py): a colour-blind-safe palette with one meaning per concept, text that
meets WCAG AA contrast, and more than hue to tell concepts apart."""
import itertools

import pytest

from lib.widgets import style

DEFICIENCIES = (None, "deuteranomaly", "protanomaly", "tritanomaly")
# ΔE' in CAM02-UCS: about 1 is a just-noticeable difference between two patches side by side; colours that name
# categories across a legend and a plot must differ at a glance, so we ask ten times that. Okabe–Ito's closest
# pair under full dichromacy is orange vs reddish purple for tritanopia (11.0); matplotlib's default red and
# green (#d62728, #2ca02c), the pair this replaced, are 5.2 apart for deuteranopes.
MIN_DELTA_E = 10.0


@pytest.mark.parametrize("deficiency", DEFICIENCIES, ids=lambda d: d or "typical")
def test_every_pair_of_categorical_colours_stays_apart(deficiency):
    pairs = {(a, b): style.cvd_distance(a, b, deficiency) for a, b in itertools.combinations(style.CATEGORICAL, 2)}
    worst = min(pairs, key=pairs.get)
    assert pairs[worst] >= MIN_DELTA_E, f"{worst} are only ΔE' {pairs[worst]:.1f} apart for {deficiency}"


def test_the_old_red_green_pair_fails_the_same_check():
    assert style.cvd_distance("#d62728", "#2ca02c", "deuteranomaly") < MIN_DELTA_E


def test_text_colours_meet_wcag_aa_on_the_paper():
    for fg in (style.INK, style.MUTED):
        assert style.contrast_ratio(fg, style.PAPER) >= 4.5
    for name in ("cached", "computed", "recomputed", "weights", "shared", "draft", "newest"):
        c = style.text_colour(name)
        assert style.contrast_ratio(c, style.PAPER) >= 4.5, (name, c)
    assert style.text_colour("cached") == style.colour("cached")  # already dark enough: unchanged
    assert style.text_colour("computed") != style.colour("computed")  # orange text is darkened


def test_the_wcag_formula_on_known_values():
    assert style.contrast_ratio("#000000", "#FFFFFF") == pytest.approx(21.0)
    assert style.contrast_ratio("#FFFFFF", "#FFFFFF") == pytest.approx(1.0)
    assert style.contrast_ratio("#767676", "#FFFFFF") == pytest.approx(4.54, abs=0.01)  # the AA grey


def test_every_concept_has_a_second_cue_besides_hue():
    main = ["cached", "computed", "recomputed", "weights", "shared", "draft", "newest"]
    cues = [(style.concept(n).hatch, style.concept(n).marker, style.concept(n).linestyle) for n in main]
    for field in range(3):
        values = [c[field] for c in cues]
        assert len(set(map(str, values))) == len(values), f"two concepts share cue {field}: {values}"
    assert len({style.concept(n).colour for n in main}) == len(main)
    assert {style.concept(n).colour for n in main} <= set(style.CATEGORICAL)


def test_red_and_green_are_not_both_in_the_palette():
    assert "#d62728" not in [c.lower() for c in style.CATEGORICAL]
    assert not ({"red", "green"} & set(style.OKABE_ITO))


def test_bad_names_are_clear_errors():
    with pytest.raises(ValueError, match="unknown concept 'kv-cash'; the course's concepts are: "):
        style.concept("kv-cash")
    with pytest.raises(ValueError, match=r"a colour is written #RRGGBB, got 'red'"):
        style.contrast_ratio("red")
    with pytest.raises(ValueError, match="deficiency must be one of"):
        style.cvd_distance("#000000", "#FFFFFF", "colourblind")
    with pytest.raises(ValueError, match="unknown CSS role 'text'"):
        style.css("text")


def test_apply_installs_matplotlib_and_plotly_defaults():
    import matplotlib as mpl
    import plotly.io as pio

    template = pio.templates.default
    try:
        with mpl.rc_context():  # the rest of this worker's tests keep matplotlib's settings as they were
            style.apply()
            assert mpl.rcParams["axes.prop_cycle"].by_key()["color"] == style.CATEGORICAL
            assert mpl.rcParams["image.cmap"] == style.SEQUENTIAL
            assert pio.templates.default == "plotly_white+kvlab"
            assert list(pio.templates["kvlab"].layout.colorway) == style.CATEGORICAL
    finally:
        pio.templates.default = template


def test_a_themed_widget_repaints_only_the_card_colours_and_only_in_dark():
    import ipywidgets as W

    css = style.themed_plotly_css()
    rules = [r for r in css.splitlines() if r.strip()]
    assert rules and all(r.startswith('body[data-jp-theme-light="false"] .kvlab-themed') for r in rules)
    for colour in (style.PAPER, style.INK, style.MUTED, style.GRID):  # plotly writes them as rgb(r, g, b)
        assert style._rgb_css(colour) in css
    assert not any(style._rgb_css(c) in css for c in style.CATEGORICAL)  # the concepts keep their colours
    box = style.themed(W.VBox([W.Label("a")]))
    assert "kvlab-themed" in box._dom_classes and box.children[0].value == "a"  # the carrier goes last
    assert box.children[-1].value == f"<style>{css}</style>" and box.children[-1].layout.display == "none"


def test_an_empty_chip_shows_the_page_and_speaks_in_the_theme_s_ink():
    """A filled chip keeps its fixed colours (INK on the fill reads in both themes); an empty one has no fill, so its
    text and a heavy edge take the theme's ink (on JupyterLab's dark page INK would be 1.08:1, the browser test's
    finding on the ring's legend)."""
    from lib.widgets import style
    empty, filled = style.chip_css("free", dashed=True, bold=True), style.chip_css("cached")
    assert "background-color:transparent" in empty and f"color:{style.css('ink')}" in empty
    assert f"3px dashed {style.css('ink')}" in empty
    assert f"background-color:{style.colour('cached')}" in filled and f"color:{style.INK}" in filled


def test_hatch_css_draws_each_hatch_as_the_figures_do():
    """One hatch per concept in every tier: an HTML widget draws a concept's matplotlib hatch with strokes in the same
    direction ("//" rising, "\\\\" falling, "--" level, "xx" both), dots and rings as dots and rings."""
    css = style.hatch_css
    assert css("") == ""
    assert "135deg" in css("//") and "45deg" not in css("//")  # a CSS gradient's stripes run across its angle
    assert "45deg" in css("\\\\") and "135deg" not in css("\\\\")
    assert "(0deg" in css("--") and css("xx").count("repeating-linear-gradient") == 2
    assert "radial-gradient" in css("..") and "radial-gradient" in css("oo") and css("..") != css("oo")
    looks = [*style._CONCEPTS, *style.CATEGORY_LOOKS]  # every concept's and category's hatch has a drawing
    for c in looks:
        assert c.hatch == "" or style.PAPER in css(c.hatch), c  # in the paper colour unless told otherwise
    assert "#000" in css("//", ink="#000")
    with pytest.raises(ValueError, match="hatch '/' has no CSS drawing; allowed: ''"):
        css("/")  # plotly's single stroke, not a matplotlib hatch


def test_widget_chips_carry_their_concepts_own_hatch():
    """The HTML chips (tile grids, rings, the player's cells, the dashboard's blocks) and the memory bars draw the
    concept's hatch, not one diagonal for every hatched concept: the weights level, computed rising, shared falling."""
    from lib.widgets import dashboard, memory, player

    for name in ("weights", "computed", "shared", "draft", "cached"):
        assert style.hatch_css(style.concept(name).hatch) in style.chip_css(name), name
    assert style.hatch_css("--") in memory._bar_fill("weights") and memory._bar_fill("cached") == style.colour("cached")
    assert player._swatch("#fff", "//") == f"background-color:#fff;{style.hatch_css('//')}"
    assert style.hatch_css("..") in dashboard._chip("#1", "#fff", hatch="..")

"""RoPE as a picture (lib/widgets/rope.py): the points are the model's own rotation of one pair."""
import math

import matplotlib.pyplot as plt
import pytest

from helpers import drawn_without_missing_glyphs
from lib import i18n
from lib.widgets.rope import rope_figure, rotated_pairs


def test_a_pair_turns_by_position_times_its_angle():
    for pair in (0, 3):
        step = 1.0 / 10000.0 ** (2 * pair / 16)
        for p, (x, y) in zip(range(5), rotated_pairs(16, 10000.0, range(5), pair)):
            assert (x, y) == pytest.approx((math.cos(p * step), math.sin(p * step)), abs=1e-6)


def test_the_figure_in_both_languages_and_errors():
    for lang in ("en", "zh"):
        with i18n.speaking(lang):
            plt.close(drawn_without_missing_glyphs(lambda: rope_figure(head_dim=16, positions=range(4), pairs=(0, 2))))
    with pytest.raises(ValueError, match="head_dim must be even"):
        rotated_pairs(15, 10000.0, range(3), 0)
    with pytest.raises(IndexError, match="from 0 to 7 .a head of head_dim=16 has 8 pairs., got 8"):
        rotated_pairs(16, 10000.0, range(3), 8)

"""The request timeline (lib/widgets/timeline.py): its segments come from a serving run's records and add up to
the run's own counters."""
import matplotlib.pyplot as plt
import pytest

from helpers import drawn_without_missing_glyphs
from lib import serving
from lib import i18n
from lib.widgets.timeline import timeline_figure, timeline_segments


@pytest.fixture(scope="module")
def runs(chat):
    model, tok = chat
    requests = serving.demo_requests(tok, n=8, seed=3)
    return {p: serving.serve(model, requests, p, max_batch=3, eos_id=tok.eos_id) for p in ("static", "continuous")}


def test_segments_cover_each_request_from_the_start_to_its_end_in_order(runs):
    for run in runs.values():
        for record, segments in zip(run.records, timeline_segments(run)):
            assert segments[0][1] == 0  # from pass 0 (waiting, or its prefill)
            for (_, _, end), (_, start, _) in zip(segments, segments[1:]):
                assert start == end + 1  # no gap, no overlap
            spans = {state: b - a + 1 for state, a, b in segments}
            assert spans["prefill"] == 1 and spans.get("decode", 0) == len(record.tokens) - 1
            assert spans.get("waiting", 0) == record.admitted_step


def test_the_idle_slots_drawn_are_the_runs_idle_slot_passes(runs):
    idle = {p: sum(b - a + 1 for segs in timeline_segments(r) for s, a, b in segs if s == "idle")
            for p, r in runs.items()}
    assert idle["static"] == sum(runs["static"].idle_slots) > 0
    assert idle["continuous"] == 0


def test_the_figure_draws_in_both_languages_and_refuses_what_is_not_a_run(runs):
    for lang in ("en", "zh"):
        with i18n.speaking(lang):
            plt.close(drawn_without_missing_glyphs(lambda: timeline_figure(runs)))
    with pytest.raises(TypeError, match="a timeline is drawn from a lib.serving.serve result, got dict"):
        timeline_segments({})
    with pytest.raises(ValueError, match="timeline_figure takes a dict"):
        timeline_figure({})

import os
import sys

import matplotlib
import pytest
import torch
from hypothesis import settings

from lib import load_demo
from lib.device import available_devices

matplotlib.use("Agg")  # figures drawn off-screen in this process (not an environment variable: the kernels
#                       that nbval and the browser tests start must keep their inline backend)


def _test_devices() -> list[str]:
    """The devices the ``device`` fixture runs on: every one available here (cuda / mps when present, always cpu),
    or only ``KVLAB_TEST_DEVICE`` (``cuda``, ``cuda:1``, ``mps``, ``cpu``: ``make gpu-check`` runs the device tests on
    the GPU alone this way), which must exist."""
    want = os.environ.get("KVLAB_TEST_DEVICE", "").strip()
    if not want:
        return available_devices()
    from lib.device import resolve_device

    try:
        resolve_device(want)
    except ValueError as e:
        raise pytest.UsageError(f"KVLAB_TEST_DEVICE={want!r}: {e}") from None
    return [want]


DEVICES = _test_devices()

# The models under test are tiny: one CPU thread per test process is fastest (thread hand-offs cost more
# than the maths) and lets pytest-xdist run one process per core without oversubscribing them.
torch.set_num_threads(1)

# Property tests draw the same examples on every run (a test suite that passes or fails by the dice is no proof);
# `HYPOTHESIS_PROFILE=explore` draws fresh ones for a longer hunt (see README, the fuzz suite).
settings.register_profile("kvlab", derandomize=True, database=None, deadline=None)
settings.register_profile("explore", max_examples=500, deadline=None)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "kvlab"))


@pytest.fixture(params=DEVICES)
def device(request):
    return torch.device(request.param)


@pytest.fixture(autouse=True)
def _seed():
    torch.manual_seed(0)


@pytest.fixture(scope="module")
def chat():
    """The chat demo model and its tokenizer, loaded once per test module."""
    return load_demo("chat")


@pytest.fixture(scope="module")
def target_and_draft():
    """The chat demo model as a target, the draft demo model as its draft, and their (shared) tokenizer."""
    target, tok = load_demo("chat")
    draft, draft_tok = load_demo("draft")
    assert tok == draft_tok
    return target, draft, tok


@pytest.fixture(autouse=True)
def _close_figures():
    """Every matplotlib figure a test opened is closed after it (hundreds would pile up in one process)."""
    yield
    if "matplotlib.pyplot" in sys.modules:
        sys.modules["matplotlib.pyplot"].close("all")


def pytest_collection_finish(session):
    """Once every test module is imported (torch, transformers, matplotlib, plotly: millions of objects that live
    as long as the process), move them out of the garbage collector's view. Each full collection, Python's own and
    the one ``lib.timing.steady`` makes before a timed run, then walks only what the tests themselves created:
    the benchmark's tests went from 27.8 s to 17.6 s in one process, the unit suite (``CI=true``, ``-n 2``) from
    130 s to 122 s. Nothing the tests check depends on it."""
    import gc

    gc.collect()
    gc.freeze()

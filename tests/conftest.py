import sys

import matplotlib
import pytest
import torch

from lib import load_demo
from lib.device import available_devices

matplotlib.use("Agg")  # figures drawn off-screen in this process (not an environment variable: the kernels
#                       that nbval and the browser tests start must keep their inline backend)
DEVICES = available_devices()  # cuda / mps when present, always cpu

# The models under test are tiny: one CPU thread per test process is fastest (thread hand-offs cost more
# than the maths) and lets pytest-xdist run one process per core without oversubscribing them.
torch.set_num_threads(1)


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

import pytest
import torch

from lib import load_demo
from lib.device import available_devices

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

import pytest
import torch

from lib.device import available_devices

DEVICES = available_devices()  # cuda / mps when present, always cpu


@pytest.fixture(params=DEVICES)
def device(request):
    return torch.device(request.param)


@pytest.fixture(autouse=True)
def _seed():
    torch.manual_seed(0)

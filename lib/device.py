"""Picking where the model runs: CUDA, Apple's MPS, or the CPU."""
from __future__ import annotations

from contextlib import contextmanager

import torch

DTYPES = {"fp32": torch.float32, "float32": torch.float32, "bf16": torch.bfloat16, "bfloat16": torch.bfloat16,
          "fp16": torch.float16, "float16": torch.float16}


def available_devices() -> list[str]:
    """The device kinds this torch build can use here, best first."""
    found = []
    if torch.cuda.is_available():
        found.append("cuda")
    mps = getattr(torch.backends, "mps", None)
    if mps is not None and mps.is_available():
        found.append("mps")
    found.append("cpu")
    return found


def resolve_device(device) -> torch.device:
    """Turn "cuda", "cuda:1", "mps", "cpu" or a torch.device into a torch.device that exists here,
    or raise a ValueError that says what is available."""
    try:
        dev = torch.device(device)
    except (RuntimeError, TypeError) as e:
        raise ValueError(f"{device!r} is not a device name; use one of {available_devices()}") from e
    have = available_devices()
    if dev.type not in have:
        why = ""
        if dev.type == "cuda":
            build = "CPU-only" if torch.version.cuda is None else f"CUDA {torch.version.cuda}"
            why = f" (torch {torch.__version__} is a {build} build, torch.cuda.is_available() is False)"
        raise ValueError(f"device {str(dev)!r} is not available here{why}; available: {', '.join(have)}")
    if dev.type == "cuda":
        index = 0 if dev.index is None else dev.index
        if index >= torch.cuda.device_count():
            raise ValueError(f"device {str(dev)!r} does not exist: this machine has {torch.cuda.device_count()} "
                             f"CUDA device(s), cuda:0 .. cuda:{torch.cuda.device_count() - 1}")
        dev = torch.device("cuda", index)
    return dev


def describe_device(device) -> str:
    dev = torch.device(device)
    if dev.type == "cuda":
        return f"cuda ({torch.cuda.get_device_name(dev)})"
    if dev.type == "mps":
        return "mps (Apple GPU)"
    return f"cpu ({torch.get_num_threads()} threads)"


def pick_device(prefer=None, verbose: bool = True) -> torch.device:
    """The best device available (cuda, then mps, then cpu), or ``prefer`` if given (checked).
    Says which one it picked unless ``verbose=False``."""
    dev = resolve_device(prefer if prefer is not None else available_devices()[0])
    if verbose:
        print(f"Using device: {describe_device(dev)}")
    return dev


def resolve_dtype(dtype) -> torch.dtype:
    """torch.float32 / "fp32", torch.bfloat16 / "bf16", torch.float16 / "fp16" -> a torch dtype."""
    if isinstance(dtype, torch.dtype) and dtype in DTYPES.values():
        return dtype
    if isinstance(dtype, str) and dtype.lower() in DTYPES:
        return DTYPES[dtype.lower()]
    raise ValueError(f"unsupported dtype {dtype!r}; allowed: torch.float32, torch.bfloat16, torch.float16 "
                     f"(or the strings {', '.join(DTYPES)})")


@contextmanager
def fixed_threads(threads: int | None):
    """Run with exactly ``threads`` torch CPU threads (None: the current number), restored afterwards, also
    after an error. Timings and benchmarks use it so they measure the same thing every time."""
    before = torch.get_num_threads()
    if threads is None:
        threads = before
    if isinstance(threads, bool) or not isinstance(threads, int) or threads < 1:
        raise ValueError(f"threads must be a positive integer (or None for the current {before}), got {threads!r}")
    torch.set_num_threads(threads)
    try:
        yield threads
    finally:
        torch.set_num_threads(before)


def synchronize(device) -> None:
    """Wait until every kernel queued on ``device`` has finished (CUDA and MPS run asynchronously; the CPU
    does not), so that a clock read afterwards times the work, not its launch."""
    device = torch.device(device)
    if device.type == "cuda":
        torch.cuda.synchronize(device)
    elif device.type == "mps":
        torch.mps.synchronize()

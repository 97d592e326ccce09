"""Picking where the model runs (CUDA, Apple's MPS, or the CPU) and in which number format (lib's one dtype table)."""
from __future__ import annotations

from contextlib import contextmanager
from dataclasses import dataclass

import torch

from . import checks

# ------------------------------------------------------------------------------------------ number formats


@dataclass(frozen=True)
class DType:
    """One number format: its canonical short name, its size, the other names and torch dtypes that mean it,
    and whether lib's model can compute in it (the others only describe how weights or a cache are stored)."""

    name: str  # canonical: "fp32", "bf16", "int4", ...
    bits: int  # per value: 32, 16, 8, 4
    torch_dtypes: tuple  # torch dtypes stored in this format (the first one is the one lib computes in)
    aliases: tuple = ()  # other strings that mean it ("float32", "half", ...), lower case
    computes: bool = False  # lib.MiniTransformer runs in it (fp32, bf16, fp16)

    @property
    def bytes(self) -> float:
        """Bytes per value: 4, 2, 1, or 0.5 for int4 (two values per byte)."""
        return self.bits // 8 if self.bits % 8 == 0 else self.bits / 8

    @property
    def torch_dtype(self) -> torch.dtype | None:
        """The torch dtype lib computes in, or None when torch has none for this format."""
        return self.torch_dtypes[0] if self.torch_dtypes else None


def _torch(*names: str) -> tuple:
    """The torch dtypes of these names that this torch build has (float8 and int4 exist only in newer ones)."""
    return tuple(getattr(torch, n) for n in names if isinstance(getattr(torch, n, None), torch.dtype))


# The one table of number formats: device.resolve_dtype, lib.costs and the widgets all read it.
DTYPES: dict[str, DType] = {d.name: d for d in (
    DType("fp64", 64, _torch("float64"), ("float64", "double")),
    DType("fp32", 32, _torch("float32"), ("float32", "float"), computes=True),
    DType("bf16", 16, _torch("bfloat16"), ("bfloat16",), computes=True),
    DType("fp16", 16, _torch("float16"), ("float16", "half"), computes=True),
    DType("fp8", 8, _torch("float8_e4m3fn", "float8_e5m2", "float8_e4m3fnuz", "float8_e5m2fnuz")),
    DType("int8", 8, _torch("int8", "uint8")),
    DType("int4", 4, _torch("int4", "uint4")),
)}
_BY_NAME = {alias: d for d in DTYPES.values() for alias in (d.name, *d.aliases)}
_BY_TORCH = {t: d for d in DTYPES.values() for t in d.torch_dtypes}
COMPUTE_DTYPES = tuple(d.torch_dtype for d in DTYPES.values() if d.computes)  # what lib's model runs in


def _allowed() -> str:
    names = ", ".join(f"{d.name}" + (f" ({'/'.join(d.aliases)})" if d.aliases else "") for d in DTYPES.values())
    return f"{names}, or a torch dtype of one of them (e.g. torch.float16, torch.float8_e4m3fn, torch.int8)"


def dtype_info(dtype) -> DType:
    """The table row of a number format, given as a name ("fp16", "float16", "half"; any case) or a torch dtype."""
    if isinstance(dtype, torch.dtype):
        info = _BY_TORCH.get(dtype)
    elif isinstance(dtype, str):
        info = _BY_NAME.get(dtype.lower())
    else:
        raise TypeError(f"dtype must be a string or a torch.dtype, got {type(dtype).__name__} {dtype!r}; "
                        f"allowed: {_allowed()}")
    if info is None:
        raise ValueError(f"unknown dtype {dtype!r}; allowed: {_allowed()}")
    return info


def dtype_name(dtype) -> str:
    """The canonical short name: dtype_name(torch.bfloat16) == dtype_name("bfloat16") == "bf16"."""
    return dtype_info(dtype).name


def dtype_bytes(dtype) -> float:
    """Bytes per stored value: fp32 4, fp16/bf16 2, fp8/int8 1, int4 0.5 (two values per byte)."""
    return dtype_info(dtype).bytes


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


def cache_dtype_device(dtype, device) -> tuple:
    """A KV cache's dtype (floating point; None: torch's default) and device (None: CPU), checked ->
    (torch dtype, torch.device that exists here)."""
    dtype = torch.get_default_dtype() if dtype is None else dtype
    if not isinstance(dtype, torch.dtype) or not dtype.is_floating_point:
        raise ValueError(f"a KV cache needs a floating-point torch dtype (e.g. torch.float32, torch.bfloat16, "
                         f"torch.float16), got {dtype!r}")
    return dtype, resolve_device("cpu" if device is None else device)


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
    """A dtype lib's model computes in -> its torch dtype: torch.float32 / "fp32" / "float32", torch.bfloat16 /
    "bf16", torch.float16 / "fp16" / "half". Formats lib only counts bytes for (fp8, int8, int4, fp64) are refused."""
    try:
        info = dtype_info(dtype)
    except (TypeError, ValueError):
        info = None
    if info is None or not info.computes:
        names = ", ".join(alias for d in DTYPES.values() if d.computes for alias in (d.name, *d.aliases))
        raise ValueError(f"unsupported dtype {dtype!r}; allowed: {', '.join(map(str, COMPUTE_DTYPES))} "
                         f"(or the strings {names}): lib's model computes in these only")
    return info.torch_dtype


@contextmanager
def fixed_threads(threads: int | None):
    """Run with exactly ``threads`` torch CPU threads (None: the current number), restored afterwards, also
    after an error. Timings and benchmarks use it so they measure the same thing every time."""
    before = torch.get_num_threads()
    if threads is None:
        threads = before
    threads = checks.integer(threads, "threads", 1, allowed=f"a positive integer (or None for the current {before})")
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


def cpu_name() -> str:
    """The processor's model name as the OS reports it (Linux's /proc/cpuinfo), else what ``platform`` knows."""
    import platform
    from pathlib import Path
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()

"""A stand-in for nvidia-ml-py's `pynvml` at the library boundary (no GPU on the test machines).

It follows the real module's names, return shapes and exception classes (NVMLError subclasses named
NVMLError_<Reason> with a `value` code), for the calls the nvml collector makes.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass, field
from pathlib import Path
from types import SimpleNamespace

NVML_CLOCK_SM = 1
NVML_PCIE_UTIL_TX_BYTES = 0
NVML_PCIE_UTIL_RX_BYTES = 1


class NVMLError(Exception):
    value = 999

    def __str__(self) -> str:
        return {
            2: "Not Supported",
            9: "Driver Not Loaded",
            12: "NVML Shared Library Not Found",
            15: "GPU is lost",
            1: "Uninitialized",
        }.get(self.value, "Unknown Error")


class NVMLError_Uninitialized(NVMLError):
    value = 1


class NVMLError_NotSupported(NVMLError):
    value = 2


class NVMLError_DriverNotLoaded(NVMLError):
    value = 9


class NVMLError_LibraryNotFound(NVMLError):
    value = 12


class NVMLError_GpuIsLost(NVMLError):
    value = 15


@dataclass
class Gpu:
    name: str = "NVIDIA H100 80GB HBM3"
    uuid: str = "GPU-00000000-0000-0000-0000-000000000000"
    util: int = 57
    mem_used: int = 40 * 2**30
    mem_total: int = 80 * 2**30
    power_mw: int = 312_500
    sm_mhz: int = 1980
    pcie_rx_kb: int = 2048
    pcie_tx_kb: int = 512
    unsupported: set[str] = field(default_factory=set)


class State:
    def __init__(self) -> None:
        self.gpus: list[Gpu] = []
        self.init_error: type[NVMLError] | None = None
        self.read_error: type[NVMLError] | None = None
        self.hang: threading.Event | None = None  # a read blocks until this is set (a wedged driver)
        self.init_calls = 0
        self.initialised = False


state = State()


def reset(gpus: list[Gpu], init_error: type[NVMLError] | None = None) -> State:
    state.__init__()  # type: ignore[misc]
    state.gpus = gpus
    state.init_error = init_error
    return state


def nvmlInit() -> None:
    state.init_calls += 1
    if state.init_error is not None:
        raise state.init_error()
    state.initialised = True


def nvmlShutdown() -> None:
    state.initialised = False


def _gpu(handle: int, what: str) -> Gpu:
    if not state.initialised:
        raise NVMLError_Uninitialized()
    if state.read_error is not None:
        raise state.read_error()
    if state.hang is not None:
        state.hang.wait()
    gpu = state.gpus[handle]
    if what in gpu.unsupported:
        raise NVMLError_NotSupported()
    return gpu


def nvmlDeviceGetCount() -> int:
    if not state.initialised:
        raise NVMLError_Uninitialized()
    return len(state.gpus)


def nvmlDeviceGetHandleByIndex(index: int) -> int:
    _gpu(index, "handle")
    return index


def nvmlDeviceGetUUID(handle: int) -> str:
    return _gpu(handle, "uuid").uuid


def nvmlDeviceGetName(handle: int) -> str:
    return _gpu(handle, "name").name


def nvmlDeviceGetUtilizationRates(handle: int) -> SimpleNamespace:
    return SimpleNamespace(gpu=_gpu(handle, "util").util, memory=0)


def nvmlDeviceGetMemoryInfo(handle: int) -> SimpleNamespace:
    gpu = _gpu(handle, "memory")
    return SimpleNamespace(used=gpu.mem_used, total=gpu.mem_total, free=gpu.mem_total - gpu.mem_used)


def nvmlDeviceGetPowerUsage(handle: int) -> int:
    return _gpu(handle, "power").power_mw


def nvmlDeviceGetClockInfo(handle: int, clock: int) -> int:
    assert clock == NVML_CLOCK_SM
    return _gpu(handle, "clock").sm_mhz


def nvmlDeviceGetPcieThroughput(handle: int, counter: int) -> int:
    gpu = _gpu(handle, "pcie")
    return gpu.pcie_rx_kb if counter == NVML_PCIE_UTIL_RX_BYTES else gpu.pcie_tx_kb


def install_dir(where: Path, utils: list[int]) -> Path:
    """A folder holding a `pynvml.py` that is this stand-in with GPUs at the given utilisations, to put
    first on a daemon process's PYTHONPATH (the real pynvml is never touched)."""
    root = Path(__file__).resolve().parents[2]
    where.mkdir(parents=True, exist_ok=True)
    gpus = ", ".join(
        f'_fake.Gpu(uuid="GPU-{i:08d}-0000-0000-0000-000000000000", util={u})' for i, u in enumerate(utils)
    )
    (where / "pynvml.py").write_text(
        f"import sys\nsys.path.insert(0, {str(root)!r})\n"
        "from tools.harness.fake_pynvml import *  # noqa: F403 - the whole stand-in module\n"
        f"from tools.harness import fake_pynvml as _fake\n_fake.reset([{gpus}])\n"
    )
    return where

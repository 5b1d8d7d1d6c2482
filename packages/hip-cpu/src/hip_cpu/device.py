"""The cpu platform's devices: the host, described in HIP's terms (one device unless
HIP_FFI_CPU_DEVICES asks for more: ordinals.py; each is the same host, with its own share of
the memory, limits.py, and its own PCI bus id 0000:NN:00.0 for ordinal NN).

Name from /proc/cpuinfo, total memory the bound of limits.py (physical memory, or the cgroup
limit when lower), multiprocessors = the cores this process may run on (sched_getaffinity;
HIP_FFI_CPU_THREADS overrides, and is also how many threads run blocks), clock from cpufreq or
cpuinfo, L2 size from sysfs. Fixed by the platform: 1024 threads per block (1024 x 1024 x 64),
grids up to (2^31-1) x 65535 x 65535 blocks, 64 KiB of shared memory per block (static and
dynamic each). Warp size: HIP_FFI_CPU_WARP_SIZE (1, 32 or 64), else 32 (toolchain.warp_size;
hip_cpu_prelude.h). A multiprocessor runs one block at a time.
"""

from __future__ import annotations

import functools
import platform
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from hip_cpu import limits, ordinals, shared_objects, status, toolchain
from hip_ffi._ffi import ffi
from hip_ffi.constants import DEVICE_ATTRIBUTES
from hip_ffi.handles import address

MAX_THREADS_PER_BLOCK = 1024
MAX_BLOCK_DIM = (1024, 1024, 64)
MAX_GRID_DIM = (2**31 - 1, 65535, 65535)
SHARED_MEMORY_PER_BLOCK = shared_objects.MAX_DYNAMIC_SHARED  # bytes
WARP_SIZE = toolchain.warp_size()  # HIP_FFI_CPU_WARP_SIZE, else 32
ALIGNMENT = 256  # bytes: every allocation, as on AMD GPUs


@dataclass(frozen=True)
class Host:
    name: str
    arch: str  # gcnArchName: the machine ("x86_64", "aarch64")
    cores: int
    clock_khz: int
    l2_bytes: int


def _cpuinfo() -> dict[str, str]:
    try:
        text = Path("/proc/cpuinfo").read_text()
    except OSError:
        return {}
    fields: dict[str, str] = {}
    for line in text.split("\n\n", 1)[0].splitlines():
        key, _, value = line.partition(":")
        fields.setdefault(key.strip(), value.strip())
    return fields


def _read_int(path: str) -> int | None:
    try:
        return int(Path(path).read_text().split()[0])
    except (OSError, ValueError, IndexError):
        return None


def _size(text: str) -> int:
    """sysfs cache sizes: "1024K", "32M"."""
    units = {"K": 1024, "M": 1024**2, "G": 1024**3}
    text = text.strip()
    return int(text[:-1]) * units[text[-1]] if text and text[-1] in units else int(text or 0)


@functools.cache
def host() -> Host:
    info = _cpuinfo()
    name = info.get("model name") or info.get("Model") or info.get("Hardware") or ""
    name = name or platform.processor() or platform.machine() or "host CPU"
    khz = _read_int("/sys/devices/system/cpu/cpu0/cpufreq/cpuinfo_max_freq")
    if khz is None:
        try:
            khz = int(float(info.get("cpu MHz", "0")) * 1000)
        except ValueError:
            khz = 0
    l2 = 0
    for index in sorted(Path("/sys/devices/system/cpu/cpu0/cache").glob("index*")):
        try:
            if (index / "level").read_text().strip() == "2":
                l2 = _size((index / "size").read_text())
        except (OSError, ValueError):
            continue
    return Host(name, platform.machine() or "cpu", shared_objects.worker_threads(), khz, l2)


def _attributes() -> dict[str, int]:
    h = host()
    return {
        "MaxThreadsPerBlock": MAX_THREADS_PER_BLOCK,
        "MaxBlockDimX": MAX_BLOCK_DIM[0],
        "MaxBlockDimY": MAX_BLOCK_DIM[1],
        "MaxBlockDimZ": MAX_BLOCK_DIM[2],
        "MaxGridDimX": MAX_GRID_DIM[0],
        "MaxGridDimY": MAX_GRID_DIM[1],
        "MaxGridDimZ": MAX_GRID_DIM[2],
        "MaxSharedMemoryPerBlock": SHARED_MEMORY_PER_BLOCK,
        "SharedMemPerBlockOptin": SHARED_MEMORY_PER_BLOCK,
        "SharedMemPerMultiprocessor": SHARED_MEMORY_PER_BLOCK,
        "MaxSharedMemoryPerMultiprocessor": SHARED_MEMORY_PER_BLOCK,
        "ReservedSharedMemPerBlock": 0,
        "TotalConstantMemory": SHARED_MEMORY_PER_BLOCK,
        "WarpSize": WARP_SIZE,
        "MaxRegistersPerBlock": 65536,
        "MaxRegistersPerMultiprocessor": 65536,
        "ClockRate": h.clock_khz,
        "ClockInstructionRate": h.clock_khz,
        "MemoryClockRate": 0,  # not known for host memory
        "MemoryBusWidth": 0,
        "MultiprocessorCount": h.cores,
        "PhysicalMultiProcessorCount": h.cores,
        "MaxThreadsPerMultiProcessor": MAX_THREADS_PER_BLOCK,
        "MaxBlocksPerMultiProcessor": 1,
        "L2CacheSize": h.l2_bytes,
        "ComputeCapabilityMajor": 0,
        "ComputeCapabilityMinor": 0,
        "ComputeMode": 0,
        "ConcurrentKernels": 1,
        "AsyncEngineCount": 1,
        "CanMapHostMemory": 1,
        "Integrated": 1,  # device memory is host memory
        "UnifiedAddressing": 1,
        "PageableMemoryAccess": 1,  # kernels may dereference any host pointer
        "PageableMemoryAccessUsesHostPageTables": 1,
        "CanUseHostPointerForRegisteredMem": 1,
        "HostNativeAtomicSupported": 1,
        "ManagedMemory": 0,
        "ConcurrentManagedAccess": 0,
        "DirectManagedMemAccessFromHost": 0,
        "CooperativeLaunch": 1,  # one block per core (launch.py)
        "CooperativeMultiDeviceLaunch": 0,
        "EccEnabled": 0,
        "KernelExecTimeout": 0,
        "IsMultiGpuBoard": 0,
        "MultiGpuBoardGroupID": 0,
        "PciBusId": 0,  # the device's ordinal (hipDeviceGetAttribute)
        "PciDeviceId": 0,
        "PciDomainID": 0,
        "StreamPrioritiesSupported": 0,
        "MemoryPoolsSupported": 1,
        "GlobalL1CacheSupported": 1,
        "LocalL1CacheSupported": 1,
        "TextureAlignment": ALIGNMENT,
        "TexturePitchAlignment": ALIGNMENT,
        "SurfaceAlignment": ALIGNMENT,
        "MaxPitch": 2**31 - 1,
        "IsLargeBar": 0,
        "ImageSupport": 0,
        "FineGrainSupport": 1,
        "CanUseStreamWaitValue": 0,
        "TccDriver": 0,
        "AsicRevision": 0,
        "VirtualMemoryManagementSupported": 0,
        "HostRegisterSupported": 1,
        "MemoryPoolSupportedHandleTypes": 0,
        "HostNumaId": 0,
        "WallClockRate": 1_000_000,  # kHz: wall_clock64() counts nanoseconds
        "NumberOfXccs": 1,
        "PciChipId": 0,
    }


@functools.cache
def attributes() -> dict[int, int]:
    """hipDeviceAttribute_t value -> value on this host (attributes not listed are refused)."""
    return {DEVICE_ATTRIBUTES[name]: value for name, value in _attributes().items()}


_PCI_BUS_ID = DEVICE_ATTRIBUTES["PciBusId"]

#: The struct hipGetDeviceProperties fills: ROCm 6's layout, as the other platforms use.
PROP_TYPE = "hipDeviceProp_tR0600"


def _properties(ordinal: int) -> dict[str, Any]:
    h = host()
    return {
        "name": h.name.encode()[:255],
        "gcnArchName": h.arch.encode()[:255],
        "totalGlobalMem": limits.BUDGETS[ordinal].bound,
        "pciBusID": ordinal,
        "sharedMemPerBlock": SHARED_MEMORY_PER_BLOCK,
        "sharedMemPerBlockOptin": SHARED_MEMORY_PER_BLOCK,
        "sharedMemPerMultiprocessor": SHARED_MEMORY_PER_BLOCK,
        "maxSharedMemoryPerMultiProcessor": SHARED_MEMORY_PER_BLOCK,
        "regsPerBlock": 65536,
        "regsPerMultiprocessor": 65536,
        "warpSize": WARP_SIZE,
        "maxThreadsPerBlock": MAX_THREADS_PER_BLOCK,
        "maxThreadsDim": list(MAX_BLOCK_DIM),
        "maxGridSize": list(MAX_GRID_DIM),
        "clockRate": h.clock_khz,
        "clockInstructionRate": h.clock_khz,
        "totalConstMem": SHARED_MEMORY_PER_BLOCK,
        "multiProcessorCount": h.cores,
        "l2CacheSize": h.l2_bytes,
        "maxThreadsPerMultiProcessor": MAX_THREADS_PER_BLOCK,
        "maxBlocksPerMultiProcessor": 1,
        "concurrentKernels": 1,
        "asyncEngineCount": 1,
        "unifiedAddressing": 1,
        "canMapHostMemory": 1,
        "integrated": 1,
        "memPitch": 2**31 - 1,
        "textureAlignment": ALIGNMENT,
        "texturePitchAlignment": ALIGNMENT,
        "surfaceAlignment": ALIGNMENT,
        "pageableMemoryAccess": 1,
        "pageableMemoryAccessUsesHostPageTables": 1,
        "canUseHostPointerForRegisteredMem": 1,
        "hostNativeAtomicSupported": 1,
        "hostRegisterSupported": 1,
        "memoryPoolsSupported": 1,
        "globalL1CacheSupported": 1,
        "localL1CacheSupported": 1,
    }


def fill_properties(props: Any, prop_type: str = PROP_TYPE, ordinal: int = 0) -> None:
    """Fill a `prop_type` struct (hipDeviceProp_tR0600 or R0000) for device `ordinal`: zeros,
    then what is known."""
    size = ffi.sizeof(prop_type)
    ffi.memmove(props, bytes(size), size)
    fields = dict(ffi.typeof(prop_type).fields)
    for name, value in _properties(ordinal).items():
        if name in fields:
            setattr(props, name, value)
    arch = props.arch
    for flag in (
        "hasGlobalInt32Atomics", "hasGlobalFloatAtomicExch", "hasSharedInt32Atomics",
        "hasSharedFloatAtomicExch", "hasFloatAtomicAdd", "hasGlobalInt64Atomics",
        "hasSharedInt64Atomics", "hasDoubles", "hasWarpVote", "hasWarpBallot", "hasWarpShuffle",
        "hasFunnelShift", "hasThreadFenceSystem", "hasSyncThreadsExt", "has3dGrid",
    ):  # fmt: skip
        setattr(arch, flag, 1)


# ---- the surface ---------------------------------------------------------------------------


_valid = ordinals.valid


def hipInit(flags: int) -> int:
    return status.SUCCESS if flags == 0 else status.INVALID_VALUE


def hipGetDeviceCount(count: Any) -> int:
    if count == ffi.NULL:
        return status.INVALID_VALUE
    count[0] = ordinals.count()
    return status.SUCCESS


def hipGetDevice(device: Any) -> int:
    """The calling host thread's current device (0 until it calls hipSetDevice)."""
    if device == ffi.NULL:
        return status.INVALID_VALUE
    device[0] = ordinals.current()
    return status.SUCCESS


def hipSetDevice(device: int) -> int:
    """Make `device` the calling host thread's current device (other threads keep theirs)."""
    if not _valid(device):
        return status.INVALID_DEVICE
    ordinals.make_current(device)
    return status.SUCCESS


def hipDeviceGet(device: Any, ordinal: int) -> int:
    if device == ffi.NULL:
        return status.INVALID_VALUE
    if not _valid(ordinal):
        return status.INVALID_DEVICE
    device[0] = ordinal
    return status.SUCCESS


def hipDeviceGetAttribute(value: Any, attribute: int, device: int) -> int:
    if value == ffi.NULL:
        return status.INVALID_VALUE
    if not _valid(device):
        return status.INVALID_DEVICE
    table = attributes()
    if attribute not in table:
        return status.INVALID_VALUE
    value[0] = device if attribute == _PCI_BUS_ID else table[attribute]
    return status.SUCCESS


def hipGetDeviceProperties(props: Any, device: int) -> int:
    if address(props) == 0:
        return status.INVALID_VALUE
    if not _valid(device):
        return status.INVALID_DEVICE
    fill_properties(ffi.cast(PROP_TYPE + "*", props), ordinal=device)
    return status.SUCCESS


def hipDeviceGetName(name: Any, length: int, device: int) -> int:
    return _write_string(name, length, device, host().name)


def hipDeviceGetPCIBusId(bus_id: Any, length: int, device: int) -> int:
    return _write_string(bus_id, length, device, f"0000:{device:02x}:00.0")


def _write_string(out: Any, length: int, device: int, text: str) -> int:
    """`text` into the caller's `length`-byte buffer, cut to fit and NUL-terminated."""
    if address(out) == 0 or length <= 0:
        return status.INVALID_VALUE
    if not _valid(device):
        return status.INVALID_DEVICE
    data = text.encode()[: length - 1] + b"\0"
    ffi.memmove(out, data, len(data))
    return status.SUCCESS


def hipDeviceTotalMem(size: Any, device: int) -> int:
    if size == ffi.NULL:
        return status.INVALID_VALUE
    if not _valid(device):
        return status.INVALID_DEVICE
    size[0] = limits.BUDGETS[device].bound
    return status.SUCCESS


def hipMemGetInfo(free: Any, total: Any) -> int:
    """Bytes, of the current device: total = its bound (physical memory or the cgroup limit,
    split between the devices: limits.py), free = the bound minus what it has handed out."""
    if free == ffi.NULL or total == ffi.NULL:
        return status.INVALID_VALUE
    budget = limits.BUDGETS[ordinals.current()]
    free[0], total[0] = budget.free, budget.bound
    return status.SUCCESS


def hipDeviceGetStreamPriorityRange(least: Any, greatest: Any) -> int:
    """(0, 0): streams run with equal priority here (StreamPrioritiesSupported is 0)."""
    if least != ffi.NULL:
        least[0] = 0
    if greatest != ffi.NULL:
        greatest[0] = 0
    return status.SUCCESS

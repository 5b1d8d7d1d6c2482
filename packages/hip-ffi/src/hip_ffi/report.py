"""A plain-text report of a platform and its devices (what `hip_ffi.describe()` prints)."""

from __future__ import annotations

from dataclasses import dataclass

from hip_ffi.api import HipApi
from hip_ffi.constants import DEVICE_ATTRIBUTES, ERROR_NAMES


@dataclass(frozen=True)
class DeviceSummary:
    """The facts about one device that every platform can answer."""

    ordinal: int
    name: str
    arch: str  # gfx90a, sm_90, or the host CPU's architecture on the cpu platform
    total_memory: int  # bytes
    multiprocessors: int
    warp_size: int


def _check(status: int, call: str) -> None:
    if status != 0:
        raise RuntimeError(f"{call} failed: {ERROR_NAMES.get(status, status)}")


def device_summary(api: HipApi, ordinal: int) -> DeviceSummary:
    ffi = api.ffi
    props = ffi.new(api.device_prop_type + "*")
    _check(api.hipGetDeviceProperties(props, ordinal), "hipGetDeviceProperties")
    value = ffi.new("int*")

    def attribute(name: str) -> int:
        _check(api.hipDeviceGetAttribute(value, DEVICE_ATTRIBUTES[name], ordinal), name)
        return int(value[0])

    return DeviceSummary(
        ordinal=ordinal,
        name=ffi.string(props.name).decode(errors="replace"),
        arch=ffi.string(props.gcnArchName).decode(errors="replace"),
        total_memory=int(props.totalGlobalMem),
        multiprocessors=attribute("MultiprocessorCount"),
        warp_size=attribute("WarpSize"),
    )


def device_count(api: HipApi) -> tuple[int, str]:
    """(count, "") or (0, the error name) — no device is an answer, not a failure."""
    count = api.ffi.new("int*")
    status = api.hipGetDeviceCount(count)
    return (int(count[0]), "") if status == 0 else (0, ERROR_NAMES.get(status, str(status)))


def describe(api: HipApi) -> str:
    lines = [f"platform: {api.platform} ({api.platform_version})"]
    lines += [f"  {role}: {path}" for role, path in api.libraries.items()]
    count, why = device_count(api)
    lines.append(f"devices: {count}" + (f" ({why})" if why else ""))
    for ordinal in range(count):
        d = device_summary(api, ordinal)
        lines.append(
            f"  [{d.ordinal}] {d.name} | {d.arch} | {d.total_memory / 2**30:.1f} GiB | "
            f"{d.multiprocessors} multiprocessors | warp {d.warp_size}"
        )
    return "\n".join(lines)

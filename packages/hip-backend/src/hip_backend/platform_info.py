"""Facts about the selected platform as plain data: versions, libraries, devices.

`hip-backend info` prints this; `--json` prints it as is. Nothing here allocates device memory
or compiles anything: it only asks the runtime.
"""

from __future__ import annotations

import dataclasses
import os
import re
from typing import Any

from hip_backend._version import __version__

_SONAME_VERSION = re.compile(r"\.so\.(\d+(?:\.\d+)*)$")


def library_version(path: str) -> str | None:
    """The version in a shared library's file name, after following links:
    /usr/lib/libamdhip64.so.5 -> libamdhip64.so.5.2.21153 -> "5.2.21153"; None without one."""
    found = _SONAME_VERSION.search(os.path.realpath(path)) or _SONAME_VERSION.search(path)
    return found.group(1) if found else None


def _versions(api: Any) -> dict[str, Any]:
    """Runtime, driver and hiprtc versions as the platform reports them (None if it cannot)."""
    ffi = api.ffi
    value, minor = ffi.new("int*"), ffi.new("int*")
    driver = int(value[0]) if api.hipDriverGetVersion(value) == 0 else None
    hiprtc = None
    if api.has("hiprtcVersion") and api.hiprtcVersion(value, minor) == 0:
        hiprtc = f"{value[0]}.{minor[0]}"
    return {"runtime": int(api.runtime_version), "driver": driver, "hiprtc": hiprtc}


def _libraries(api: Any) -> list[dict[str, Any]]:
    return [
        {
            "role": role,
            "path": path,
            "resolved": os.path.realpath(path) if os.sep in path else path,
            "version": library_version(path),
        }
        for role, path in api.libraries.items()
    ]


def _devices(count: int) -> list[dict[str, Any]]:
    """Each device's properties (hip_core.Device reads them once, through
    hip_ffi.device_properties) and its free memory."""
    from hip_core import Device

    found = []
    for ordinal in range(count):
        device = Device(ordinal)
        entry: dict[str, Any] = {"ordinal": ordinal, **dataclasses.asdict(device.properties)}
        try:
            entry["free_memory"] = device.mem_info()[0]
        except Exception as error:  # a device that cannot say is still listed
            entry["free_memory"] = None
            entry["error"] = str(error)
        found.append(entry)
    return found


def _peer_links(count: int) -> list[dict[str, Any]]:
    """For each ordered pair of devices, whether kernels on `device` can reach `peer`'s memory
    once peer access is enabled (hipDeviceCanAccessPeer). Whether the link is NVLink / xGMI or
    PCIe is not known here: hip-ffi binds no hipDeviceGetP2PAttribute."""
    from hip_core import Device

    links = []
    for a in range(count):
        for b in range(count):
            if a == b:
                continue
            link: dict[str, Any] = {"device": a, "peer": b}
            try:
                link["can_access"] = Device(a).can_access_peer(Device(b))
            except Exception as error:  # a pair that cannot say is still listed
                link["can_access"] = None
                link["error"] = str(error)
            links.append(link)
    return links


def platform_info() -> dict[str, Any]:
    """Everything `hip-backend info` reports about the process's platform (hip_ffi.load()).

    Keys: version (hip-backend's), platform, platform_version, versions {runtime, driver,
    hiprtc}, libraries [{role, path, resolved, version}], unavailable {function: reason},
    device_count, device_error (why there are none, or None), devices [{ordinal, name, arch,
    total_memory, free_memory, ...}] — sizes in bytes, clock in kHz — and peer_links
    [{device, peer, can_access}] for each ordered pair of devices (empty with fewer than two).
    """
    import hip_ffi

    api = hip_ffi.load()
    count, why = hip_ffi.device_count(api)
    return {
        "version": __version__,
        "platform": api.platform,
        "platform_version": api.platform_version,
        "versions": _versions(api),
        "libraries": _libraries(api),
        "unavailable": api.unavailable(),
        "device_count": count,
        "device_error": why or None,
        "devices": _devices(count),
        "peer_links": _peer_links(count),
    }


__all__ = ["library_version", "platform_info"]

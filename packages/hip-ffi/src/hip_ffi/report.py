"""A plain-text report of a platform and its devices (what `hip_ffi.describe()` prints)."""

from __future__ import annotations

from hip_ffi.api import HipApi
from hip_ffi.devices import device_count, device_properties


def describe(api: HipApi) -> str:
    lines = [f"platform: {api.platform} ({api.platform_version})"]
    lines += [f"  {role}: {path}" for role, path in api.libraries.items()]
    count, why = device_count(api)
    lines.append(f"devices: {count}" + (f" ({why})" if why else ""))
    for ordinal in range(count):
        d = device_properties(api, ordinal)
        lines.append(
            f"  [{ordinal}] {d.name} | {d.arch} | {d.total_memory / 2**30:.1f} GiB | "
            f"{d.multiprocessors} multiprocessors | warp {d.warp_size}"
        )
    return "\n".join(lines)

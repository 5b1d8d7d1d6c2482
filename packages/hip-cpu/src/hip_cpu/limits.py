"""How much "device" memory the cpu platform may hand out, and how much it has.

Device memory here is host memory, and Linux overcommits: without a bound, ten 20 GiB
allocations succeed on a 24 GiB machine, and filling two 1.5 GiB buffers in a 2 GiB cgroup
gets the process killed. So the device has a size, read once at load: the host's physical
memory (MemTotal), or the memory limit of the process's cgroup when that is lower (cgroup v2
`memory.max`, v1 `memory.limit_in_bytes`, the lowest along the path up to the root of the
hierarchy). Every allocation the platform makes (hipMalloc, hipMallocAsync, hipHostMalloc)
is counted against it: one that does not fit in what is left is hipErrorOutOfMemory, as on a
GPU, and hipMemGetInfo reports total = the bound, free = the bound minus what is handed out.

Memory the process uses otherwise (Python objects, numpy arrays) is not counted: a process
that already fills much of its cgroup can still be killed when it fills its buffers.
`HIP_FFI_CPU_CGROUP` names where the cgroup filesystem is mounted (default /sys/fs/cgroup).

With several devices (HIP_FFI_CPU_DEVICES, ordinals.py) each has its own budget, an even share
of the bound, so that together they never hand out more than the host has.
"""

from __future__ import annotations

import os
import threading
from dataclasses import dataclass, field
from pathlib import Path

from hip_cpu import ordinals

CGROUP_ROOT = Path("/sys/fs/cgroup")
PROC_SELF_CGROUP = Path("/proc/self/cgroup")
_UNLIMITED = 1 << 60  # v1 reports "no limit" as a page-rounded 2^63-1


def _read_limit(path: Path) -> int | None:
    """A limit file's bytes; None for "max", a huge v1 value, or no file."""
    try:
        text = path.read_text().strip()
    except OSError:
        return None
    return int(text) if text.isdigit() and int(text) < _UNLIMITED else None


def _lowest_limit(root: Path, relative: str, file_name: str) -> int | None:
    """The lowest `file_name` limit from the cgroup `relative` (under `root`) up to `root`.

    Inside a container the process's path is often not visible under the mount (a cgroup
    namespace, or a bind mount of its own group): then the mount's root is the group."""
    directory = root / relative.strip("/")
    if not directory.is_dir():
        directory = root
    limits = []
    while True:
        found = _read_limit(directory / file_name)
        if found is not None:
            limits.append(found)
        if directory == root or root not in directory.parents:
            break
        directory = directory.parent
    return min(limits, default=None)


def cgroup_limit(root: Path = CGROUP_ROOT, proc_self_cgroup: Path = PROC_SELF_CGROUP) -> int | None:
    """The memory limit (bytes) of this process's cgroups, v1 and v2; None when unlimited."""
    try:
        lines = proc_self_cgroup.read_text().splitlines()
    except OSError:
        lines = []
    v2_path, v1_path = "/", "/"
    for line in lines:
        _id, controllers, path = [*line.split(":", 2), "", ""][:3]
        if _id == "0" and controllers == "":
            v2_path = path
        elif "memory" in controllers.split(","):
            v1_path = path
    limits = []
    for v2_root in (root, root / "unified"):  # unified, or hybrid (v2 beside v1)
        if (v2_root / "cgroup.controllers").exists():
            limits.append(_lowest_limit(v2_root, v2_path, "memory.max"))
    if (root / "memory").is_dir():
        limits.append(_lowest_limit(root / "memory", v1_path, "memory.limit_in_bytes"))
    return min((limit for limit in limits if limit is not None), default=None)


def physical_memory(meminfo: Path = Path("/proc/meminfo")) -> int:
    """MemTotal in bytes (else the physical pages sysconf counts)."""
    try:
        for line in meminfo.read_text().splitlines():
            if line.startswith("MemTotal:"):
                return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        pass
    return os.sysconf("SC_PHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")


def read_bound() -> int:
    """Physical memory, or the cgroup limit when lower (bytes)."""
    root = Path(os.environ.get("HIP_FFI_CPU_CGROUP") or CGROUP_ROOT)
    limit = cgroup_limit(root)
    return min(physical_memory(), limit) if limit is not None else physical_memory()


@dataclass
class Budget:
    """The device's size and what is handed out of it (bytes)."""

    bound: int
    handed_out: int = 0
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    def take(self, size: int) -> bool:
        """Count `size` bytes as handed out; False (nothing counted) when they do not fit."""
        with self._lock:
            if size > self.bound - self.handed_out:
                return False
            self.handed_out += size
            return True

    def give_back(self, size: int) -> None:
        with self._lock:
            self.handed_out -= size

    @property
    def free(self) -> int:
        return max(self.bound - self.handed_out, 0)


def _share() -> int:
    """One device's bound: the host's, split evenly between the devices (bytes)."""
    return read_bound() // ordinals.count()


#: Each device's budget, by ordinal; BUDGET is device 0's.
BUDGETS = tuple(Budget(_share()) for _ in range(ordinals.count()))
BUDGET = BUDGETS[0]


def reload() -> None:
    """Read the bound again (tests that point HIP_FFI_CPU_CGROUP at a fake hierarchy); what
    is handed out stays counted."""
    share = _share()
    for budget in BUDGETS:
        budget.bound = share

"""Bad accesses in kernels on the cpu platform: what is always caught, and the checked mode.

A GPU reports a kernel's bad access as hipErrorIllegalAddress and the process lives; native
code on the host would die of SIGSEGV. So the runtime library (native/hip_cpu_runtime.cpp)
installs a SIGSEGV/SIGBUS/SIGFPE/SIGILL handler when it loads: a fault raised while a thread
runs a kernel's block unwinds that block, the launch fails (the next synchronize of its stream
returns hipErrorIllegalAddress, hipErrorLaunchFailure for an integer division by zero or an
illegal instruction: __builtin_trap()) and `HipApi.error_detail(code)` says which kernel, block
and thread, and at what address. Faults of any other code keep their previous action (the
process dies as it would have). A kernel's abort() and __trap() fail the launch without a
signal (hipErrorLaunchFailure; the code object defines abort() itself, as it does assert's
__assert_fail): SIGABRT is never caught, so the C library's own aborts still end the process.
This costs a few stores per block, nothing measurable, so it is always on.

The error is not sticky, unlike CUDA's: the stream, the device and every allocation stay
usable. What the kernel wrote before the fault stays written, and its other blocks may or may
not have run (the launch stops at its first failure).

What faults is what the host's memory protection catches: an address far outside every
mapping, a null pointer, a stack overflow. A small overrun of a buffer lands in the memory
around it and is not seen. The checked mode (`HIP_FFI_CPU_CHECKED=1`, read at load; `CHECKED`)
adds guard pages: every allocation (hipMalloc, hipMallocAsync, hipHostMalloc) gets its own
mapping, ending at 256-byte granularity right before an inaccessible page (one more before it),
and each launch makes the dynamic shared memory past its size inaccessible while it runs (whole
pages: an overrun of less than a page past the size is not seen). It costs a mapping per
allocation and two mprotect calls per launch and worker thread. Static `__shared__` arrays have
no guard in either mode.

Limits: a fault inside a C library call that holds a lock (printf with a bad pointer) leaves
that lock held. A SIGSEGV handler installed after the first launch (faulthandler.enable())
sees kernel faults first; install it before, or not at all.
"""

from __future__ import annotations

import os

from hip_cpu.shared_objects import libc

CHECKED = os.environ.get("HIP_FFI_CPU_CHECKED", "") == "1"
_PAGE = os.sysconf("SC_PAGE_SIZE")
_PROT_NONE, _PROT_READ_WRITE = 0, 0x1 | 0x2
_MAP_PRIVATE_ANONYMOUS_NORESERVE = 0x02 | 0x20 | 0x4000
_MAP_FAILED = (1 << 64) - 1


def map_guarded(size: int) -> tuple[int, int, int] | None:
    """(base, mapping, mapping length) of `size` bytes (a multiple of 256) that end right
    before an inaccessible page, with another one before the first page; None when the address
    space or the memory is exhausted."""
    pages = -(-size // _PAGE) * _PAGE
    length = pages + 2 * _PAGE
    mapping = int(libc.mmap(0, length, _PROT_NONE, _MAP_PRIVATE_ANONYMOUS_NORESERVE, -1, 0))
    if mapping in (0, _MAP_FAILED):
        return None
    if libc.mprotect(mapping + _PAGE, pages, _PROT_READ_WRITE) != 0:
        libc.munmap(mapping, length)
        return None
    return mapping + _PAGE + pages - size, mapping, length


def unmap(mapping: int, length: int) -> None:
    libc.munmap(mapping, length)

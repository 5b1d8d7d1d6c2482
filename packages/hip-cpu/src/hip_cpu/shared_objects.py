"""Native code of the cpu platform: shared objects, libc, and the runtime library.

cffi's ABI mode can only call functions declared in `cdef/`; the cpu platform calls C that is
not part of the HIP API (libc, its runtime library, kernel entry points). So symbols are
resolved with ctypes (dlopen/dlsym only) and called through cffi function-pointer casts, which
release the GIL like every cffi call. The pointer types use uintptr_t for addresses, so Python
ints pass straight through (same registers as pointers on every 64-bit ABI).
"""

from __future__ import annotations

import _ctypes
import ctypes
import os
import tempfile
import threading
from typing import Any

from hip_cpu import toolchain
from hip_ffi._ffi import ffi

#: Launch-slot layout (include/hip_cpu_abi.h).
SLOT_ABI, SLOT_GRID, SLOT_BLOCK, SLOT_DYN_SHARED = 0, 1, 4, 7
SLOT_ARGS, SLOT_RUNTIME, SLOT_MESSAGE, SLOT_MESSAGE_SIZE, SLOT_FLAGS = 8, 9, 10, 11, 12
SLOT_COUNT = 13
LAUNCH_CHECKED = 1  # HIPCPU_LAUNCH_CHECKED
LAUNCH_COOPERATIVE = 2  # HIPCPU_LAUNCH_COOPERATIVE
MAX_DYNAMIC_SHARED = 65536  # HIPCPU_MAX_DYNAMIC_SHARED


class SharedObject:
    """A dlopen()ed library: symbol addresses by name, and an explicit close()."""

    def __init__(self, path: str, fd: int = -1) -> None:
        # RTLD_LOCAL: every code object keeps its own symbols (two loads of one kernel never
        # share globals); RTLD_NOW: a missing symbol fails here, not at the first call.
        self._library: ctypes.CDLL | None = ctypes.CDLL(path, mode=os.RTLD_NOW | os.RTLD_LOCAL)
        self.path = path
        self._fd = fd  # the memfd behind `path`, closed with the library

    def symbol(self, name: str) -> int | None:
        """The address of `name`, or None when the library does not export it."""
        if self._library is None:
            return None
        try:
            function = self._library[name]
        except AttributeError:
            return None
        value = ctypes.cast(function, ctypes.c_void_p).value
        return int(value) if value else None

    def close(self) -> None:
        """dlclose(); the caller guarantees nothing runs its code any more."""
        if self._library is not None:
            _ctypes.dlclose(self._library._handle)
            self._library = None
        if self._fd >= 0:
            os.close(self._fd)
            self._fd = -1


def load_image(image: bytes) -> SharedObject:
    """dlopen a shared object held in memory: through a memfd, so each load is a separate
    instance of the code (its own globals), and nothing is left on disk. The memfd stays open
    while the library is loaded: dlopen recognizes libraries by path, and a closed descriptor's
    number (hence /proc/self/fd/N) would be reused by the next load."""
    try:
        fd = os.memfd_create("hip-ffi-code-object", os.MFD_CLOEXEC)
    except (AttributeError, OSError):
        fd = -1  # no memfd (or a noexec policy on it): a temporary file instead
    if fd >= 0:
        try:
            view = memoryview(image)
            while view:  # os.write may write less than asked
                view = view[os.write(fd, view) :]
            return SharedObject(f"/proc/self/fd/{fd}", fd)
        except OSError:
            os.close(fd)
    directory = toolchain.cache_dir() or toolchain.private_dir()
    with tempfile.NamedTemporaryFile(dir=directory, suffix=".so", delete=False) as file:
        file.write(image)
    try:
        return SharedObject(file.name)
    finally:
        os.unlink(file.name)


def function(address: int, signature: str) -> Any:
    """A cffi function pointer of C type `signature` at `address`."""
    return ffi.cast(signature, address)


class _Libc:
    def __init__(self) -> None:
        libc = SharedObject("libc.so.6")

        def bind(name: str, signature: str) -> Any:
            address = libc.symbol(name)
            if address is None:
                raise OSError(f"libc has no {name}")
            return function(address, signature)

        self.memmove = bind("memmove", "uintptr_t(*)(uintptr_t, uintptr_t, size_t)")
        self.memset = bind("memset", "uintptr_t(*)(uintptr_t, int, size_t)")
        self.wmemset = bind("wmemset", "uintptr_t(*)(uintptr_t, int, size_t)")  # 4-byte fill
        self.aligned_alloc = bind("aligned_alloc", "uintptr_t(*)(size_t, size_t)")
        self.free = bind("free", "void(*)(uintptr_t)")
        # checked mode's guarded allocations (faults.py)
        self.mmap = bind("mmap", "uintptr_t(*)(uintptr_t, size_t, int, int, int, long)")
        self.mprotect = bind("mprotect", "int(*)(uintptr_t, size_t, int)")
        self.munmap = bind("munmap", "int(*)(uintptr_t, size_t)")
        # the shareable arena of device memory (arena.py): MADV_REMOVE gives pages back
        self.madvise = bind("madvise", "int(*)(uintptr_t, size_t, int)")
        self._keep = libc


libc = _Libc()


class Runtime:
    """The runtime library (native/hip_cpu_runtime.cpp): worker pool, fiber stacks, GEMM."""

    def __init__(self, threads: int, stack_bytes: int) -> None:
        self.library = SharedObject(str(toolchain.build_runtime()))
        init = self._function("hipcpu_init", "uintptr_t(*)(unsigned int, unsigned long long)")
        self.table = int(init(threads, stack_bytes))
        self.threads = threads
        self.gemm = self._function(
            "hipcpu_gemm",
            "int(*)(int, int, long long, long long, long long, double, uintptr_t, int, long long,"
            " long long, uintptr_t, int, long long, long long, double, uintptr_t, int, long long,"
            " long long, int)",
        )

    def _function(self, name: str, signature: str) -> Any:
        address = self.library.symbol(name)
        if address is None:
            raise RuntimeError(f"the cpu runtime library lacks {name}")
        return function(address, signature)


_runtime: Runtime | None = None
_runtime_error: str | None = None
_runtime_lock = threading.Lock()


def worker_threads() -> int:
    """Threads that run blocks: HIP_FFI_CPU_THREADS, else every core this process may use."""
    forced = os.environ.get("HIP_FFI_CPU_THREADS", "")
    if forced.isdigit() and int(forced) > 0:
        return int(forced)
    return len(os.sched_getaffinity(0))


def fiber_stack_bytes() -> int:
    """Usable stack of each GPU thread of a block that uses barriers: HIP_FFI_CPU_STACK_SIZE
    bytes, else 128 KiB (reserved address space; only touched pages cost memory)."""
    forced = os.environ.get("HIP_FFI_CPU_STACK_SIZE", "")
    return int(forced) if forced.isdigit() and int(forced) >= 16384 else 128 * 1024


def runtime() -> Runtime:
    """The runtime library, built (or taken from the cache) and started on first use.

    Raises RuntimeError saying why when it cannot be built; the failure is remembered.
    """
    global _runtime, _runtime_error
    with _runtime_lock:
        if _runtime is None:
            if _runtime_error is not None:
                raise RuntimeError(_runtime_error)
            try:
                _runtime = Runtime(worker_threads(), fiber_stack_bytes())
            except (RuntimeError, OSError) as error:
                _runtime_error = str(error)
                raise RuntimeError(_runtime_error) from error
        return _runtime

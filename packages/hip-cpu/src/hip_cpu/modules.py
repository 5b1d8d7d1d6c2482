"""hipModule* of the cpu platform: code objects (shared objects from our hiprtc) in memory.

A load is a separate instance (dlopen of a memfd copy), with its own `__device__` globals.
Before anything is dlopen()ed the image is checked whole (images.py: every ELF table inside
the bytes, and the SHA-256 seal our hiprtc appends): a truncated or corrupt image is
hipErrorInvalidImage; a code object built for another machine, another platform (an AMD or
NVIDIA binary) or by something else than this platform's hiprtc is hipErrorNoBinaryForGpu, as
is one of another ABI version of this platform (read after the load).
hipModuleLoadData gets a bare pointer, so its size is read from the ELF headers (the seal
follows them); callers that hold the bytes check them first (`HipApi.check_code_object`).
hipModuleUnload first waits for all queued work (like hipFree), so no queued launch runs
unloaded code; a graph that still holds one of its kernels gets hipErrorInvalidHandle when it
replays it.
"""

from __future__ import annotations

import functools
import threading
from typing import Any

from hip_cpu import elf, images, status, toolchain
from hip_cpu.shared_objects import SharedObject, function, load_image
from hip_cpu.source_scan import entry_symbol
from hip_cpu.streams import ENGINE
from hip_ffi._ffi import ffi
from hip_ffi.handles import Registry, address, c_string

LAUNCH_PREFIX = "__hipcpu_launch_"
DESCRIBE_PREFIX = "__hipcpu_describe_"
ABI_SYMBOL = "__hipcpu_abi_version"
MAX_PARAMETERS = 256


class Module:
    def __init__(self, library: SharedObject, image: bytes) -> None:
        self.library = library
        self.image = image
        self.functions: dict[str, Function] = {}
        self._running = 0  # launches executing its code right now
        self._unloaded = False
        self._lock = threading.Lock()

    @functools.cached_property
    def symbols(self) -> dict[str, elf.Symbol]:
        return elf.symbols(self.image)

    def enter(self) -> bool:
        """Before running its code: False once unloaded."""
        with self._lock:
            if self._unloaded:
                return False
            self._running += 1
            return True

    def exit(self) -> None:
        with self._lock:
            self._running -= 1
            close = self._unloaded and self._running == 0
        if close:
            self.library.close()

    def unload(self) -> None:
        with self._lock:
            self._unloaded = True
            close = self._running == 0
        if close:
            self.library.close()


class Function:
    """A kernel: its launch entry point and its packed-argument layout."""

    def __init__(self, module: Module, name: str, entry: int, layout: list[tuple[int, int]]):
        self.module = module
        self.name = name
        self.handle = 0  # its hipFunction_t value, set when registered
        self.entry = function(entry, "int(*)(unsigned long long*)")
        self.offsets: list[tuple[int, int]] = []  # (offset, size) per parameter
        end = 0
        for size, alignment in layout:
            end = -(-end // alignment) * alignment
            self.offsets.append((end, size))
            end += size
        self.arg_size = end


MODULES: Registry[Module] = Registry("hipModule_t")
KERNELS: Registry[Function] = Registry("hipFunction_t")


def _load(image: bytes) -> tuple[int, Module | None]:
    # A truncated or corrupt object would fault inside dlopen, not fail: check it whole.
    error, _reason = images.check_code_object(image)
    if error:
        return error, None
    try:
        library = load_image(image)
    except OSError:
        return status.INVALID_IMAGE, None
    abi = library.symbol(ABI_SYMBOL)
    if abi is None or ffi.cast("unsigned int*", abi)[0] != toolchain.ABI_VERSION:
        library.close()
        return status.NO_BINARY_FOR_GPU, None
    return status.SUCCESS, Module(library, image)


def _store(out: Any, image: bytes) -> int:
    error, module = _load(image)
    if module is None:
        return error
    out[0] = MODULES.cdata(MODULES.add(module))
    return status.SUCCESS


def hipModuleLoad(module: Any, file_name: Any) -> int:
    path = c_string(file_name)
    if module == ffi.NULL or path is None:
        return status.INVALID_VALUE
    try:
        with open(path, "rb") as file:
            image = file.read()
    except OSError:
        return status.FILE_NOT_FOUND
    return _store(module, image)


def hipModuleLoadData(module: Any, image: Any) -> int:
    """Load a code object from memory; its size is read from its ELF header."""
    if module == ffi.NULL or address(image) == 0:
        return status.INVALID_VALUE
    if isinstance(image, bytes):
        return _store(module, image)
    start = ffi.cast("char*", image)
    header = ffi.buffer(start, elf.HEADER_SIZE)[:]
    if not elf.is_elf64(header):
        return status.INVALID_IMAGE
    size = elf.image_size(header, lambda offset, n: ffi.buffer(start + offset, n)[:])
    return _store(module, ffi.buffer(start, size + images.TRAILER)[:])


def hipModuleUnload(module: Any) -> int:
    found = MODULES.remove(module)
    if found is None:
        return status.INVALID_HANDLE
    for kernel in found.functions.values():
        KERNELS.remove(kernel.handle)
    if ENGINE.must_not_wait():  # a finalizer on a worker thread: unload after queued work
        ENGINE.release_later(found.unload)
    else:
        ENGINE.wait_all()
        found.unload()
    return status.SUCCESS


def hipModuleGetFunction(out: Any, module: Any, name: Any) -> int:
    found = MODULES.get(module)
    if found is None:
        return status.INVALID_HANDLE
    text = c_string(name)
    if out == ffi.NULL or text is None:
        return status.INVALID_VALUE
    kernel = found.functions.get(text)
    if kernel is None:
        symbol = entry_symbol(text)  # a qualified name or a name expression's lowered form
        entry = found.library.symbol(LAUNCH_PREFIX + symbol)
        describe = found.library.symbol(DESCRIBE_PREFIX + symbol)
        if entry is None or describe is None:
            return status.NOT_FOUND
        layout_call = function(describe, "int(*)(unsigned long long*, int)")
        buffer = ffi.new("unsigned long long[]", 2 * MAX_PARAMETERS)
        count = layout_call(buffer, MAX_PARAMETERS)
        if count > MAX_PARAMETERS:
            return status.INVALID_DEVICE_FUNCTION
        layout = [(int(buffer[2 * i]), int(buffer[2 * i + 1])) for i in range(count)]
        kernel = Function(found, text, entry, layout)
        kernel.handle = KERNELS.add(kernel)
        found.functions[text] = kernel
    out[0] = KERNELS.cdata(kernel.handle)
    return status.SUCCESS


def hipModuleGetGlobal(pointer: Any, size: Any, module: Any, name: Any) -> int:
    """Address and size (bytes) of a `__device__`/`__constant__` variable at global scope."""
    found = MODULES.get(module)
    if found is None:
        return status.INVALID_HANDLE
    text = c_string(name)
    if text is None:
        return status.INVALID_VALUE
    symbol = found.symbols.get(text)
    abi = found.symbols.get(ABI_SYMBOL)
    anchor = found.library.symbol(ABI_SYMBOL)
    if symbol is None or symbol.kind != 1 or abi is None or anchor is None:  # 1: STT_OBJECT
        return status.NOT_FOUND
    base = anchor - abi.value  # where the code object was loaded
    if pointer != ffi.NULL:
        pointer[0] = ffi.cast("void*", base + symbol.value)
    if size != ffi.NULL:
        size[0] = symbol.size
    return status.SUCCESS

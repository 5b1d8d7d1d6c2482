"""hipIpc*: device memory and events shared with other processes (cpu platform).

A handle is HIP's 64 opaque bytes. Here they say where the exporter's arena (arena.py) is and
what in it: little-endian, (magic "HIPc", layout version, kind 1 memory / 2 event, exporter
pid, memfd descriptor number in the exporter, file offset, size, serial, table slot, device,
memfd token), then a checksum of those 56 bytes. Opening one:
1. checks the bytes (magic, version, kind, checksum): hipErrorInvalidValue otherwise;
2. refuses the exporting process itself with hipErrorInvalidContext, as HIP does;
3. opens /proc/<pid>/fd/<fd>, checking the memfd's name (pid and random token) before and
   after, then the slot of the exporter's table: the allocation (or event) must still be the
   one the handle named. An exporter that is gone, or a freed allocation or destroyed event,
   is hipErrorInvalidHandle; a mapping that fails is hipErrorMapFailed;
4. maps the pages of the allocation (of the event's slot) MAP_SHARED: the same memory, no
   copy. Each open is a mapping of its own (HIP allows one open per handle and process; this
   platform allows more).

hipIpcCloseMemHandle unmaps once no queued work can use the mapping (as hipFree waits); the
exporter's memory is never freed by an importer. hipFree in the exporter while an importer
holds the memory is undefined on HIP; here the importer keeps valid pages whose contents the
exporter may reuse (nothing crashes). Only memory hipMalloc returned can be exported: pool
allocations (hipMallocAsync) and imported memory are hipErrorInvalidValue (as on CUDA), and
in checked mode (faults.py: private guarded mappings) or without an arena export is
hipErrorNotSupported. Needs a Linux /proc where the importer may open the exporter's
descriptors (same user; no hardened ptrace policy in between).
"""

from __future__ import annotations

import hashlib
import os
import struct
import threading
from dataclasses import dataclass
from typing import Any

from hip_cpu import arena, memory, ordinals, shared_events, status
from hip_cpu.stream_api import EVENTS
from hip_cpu.stream_state import Event
from hip_ffi._ffi import ffi
from hip_ffi.constants import (
    ERROR_CODES,
    EVENT_DISABLE_TIMING,
    EVENT_INTERPROCESS,
    IPC_HANDLE_SIZE,
    IPC_MEM_LAZY_ENABLE_PEER_ACCESS,
)
from hip_ffi.handles import address

INVALID_CONTEXT = ERROR_CODES["hipErrorInvalidContext"]
MAP_FAILED = ERROR_CODES["hipErrorMapFailed"]
_MAGIC, _VERSION, _MEMORY, _EVENT = b"HIPc", 1, 1, 2
_FIELDS = struct.Struct("<4sHHIiQQQIiQ")  # 56 bytes, then an 8-byte checksum
_OPEN_FLAGS = (0, IPC_MEM_LAZY_ENABLE_PEER_ACCESS)
_export_lock = threading.Lock()


@dataclass(frozen=True)
class Handle:
    """What the 64 bytes of a handle say."""

    kind: int
    pid: int
    fd: int
    offset: int  # in the exporter's memfd
    size: int
    serial: int
    slot: int
    device: int
    token: int


def pack(handle: Handle) -> bytes:
    fields = _FIELDS.pack(
        _MAGIC, _VERSION, handle.kind, handle.pid, handle.fd, handle.offset, handle.size,
        handle.serial, handle.slot, handle.device, handle.token,
    )  # fmt: skip
    return fields + _checksum(fields)


def unpack(raw: bytes) -> Handle | None:
    """The handle these bytes describe, or None when they are not a whole, intact handle."""
    if len(raw) != IPC_HANDLE_SIZE:
        return None
    fields, check = raw[: _FIELDS.size], raw[_FIELDS.size :]
    if check != _checksum(fields):
        return None
    magic, version, kind, *rest = _FIELDS.unpack(fields)
    if magic != _MAGIC or version != _VERSION or kind not in (_MEMORY, _EVENT):
        return None
    return Handle(kind, *rest)


def _checksum(fields: bytes) -> bytes:
    return hashlib.blake2b(fields, digest_size=IPC_HANDLE_SIZE - _FIELDS.size).digest()


def _bytes_of(handle: Any) -> bytes:
    """The 64 bytes of a hipIpcMemHandle_t / hipIpcEventHandle_t passed by value (a struct
    cdata, a pointer to one, or bytes)."""
    if isinstance(handle, bytes | bytearray):
        return bytes(handle)
    return bytes(ffi.buffer(handle.reserved))


def _write(out: Any, handle: Handle) -> None:
    ffi.memmove(out.reserved, pack(handle), IPC_HANDLE_SIZE)


def _exporter(memory_arena: arena.Arena, kind: int, offset: int, size: int, serial: int,
              slot: int, device: int) -> Handle:  # fmt: skip
    return Handle(kind, memory_arena.pid, memory_arena.fd, offset, size, serial, slot, device,
                  memory_arena.token)  # fmt: skip


# ---- opening --------------------------------------------------------------------------------


def _parse(raw: bytes, kind: int) -> Handle | int:
    handle = unpack(raw)
    if handle is None or handle.kind != kind:
        return status.INVALID_VALUE
    if handle.pid == os.getpid():
        return INVALID_CONTEXT  # HIP: a handle cannot be opened by the process that made it
    return handle


def _open_memfd(handle: Handle) -> int | None:
    """The exporter's memfd, opened read-write, if it is the one the handle names."""
    expected = f"/memfd:{arena.memfd_name(handle.pid, handle.token)} (deleted)"
    path = f"/proc/{handle.pid}/fd/{handle.fd}"
    try:
        if os.readlink(path) != expected:
            return None
        fd = os.open(path, os.O_RDWR | os.O_CLOEXEC)
    except OSError:
        return None
    try:
        if os.readlink(f"/proc/self/fd/{fd}") == expected:  # (not replaced in between)
            return fd
    except OSError:
        pass
    os.close(fd)
    return None


def _map(handle: Handle, table: int, entry: tuple[int, ...]) -> tuple[int, int, int] | int:
    """(address of the handle's bytes, mapping, mapping length) in this process, once the
    exporter's table slot (at file offset `table`) is checked to hold `entry`; else a status."""
    fd = _open_memfd(handle)
    if fd is None:
        return status.INVALID_HANDLE
    try:
        slot = os.pread(fd, arena.SLOT_BYTES, table + handle.slot * arena.SLOT_BYTES)
        if struct.unpack("<4Q", slot)[: len(entry)] != entry:
            return status.INVALID_HANDLE  # freed (destroyed), or the slot holds another one
        start = handle.offset // arena.PAGE * arena.PAGE
        length = -(-(handle.offset + handle.size) // arena.PAGE) * arena.PAGE - start
        mapped = arena.map_file(fd, start, length)
    except (OSError, struct.error):
        return status.INVALID_HANDLE
    finally:
        os.close(fd)
    if not mapped:
        return MAP_FAILED
    return mapped + handle.offset - start, mapped, length


# ---- memory ---------------------------------------------------------------------------------


def hipIpcGetMemHandle(out: Any, pointer: Any) -> int:
    """A handle to the hipMalloc allocation `pointer` points into (it names the whole
    allocation, whose base hipIpcOpenMemHandle returns)."""
    found = memory.ALLOCATIONS.containing(address(pointer))
    if address(out) == 0 or found is None or found.kind != memory.DEVICE or found.pool is not None:
        return status.INVALID_VALUE
    shared = arena.get()
    if shared is None or not found.shared or shared.pid != os.getpid():
        return status.NOT_SUPPORTED
    with _export_lock:  # (exported before a fork: this process's table does not list it)
        if found.exported is None or not shared.exported(*found.exported):
            found.exported = shared.export(found.base, found.size)
            if found.exported is None:
                return status.OUT_OF_MEMORY
    index, serial = found.exported
    offset = found.base - shared.base
    _write(out, _exporter(shared, _MEMORY, offset, found.size, serial, index, found.device))
    return status.SUCCESS


def hipIpcOpenMemHandle(out: Any, handle: Any, flags: int) -> int:
    """Map another process's allocation into this one (on the current device); `*out` is its
    base. Close it with hipIpcCloseMemHandle."""
    if address(out) == 0 or flags not in _OPEN_FLAGS:
        return status.INVALID_VALUE
    parsed = _parse(_bytes_of(handle), _MEMORY)
    if isinstance(parsed, int):
        return parsed
    mapped = _map(parsed, 0, (parsed.serial, parsed.offset, parsed.size))
    if isinstance(mapped, int):
        return mapped
    base, start, length = mapped
    imported = memory.Allocation(
        base, parsed.size, memory.IMPORTED, mapping=(start, length), device=ordinals.current()
    )
    memory.ALLOCATIONS.add(imported)
    out[0] = ffi.cast("void*", base)
    return status.SUCCESS


def hipIpcCloseMemHandle(pointer: Any) -> int:
    """Unmap what hipIpcOpenMemHandle returned, once no queued work can use it."""
    if address(pointer) == 0:
        return status.INVALID_VALUE
    return memory.free(pointer, memory.IMPORTED)


# ---- events ---------------------------------------------------------------------------------


def hipIpcGetEventHandle(out: Any, event: Any) -> int:
    """A handle to an event created with hipEventInterprocess | hipEventDisableTiming (else
    hipErrorInvalidConfiguration, as HIP answers)."""
    found = EVENTS.get(event)
    if found is None:
        return status.INVALID_HANDLE
    if address(out) == 0:
        return status.INVALID_VALUE
    if not found.flags & EVENT_INTERPROCESS:
        return status.INVALID_CONFIGURATION
    shared = found.shared
    if shared is None:
        return status.NOT_SUPPORTED
    if shared.handle:  # an opened event: the handle it came from
        ffi.memmove(out.reserved, shared.handle, IPC_HANDLE_SIZE)
        return status.SUCCESS
    memory_arena = arena.get()
    if memory_arena is None or memory_arena.pid != os.getpid():
        return status.NOT_SUPPORTED
    offset = shared.address - memory_arena.base
    serial = int(shared.words[0])
    _write(out, _exporter(memory_arena, _EVENT, offset, arena.SLOT_BYTES, serial, shared.slot,
                          ordinals.current()))  # fmt: skip
    return status.SUCCESS


def hipIpcOpenEventHandle(out: Any, handle: Any) -> int:
    """Another process's interprocess event, usable here as if created with
    hipEventInterprocess | hipEventDisableTiming; destroy it with hipEventDestroy."""
    if address(out) == 0:
        return status.INVALID_VALUE
    raw = _bytes_of(handle)
    parsed = _parse(raw, _EVENT)
    if isinstance(parsed, int):
        return parsed
    mapped = _map(parsed, arena.EVENT_TABLE, (parsed.serial,))
    if isinstance(mapped, int):
        return mapped
    slot, start, length = mapped
    opened = Event(EVENT_INTERPROCESS | EVENT_DISABLE_TIMING)
    opened.shared = shared_events.Shared(slot, mapping=(start, length), handle=raw)
    out[0] = EVENTS.cdata(EVENTS.add(opened))
    return status.SUCCESS

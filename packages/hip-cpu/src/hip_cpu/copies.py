"""hipMemcpy* and hipMemset* of the cpu platform.

Every copy is a memmove and every fill a memset/wmemset through cffi, which releases the GIL.

Ordering and blocking, as HIP documents them:
- The synchronous calls (hipMemcpy, hipMemcpyHtoD/DtoH/DtoD, hipMemcpyPeer, hipMemset,
  hipMemsetD8/D32) run in null-stream order (the current device's; hipMemcpyPeer: both
  devices') and return when done.
- The *Async calls enqueue the work on their stream and return at once, when the host side is
  device or pinned memory (hipMalloc, hipHostMalloc, hipHostRegister). When a host buffer is
  pageable they behave like HIP's: they wait for the stream, copy, and return when done, so
  the caller may reuse the buffer at once (and gets no overlap; docs/architecture.md, Semantics).
- hipMemcpyWithStream: in `stream`'s order, and returns when done.
A copy that runs past the end of a known allocation is refused with hipErrorInvalidValue;
pageable memory cannot be checked.
"""

from __future__ import annotations

from typing import Any

from hip_cpu import ordinals, status
from hip_cpu.memory import check_range, is_pinned
from hip_cpu.shared_objects import libc
from hip_cpu.stream_state import Stream
from hip_cpu.streams import ENGINE
from hip_ffi.handles import address

_KINDS = range(0, 5)  # hipMemcpyHostToHost .. hipMemcpyDefault


def _copy(dst: int, src: int, size: int) -> int:
    if size:
        libc.memmove(dst, src, size)
    return status.SUCCESS


def _validate(dst: int, src: int, size: int, kind: int) -> int:
    if kind not in _KINDS:
        return status.INVALID_MEMCPY_DIRECTION
    return check_range(dst, size) or check_range(src, size)


def _memcpy(dst: Any, src: Any, size: int, kind: int, stream: Stream | None, sync: bool) -> int:
    if stream is None:
        return status.INVALID_HANDLE
    d, s = address(dst), address(src)
    error = _validate(d, s, size, kind)
    if error:
        return error
    if size == 0:
        return status.SUCCESS
    if not sync and (stream.capture is not None or (is_pinned(d) and is_pinned(s))):
        return ENGINE.submit(stream, lambda: _copy(d, s, size))  # (a capture records it)
    return ENGINE.run_sync(stream, lambda: _copy(d, s, size))


def hipMemcpy(dst: Any, src: Any, size: int, kind: int) -> int:
    return _memcpy(dst, src, size, kind, ENGINE.null, sync=True)


def hipMemcpyAsync(dst: Any, src: Any, size: int, kind: int, stream: Any) -> int:
    return _memcpy(dst, src, size, kind, ENGINE.resolve(stream), sync=False)


def hipMemcpyWithStream(dst: Any, src: Any, size: int, kind: int, stream: Any) -> int:
    return _memcpy(dst, src, size, kind, ENGINE.resolve(stream), sync=True)


def hipMemcpyHtoD(dst: Any, src: Any, size: int) -> int:
    return _memcpy(dst, src, size, 1, ENGINE.null, sync=True)


def hipMemcpyDtoH(dst: Any, src: Any, size: int) -> int:
    return _memcpy(dst, src, size, 2, ENGINE.null, sync=True)


def hipMemcpyDtoD(dst: Any, src: Any, size: int) -> int:
    return _memcpy(dst, src, size, 3, ENGINE.null, sync=True)


def hipMemcpyHtoDAsync(dst: Any, src: Any, size: int, stream: Any) -> int:
    return _memcpy(dst, src, size, 1, ENGINE.resolve(stream), sync=False)


def hipMemcpyDtoHAsync(dst: Any, src: Any, size: int, stream: Any) -> int:
    return _memcpy(dst, src, size, 2, ENGINE.resolve(stream), sync=False)


def hipMemcpyDtoDAsync(dst: Any, src: Any, size: int, stream: Any) -> int:
    return _memcpy(dst, src, size, 3, ENGINE.resolve(stream), sync=False)


def hipMemcpyPeer(dst: Any, dst_device: int, src: Any, src_device: int, size: int) -> int:
    """Copy `size` bytes from `src` on `src_device` to `dst` on `dst_device` (no peer access
    needed), after the work ordered before it on both devices' null streams; returns when
    done."""
    if not (ordinals.valid(dst_device) and ordinals.valid(src_device)):
        return status.INVALID_DEVICE
    error = _validate(address(dst), address(src), size, 3)
    if error:
        return error
    if src_device != dst_device:  # the source device's null-stream order first
        ENGINE.run_sync(ENGINE.nulls[src_device], lambda: status.SUCCESS)
    return _memcpy(dst, src, size, 3, ENGINE.nulls[dst_device], sync=True)


def hipMemcpyPeerAsync(
    dst: Any, dst_device: int, src: Any, src_device: int, size: int, stream: Any
) -> int:
    """The same copy queued on `stream` (of either device, or another): ordered on it only."""
    if not (ordinals.valid(dst_device) and ordinals.valid(src_device)):
        return status.INVALID_DEVICE
    return _memcpy(dst, src, size, 3, ENGINE.resolve(stream), sync=False)


def _int32(value: int) -> int:
    """The 32-bit pattern of `value` as the signed int that wmemset takes."""
    value &= 0xFFFFFFFF
    return value - (1 << 32) if value & 0x80000000 else value


def _memset(dst: Any, value: int, count: int, width: int, stream: Stream | None, sync: bool) -> int:
    """Fill `count` elements of `width` bytes (1 or 4) with `value`."""
    if stream is None:
        return status.INVALID_HANDLE
    d = address(dst)
    error = check_range(d, count * width)
    if error or count == 0:
        return error
    fill = libc.memset if width == 1 else libc.wmemset  # wchar_t is 4 bytes on Linux
    pattern = value & 0xFF if width == 1 else _int32(value)

    def work() -> int:
        fill(d, pattern, count)
        return status.SUCCESS

    if not sync and (stream.capture is not None or is_pinned(d)):
        return ENGINE.submit(stream, work)
    return ENGINE.run_sync(stream, work)


def hipMemset(dst: Any, value: int, size: int) -> int:
    """Set `size` bytes to the low byte of `value`."""
    return _memset(dst, value, size, 1, ENGINE.null, sync=True)


def hipMemsetAsync(dst: Any, value: int, size: int, stream: Any) -> int:
    return _memset(dst, value, size, 1, ENGINE.resolve(stream), sync=False)


def hipMemsetD8(dst: Any, value: int, count: int) -> int:
    return _memset(dst, value, count, 1, ENGINE.null, sync=True)


def hipMemsetD8Async(dst: Any, value: int, count: int, stream: Any) -> int:
    return _memset(dst, value, count, 1, ENGINE.resolve(stream), sync=False)


def hipMemsetD32(dst: Any, value: int, count: int) -> int:
    """Set `count` 4-byte words to `value`."""
    return _memset(dst, value, count, 4, ENGINE.null, sync=True)


def hipMemsetD32Async(dst: Any, value: int, count: int, stream: Any) -> int:
    return _memset(dst, value, count, 4, ENGINE.resolve(stream), sync=False)

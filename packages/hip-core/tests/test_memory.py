"""Buffers, views, copies and fills: data integrity, lifetimes and bad input."""

from __future__ import annotations

import gc

import numpy as np
import pytest

from hip_core import (
    ClosedError,
    Device,
    DeviceBuffer,
    HipOutOfMemoryError,
    MemoryPool,
    PinnedBuffer,
)


def test_round_trip_bytes_and_numpy(device: Device) -> None:
    data = np.random.default_rng().integers(0, 256, size=3 << 20, dtype=np.uint8)
    with device.allocate(data.nbytes) as buffer:
        buffer.copy_from(data)
        back = np.empty_like(data)
        buffer.copy_to(back)
        assert np.array_equal(back, data)
        raw = bytearray(data.nbytes)
        buffer.copy_to(raw)
        assert bytes(raw) == data.tobytes()


def test_async_copies_through_pinned_memory(device: Device) -> None:
    stream = device.create_stream()
    values = np.random.default_rng().standard_normal(1 << 18).astype(np.float32)
    pinned_in = device.allocate_pinned(values.nbytes)
    pinned_in.numpy(np.float32)[:] = values
    pinned_out = PinnedBuffer.allocate(values.nbytes)
    buffer = device.allocate(values.nbytes)
    buffer.copy_from(pinned_in, stream=stream)
    buffer.copy_to(pinned_out, stream=stream)
    stream.sync()
    assert np.array_equal(pinned_out.numpy(np.float32), values)
    assert bytes(pinned_out.memoryview()) == values.tobytes()


def test_device_to_device_and_fill(device: Device) -> None:
    a, b = device.allocate(1000), device.allocate(1000)
    a.fill(0xAB)
    b.copy_from(a)
    out = bytearray(1000)
    b.copy_to(out)
    assert out == b"\xab" * 1000


def test_view_shares_memory_and_keeps_the_parent_alive(device: Device) -> None:
    parent = device.allocate(4096)
    parent.fill(0)
    view = parent.view(1024, 512)
    assert view.is_view and view.size == 512 and view.ptr == parent.ptr + 1024
    del parent
    gc.collect()  # the view still holds the allocation
    view.fill(5)
    out = bytearray(512)
    view.copy_to(out)
    assert out == b"\x05" * 512


def test_closing_a_view_never_frees_the_parent(device: Device) -> None:
    parent = device.allocate(4096)
    view = parent.view(0, 100)
    view.close()
    assert view.closed and not parent.closed
    parent.fill(1)  # still usable
    with pytest.raises(ClosedError):
        view.fill(1)


@pytest.mark.parametrize("pinned", [False, True], ids=["device", "pinned"])
def test_closing_a_full_size_view_never_frees_the_parent(device: Device, pinned: bool) -> None:
    # A view that spans its whole parent is still a view: it was once taken for the parent.
    parent = device.allocate_pinned(1024) if pinned else device.allocate(1024)
    view = parent.view(0, 1024)
    assert view.is_view and not parent.is_view
    assert view.view(0).is_view  # a view of a view too
    view.close()
    assert view.closed and not parent.closed
    if isinstance(parent, PinnedBuffer):
        parent.memoryview()[0] = 1  # still usable
    else:
        parent.fill(1)
    with pytest.raises(ClosedError):
        view.view(0)


def test_closing_the_parent_closes_its_views(device: Device) -> None:
    parent = device.allocate(4096)
    view = parent.view(100)
    parent.close()
    assert view.closed
    with pytest.raises(ClosedError):
        view.copy_to(bytearray(10))


@pytest.mark.parametrize(("offset", "size"), [(-1, 10), (0, 4097), (4000, 200), (4096, 1)])
def test_out_of_range_views_are_refused(device: Device, offset: int, size: int) -> None:
    with pytest.raises(ValueError, match="outside the buffer"):
        device.allocate(4096).view(offset, size)


def test_oversized_copies_are_refused_before_copying(device: Device) -> None:
    buffer = device.allocate(16)
    buffer.fill(1)
    with pytest.raises(ValueError, match="holds 17 bytes"):
        buffer.copy_from(b"x" * 17)
    with pytest.raises(ValueError, match="holds 17 bytes"):
        buffer.copy_to(bytearray(17))
    out = bytearray(16)
    buffer.copy_to(out)
    assert out == b"\x01" * 16  # nothing was overwritten


def test_bad_host_objects_are_clear_errors(device: Device) -> None:
    buffer = device.allocate(64)
    with pytest.raises(TypeError, match="bytes-like"):
        buffer.copy_from("a string")
    with pytest.raises(ValueError, match="read-only"):
        buffer.copy_to(b"immutable" * 4)
    with pytest.raises(ValueError, match="C-contiguous"):
        buffer.copy_from(np.zeros((8, 8), dtype=np.uint8)[:, ::2])
    with pytest.raises(ValueError, match="byte value"):
        buffer.fill(256)


def test_use_after_close(device: Device) -> None:
    buffer = device.allocate(64)
    buffer.close()
    for action in (lambda: buffer.fill(0), lambda: buffer.copy_from(b"x"), lambda: buffer.view(0)):
        with pytest.raises(ClosedError):
            action()
    pinned = device.allocate_pinned(64)
    pinned.close()
    with pytest.raises(ClosedError):
        pinned.memoryview()


def test_out_of_memory_is_an_exception_and_the_process_goes_on(device: Device) -> None:
    with pytest.raises(HipOutOfMemoryError) as caught:
        device.allocate(1 << 60)
    assert caught.value.api == "hipMalloc" and caught.value.recoverable
    with device.allocate(1 << 20) as ok:
        ok.fill(0)


def test_finalizer_frees_without_close(device: Device, monkeypatch: pytest.MonkeyPatch) -> None:
    from hip_core import memory

    freed: list[object] = []
    real_free = memory._hip_free

    def counting_free(api: object, pointer: object) -> None:
        freed.append(pointer)
        real_free(api, pointer)

    monkeypatch.setattr(memory, "_hip_free", counting_free)
    for _ in range(4):
        DeviceBuffer.allocate(device, 1 << 20)  # dropped at once, never closed
    gc.collect()
    assert len(freed) == 4


def test_wrapped_memory_is_released_once_by_its_owner(device: Device) -> None:
    owner = device.allocate(4096)
    released: list[int] = []
    wrapped = DeviceBuffer.wrap(owner.ptr + 1024, 1024, device, released.append, 7)
    wrapped.fill(3)
    out = bytearray(4096)
    owner.copy_to(out)
    assert out[1024:2048] == b"\x03" * 1024 and out[:1024] != b"\x03" * 1024
    wrapped.close()
    wrapped.close()
    assert released == [7] and not owner.closed
    borrowed = DeviceBuffer.wrap(owner.ptr, 16, device)  # no release: only borrowed
    borrowed.close()
    owner.fill(0)  # still allocated
    with pytest.raises(ValueError, match="cannot wrap"):
        DeviceBuffer.wrap(0, 16, device)


def test_nothing_is_printed_at_interpreter_exit(platform: str) -> None:
    # Objects still alive at exit are not released then (the runtime may be gone) and say nothing.
    import os
    import subprocess
    import sys

    code = (
        "import hip_core\n"
        "d = hip_core.Device(0)\n"
        "keep = [d.allocate(1 << 20), d.allocate_pinned(4096)]\n"
        "keep += [d.create_stream(), d.create_event()]\n"
        "cycle = [d.allocate(64)]; cycle.append(cycle)\n"
        "print('done')\n"
    )
    env = {**os.environ, "HIP_PLATFORM": platform}
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=120
    )
    assert out.returncode == 0, out.stderr
    assert out.stdout == "done\n" and out.stderr == ""


def test_stream_copy_from_a_host_address(device: Device) -> None:
    stream = device.create_stream()
    pinned = device.allocate_pinned(4096)
    pinned.numpy()[:] = np.arange(4096) % 251
    buffer = device.allocate(4096)
    buffer.fill(0)
    stream.copy_from_host(buffer.ptr + 1024, pinned.ptr + 16, 2048)
    stream.sync()
    out = bytearray(4096)
    buffer.copy_to(out)
    expected = bytearray(4096)
    expected[1024:3072] = pinned.memoryview()[16:2064]
    assert out == expected


@pytest.mark.parametrize(
    ("call", "error"),
    [
        (lambda b: b.view(1.5), TypeError),
        (lambda b: b.view(0, 2.5), TypeError),
        (lambda b: b.view(True), TypeError),
        (lambda b: b.view("8"), TypeError),
        (lambda b: b.view(-1), ValueError),
        (lambda b: b.fill(1.0), TypeError),
        (lambda b: b.copy_from(np.array([object()] * 2, dtype=object)), TypeError),
        (lambda b: b.copy_to(np.empty(2, dtype=object)), TypeError),
        (lambda b: b.copy_from(np.zeros(1, dtype=[("a", "i4"), ("obj", "O")])), TypeError),
    ],
    ids=[
        "view 1.5", "view size 2.5", "view True", "view str", "view -1", "fill float",
        "object array in", "object array out", "struct with an object",
    ],
)  # fmt: skip
def test_bad_offsets_and_object_arrays_are_refused(
    device: Device, call: object, error: type
) -> None:
    buffer = device.allocate(64)
    with pytest.raises(error):
        call(buffer)  # type: ignore[operator]


def test_views_and_sizes_take_any_integer_type(device: Device) -> None:
    buffer = device.allocate(np.int64(64))
    view = buffer.view(np.int32(8), np.uint16(16))
    assert (view.ptr - buffer.ptr, view.size) == (8, 16) and type(view.size) is int
    named = np.zeros(2, dtype=[("One", "i4"), ("Other", "f4")])  # "O" only in field names
    buffer.copy_from(named)


def test_kept_host_memory_holds_no_memoryview(device: Device) -> None:
    """An asynchronous copy keeps the host object itself referenced, never a memoryview of it:
    a memoryview with an export in a dropped reference cycle (a backend, its stream and that
    stream's kept copies) cannot be cleared by the garbage collector, which then crashed the
    interpreter (tests/reliability/test_shutdown.py, objects dropped in a cycle)."""
    stream = device.create_stream()
    host = np.arange(512, dtype=np.float32)
    buffer = device.allocate(host.nbytes)
    buffer.copy_from(host, stream=stream)
    kept = [k for k in stream._keep if isinstance(k, tuple)][-1]
    assert not any(isinstance(k, memoryview) for k in gc.get_referents(kept[2]))
    cycle: list[object] = [stream, buffer, host]
    cycle.append(cycle)
    del cycle, stream, buffer, host, kept
    gc.collect()  # no "Exception ignored in tp_clear of memoryview", no crash


def test_a_failing_fast_memcpy_falls_back_to_the_surface_call(
    device: Device, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A synchronous copy through `HipApi.fast("hipMemcpy")`: a non-zero status there (no
    effect) makes the surface call again, which copies and gives HIP's status."""
    from hip_core import memory
    from hip_core._hip import hip

    calls: list[int] = []
    monkeypatch.setattr(memory, "_fast_memcpy", (hip(), lambda *a: calls.append(1) or 999))
    with device.allocate(16) as buffer:
        buffer.copy_from(bytes(range(16)))
        got = bytearray(16)
        buffer.copy_to(got)
    assert got == bytes(range(16)) and len(calls) == 2


@pytest.mark.parametrize("backend", ["caching", "hip"])
def test_allocation_tells_the_whole_allocation_and_its_maker(device: Device, backend: str) -> None:
    """DeviceBuffer.allocation(): (start, maker) of the allocation a buffer or view lies in,
    what hip_core.ipc exports from."""
    plain = device.allocate(256)
    assert plain.allocation() == (plain.ptr, device)
    assert plain.view(64, 32).allocation() == (plain.ptr, device)
    assert DeviceBuffer.wrap(plain.ptr + 16, 16, device).allocation() == (plain.ptr + 16, None)
    with MemoryPool(device, backend=backend) as pool:
        pooled = pool.allocate(1024, stream=None)
        start, maker = pooled.view(512).allocation()
        assert start == pooled.ptr and maker is pool
        pooled.close()
        with pytest.raises(ClosedError):
            pooled.allocation()
    plain.close()
    with pytest.raises(ClosedError):
        plain.allocation()

"""Stream-ordered pools: reuse, statistics, trim, limits and out-of-memory recovery."""

from __future__ import annotations

import pytest

from hip_core import ClosedError, Device, HipOutOfMemoryError, MemoryPool

BACKENDS = ["caching", "auto"]


def _pool(device: Device, backend: str, **kwargs: int) -> MemoryPool:
    return MemoryPool(device, backend=None if backend == "auto" else backend, **kwargs)


@pytest.mark.parametrize("backend", BACKENDS)
def test_allocations_are_usable_and_counted(device: Device, backend: str) -> None:
    stream = device.create_stream()
    with _pool(device, backend) as pool:
        a = pool.allocate(1 << 20, stream=stream)
        b = pool.allocate(3 << 20, stream=stream)
        a.fill(1, stream=stream)
        b.copy_from(b"\x02" * (3 << 20), stream=stream)
        stream.sync()
        out = bytearray(1 << 20)
        a.copy_to(out)
        assert out == b"\x01" * (1 << 20)
        assert pool.stats().in_use == 4 << 20
        a.close()
        b.close()
        stream.sync()
        stats = pool.stats()
        assert stats.in_use == 0 and stats.peak == 4 << 20
        pool.trim()
        assert pool.stats().cached == 0


def test_caching_allocator_reuses_freed_blocks(device: Device) -> None:
    stream = device.create_stream()
    with MemoryPool(device, backend="caching") as pool:
        first = pool.allocate(1 << 20, stream=stream)
        address = first.ptr
        first.close()
        assert pool.stats().cached == 1 << 20
        second = pool.allocate(1 << 20, stream=stream)
        assert second.ptr == address and pool.stats().cached == 0
        other = device.create_stream()
        second.close()
        third = pool.allocate(1 << 20, stream=other)  # another stream waits on the free's event
        assert third.ptr == address


@pytest.mark.parametrize("backend", BACKENDS)
def test_limit_raises_out_of_memory_and_the_pool_recovers(device: Device, backend: str) -> None:
    stream = device.create_stream()
    with _pool(device, backend, limit=4 << 20) as pool:
        held = pool.allocate(3 << 20, stream=stream)
        with pytest.raises(HipOutOfMemoryError, match="pool limit"):
            pool.allocate(2 << 20, stream=stream)
        assert pool.stats().in_use == 3 << 20
        held.close()
        again = pool.allocate(4 << 20, stream=stream)  # cached memory is trimmed, then it fits
        again.fill(0, stream=stream)
        stream.sync()
        assert pool.stats().in_use == 4 << 20


def test_device_exhaustion_trims_retries_then_raises(device: Device) -> None:
    stream = device.create_stream()
    with MemoryPool(device, backend="caching") as pool:
        cached = pool.allocate(1 << 20, stream=stream)
        cached.close()
        with pytest.raises(HipOutOfMemoryError):
            pool.allocate(1 << 60, stream=stream)
        assert pool.stats().cached == 0  # the retry gave the cached block back first
        ok = pool.allocate(1 << 20, stream=stream)
        ok.fill(0, stream=stream)
        stream.sync()


def test_buffers_outliving_their_pool_are_still_freed(device: Device) -> None:
    stream = device.create_stream()
    pool = MemoryPool(device, backend="caching")
    survivor = pool.allocate(1 << 20, stream=stream)
    pool.close()
    survivor.fill(1, stream=stream)
    survivor.close()
    stream.sync()


@pytest.mark.parametrize(("limit", "error"), [(-1, ValueError), (1.5, TypeError), ("1", TypeError)])
def test_bad_limits_are_refused(device: Device, limit: object, error: type) -> None:
    with pytest.raises(error, match="limit"):
        MemoryPool(device, backend="caching", limit=limit)  # type: ignore[arg-type]


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_buffer_outliving_its_stream_is_still_freed(device: Device, backend: str) -> None:
    """Closing a pool buffer after its stream never hands the destroyed stream to HIP."""
    stream = device.create_stream()
    with _pool(device, backend) as pool:
        buffer = pool.allocate(1 << 20, stream=stream)
        buffer.fill(1, stream=stream)
        stream.close()
        buffer.close()
        assert pool.stats().in_use == 0
        again = pool.allocate(1 << 20, stream=None)
        again.fill(2)


@pytest.mark.parametrize("backend", BACKENDS)
def test_same_size_reuse_on_one_stream_skips_the_device(device: Device, backend: str) -> None:
    """A released block of one size comes back at once on its stream, counted as cached while
    it waits; trim() gives it back to the device."""
    stream = device.create_stream()
    with _pool(device, backend) as pool:
        first = pool.allocate(3000, stream=stream)
        address = first.ptr
        first.fill(7, stream=stream)
        first.close()
        assert pool.stats().cached >= 3000 and pool.stats().in_use == 0
        second = pool.allocate(3000, stream=stream)
        assert second.ptr == address and pool.stats().in_use == 3000
        out = bytearray(3000)
        second.copy_to(out, stream=stream)  # ordered after the fill, on the same stream
        stream.sync()
        assert out == b"\x07" * 3000
        second.close()
        pool.trim()
        assert pool.stats().cached == 0


def test_same_size_reuse_on_another_stream_is_ordered_by_an_event(device: Device) -> None:
    first_stream, other = device.create_stream(), device.create_stream(non_blocking=True)
    with MemoryPool(device) as pool:
        block = pool.allocate(4096, stream=first_stream)
        address = block.ptr
        block.fill(1, stream=first_stream)
        block.close()
        again = pool.allocate(4096, stream=other)  # waits for first_stream's fill
        assert again.ptr == address
        again.fill(2, stream=other)
        out = bytearray(4096)
        again.copy_to(out, stream=other)
        other.sync()
        assert out == b"\x02" * 4096


def test_releases_on_a_closed_stream_or_pool_go_to_the_device(device: Device) -> None:
    stream = device.create_stream()
    pool = MemoryPool(device)
    kept = pool.allocate(1024, stream=stream)
    dropped = pool.allocate(1024, stream=stream)
    dropped.close()  # cached for reuse on `stream`
    stream.close()
    fresh = pool.allocate(1024, stream=None)  # never the block of the closed stream's cache
    assert fresh.ptr != kept.ptr
    pool.close()  # flushes the cache
    kept.close()
    fresh.close()


def test_a_pool_closes_on_its_own_platform_never_loading_one(
    device: Device, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Between two `use_platform` blocks hip-core has no current platform; a pool collected
    then (its finalizer runs during the next platform's import, under hip-ffi's loader lock)
    must not load one: it waited on that lock forever (the H200 suite's hang)."""
    import hip_core._hip
    import hip_ffi

    pool = MemoryPool(device)
    stream = device.create_stream()
    pool.allocate(256, stream=stream).close()
    monkeypatch.setattr(hip_core._hip, "_api", None)

    def load(*_: object) -> None:
        raise AssertionError("closing a pool loaded a platform")

    monkeypatch.setattr(hip_ffi, "load", load)
    pool.close()  # synchronizes the device, then destroys the pool: the pool's own platform
    device.synchronize()
    assert pool.closed


def test_allocate_checks_its_stream_argument(device: Device) -> None:
    """The open-Stream fast path of `allocate` refuses what the full check refuses."""
    pool = MemoryPool(device)
    with pytest.raises(TypeError, match="stream"):
        pool.allocate(64, stream=object())  # type: ignore[arg-type]
    stream = device.create_stream()
    pool.allocate(64, stream=stream).close()
    stream.close()
    with pytest.raises(ClosedError):
        pool.allocate(64, stream=stream)
    pool.close()


def test_a_pool_buffer_owns_its_memory_and_its_views_keep_it(device: Device) -> None:
    """A pool's buffer is its own allocation's owner (one object): a view keeps the memory
    after the buffer is dropped; closing the buffer closes its views and frees it once;
    collection frees it too."""
    import gc

    stream = device.create_stream()
    with MemoryPool(device) as pool:
        buffer = pool.allocate(64, stream=stream)
        buffer.copy_from(bytes(range(64)))
        view = buffer.view(8, 8)
        del buffer
        gc.collect()
        assert pool.stats().in_use == 64 and not view.closed
        got = bytearray(8)
        view.copy_to(got)
        assert got == bytes(range(8, 16))
        assert view._hold_target() is view._owner  # a graph holds the buffer itself
        del view
        gc.collect()
        assert pool.stats().in_use == 0
        buffer = pool.allocate(64, stream=stream)
        view = buffer.view(0, 8)
        buffer.close()
        assert buffer.closed and view.closed and pool.stats().in_use == 0
        buffer.close()  # twice: nothing more
        with pytest.raises(ClosedError):
            view.copy_to(bytearray(8))
        held = pool.allocate(64, stream=stream)
        held._hold_target()._hold()
        held.close()
        assert held.closed and pool.stats().in_use == 64  # deferred while held
        held._hold_target()._let_go()
        assert pool.stats().in_use == 0
    stream.close()

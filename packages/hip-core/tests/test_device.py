"""Devices, streams and events on the selected platform."""

from __future__ import annotations

import gc
import threading
import time
import weakref

import pytest

import hip_ffi
from hip_core import ClosedError, Device, Event, Stream, devices, hip_api, use_platform
from hip_ffi import LibraryNotFoundError


def test_device_properties_are_plausible(device: Device, platform: str) -> None:
    props = device.properties
    assert Device.count() >= 1 and devices()[0] == device
    assert props.name and props.arch
    assert props.total_memory > 2**28
    assert props.multiprocessors >= 1
    assert props.warp_size in (1, 32, 64) and props.warp_size >= 1
    assert props.max_threads_per_block >= 256
    assert props.shared_memory_per_block >= 48 * 1024
    assert props.platform == platform
    if platform == "nvidia":
        assert props.arch.startswith("sm_")
    free, total = device.mem_info()
    assert 0 < free <= total


def test_device_ordinal_out_of_range(device: Device) -> None:
    with pytest.raises(ValueError, match="no device 99"):
        Device(99)


def test_with_device_sets_and_restores_the_current_device(device: Device) -> None:
    with device as entered:
        assert entered is device
        assert Device.current() == device
    assert Device.current() == device  # device 0 is also the default


def test_stream_orders_work_and_reports_done(device: Device) -> None:
    stream = device.create_stream(non_blocking=True)
    buffer = device.allocate(1 << 20)
    buffer.fill(7, stream=stream)
    stream.sync()
    assert stream.done
    out = bytearray(1 << 20)
    buffer.copy_to(out)
    assert out == bytes([7]) * (1 << 20)
    stream.close()
    with pytest.raises(ClosedError):
        stream.sync()
    stream.close()  # twice is harmless


def test_priority_range_and_priority_streams(device: Device) -> None:
    least, greatest = device.create_stream().priority_range()
    assert greatest <= least
    with device.create_stream(priority=greatest) as stream:
        stream.sync()


def test_events_time_and_order_two_streams(device: Device) -> None:
    producer, consumer = device.create_stream(), device.create_stream()
    size = 8 << 20
    source, middle, sink = device.allocate(size), device.allocate(size), device.allocate(size)
    source.fill(3)
    start = producer.record()
    middle.copy_from(source, stream=producer)
    ready = producer.record()
    consumer.wait(ready)  # the consumer's copy must see the producer's
    sink.copy_from(middle, stream=consumer)
    consumer.sync()
    out = bytearray(size)
    sink.copy_to(out)
    assert out == bytes([3]) * size
    assert ready.done and start.done
    elapsed = start.elapsed_ms(ready)
    assert elapsed >= 0.0
    assert ready - start == pytest.approx(elapsed)


def test_event_without_timing_cannot_time(device: Device) -> None:
    a, b = device.create_event(timing=False), device.create_event(timing=False)
    stream = device.create_stream()
    a.record(stream)
    b.record(stream)
    b.sync()
    with pytest.raises(ValueError, match="timing=True"):
        a.elapsed_ms(b)
    assert isinstance(a, Event)


def test_host_func_runs_after_prior_work(device: Device) -> None:
    stream = device.create_stream()
    buffer = device.allocate(4096)
    buffer.fill(9, stream=stream)
    seen: list[bytes] = []
    ran = threading.Event()

    def after_fill() -> None:
        seen.append(b"ran")
        ran.set()

    stream.launch_host_func(after_fill)
    stream.sync()
    assert ran.wait(5.0) and seen == [b"ran"]


def test_device_synchronize_waits_for_every_stream(device: Device) -> None:
    streams = [device.create_stream() for _ in range(3)]
    buffers = [device.allocate(1 << 20) for _ in streams]
    for value, (stream, buffer) in enumerate(zip(streams, buffers, strict=True)):
        buffer.fill(value + 1, stream=stream)
    started = time.perf_counter()
    device.synchronize()
    assert time.perf_counter() - started < 30
    assert all(s.done for s in streams)


def test_a_borrowed_stream_handle_is_never_destroyed(device: Device) -> None:
    owner = device.create_stream()
    borrowed = Stream.from_handle(owner.handle, device)
    buffer = device.allocate(64)
    buffer.fill(1, stream=borrowed)
    borrowed.sync()
    borrowed.close()
    owner.sync()  # the stream itself is still alive
    owner.close()


def test_one_device_object_per_ordinal_and_thread(
    device: Device, monkeypatch: pytest.MonkeyPatch
) -> None:
    assert Device(0) is device and Device.current() is device and devices()[0] is device
    assert device.default_stream is device.default_stream  # kept, with what it keeps alive
    assert device.properties is device.properties
    reads: list[int] = []
    read = hip_ffi.device_properties

    def counting(api: object, ordinal: int) -> object:
        reads.append(ordinal)
        return read(api, ordinal)  # type: ignore[arg-type]

    monkeypatch.setattr(hip_ffi, "device_properties", counting)
    seen: list[Device] = []

    def other_thread() -> None:
        mine = Device(0)
        assert mine.name and mine.arch and mine.properties.warp_size  # read once
        seen.extend([mine, Device(0)])

    thread = threading.Thread(target=other_thread)
    thread.start()
    thread.join()
    assert seen[0] is seen[1] and seen[0] is not device
    assert seen[0] == device and hash(seen[0]) == hash(device)
    assert reads == [0]


def test_a_closed_default_stream_is_replaced(device: Device) -> None:
    stream = device.default_stream
    stream.close()  # not owned: releases nothing
    assert device.default_stream is not stream and not device.default_stream.closed
    device.default_stream.sync()


def test_use_platform_switches_devices_and_restores(platform: str, device: Device) -> None:
    try:
        hip_ffi.load("amd")  # ROCm 5.2's libraries in CI: a platform with no device
    except LibraryNotFoundError as error:
        pytest.skip(f"no ROCm runtime to switch to: {error}")
    before = hip_api()
    with use_platform("amd") as amd:
        assert hip_api() is amd and amd is not before and amd.platform == "amd"
        assert Device.count() == 0
        with pytest.raises(ValueError, match="no device 0"):
            Device(0)  # never the previous platform's device 0
    assert hip_api() is before and Device(0) is device
    with pytest.raises(RuntimeError, match="inside"), use_platform(platform):
        raise RuntimeError("inside")
    assert hip_api() is before  # restored after a failing block too


def test_stream_addresses_round_trip_through_from_handle(device: Device) -> None:
    assert device.default_stream.address == 0
    with device.create_stream() as owner:
        assert owner.address != 0
        borrowed = Stream.from_handle(owner.address, device)
        assert borrowed.address == owner.address
        borrowed.wait(owner.record())
        borrowed.sync()


def test_a_stream_never_synchronized_keeps_only_what_is_in_flight(device: Device) -> None:
    class Held:
        pass

    stream = device.default_stream
    stream.sync()
    held = [Held() for _ in range(64)]
    alive = [weakref.ref(h) for h in held]
    for h in held:
        stream.keep_until_sync(h)
    del held, h
    gc.collect()
    assert not any(ref() for ref in alive)  # the stream was idle at the 64th: all released
    buffer = device.allocate(64)
    buffer.copy_from(bytes(64), stream=stream)
    device.synchronize()  # releases what the default stream kept, as its sync() does
    alive = [weakref.ref(buffer)]
    del buffer
    gc.collect()
    assert alive[0]() is None


def test_no_device_is_hip_no_device_error_and_still_a_value_error(
    device: Device, monkeypatch: pytest.MonkeyPatch
) -> None:
    from hip_core import HipInvalidValueError, HipNoDeviceError

    with pytest.raises(HipInvalidValueError, match="no device 99"):
        Device(99)  # a device that does not exist, on a platform that has some
    # One past the last device: never made in this thread (a made Device is kept, and on a
    # machine of two GPUs earlier tests made Device(1)), so its ordinal is checked.
    missing = Device.count()
    monkeypatch.setattr(hip_ffi, "device_count", lambda api: (0, "hipErrorNoDevice"))
    with pytest.raises(
        HipNoDeviceError, match=f"no device {missing}: this platform has 0"
    ) as caught:
        Device(missing)
    assert isinstance(caught.value, ValueError) and caught.value.name == "hipErrorNoDevice"
    for ordinal in (1.0, True, "0"):
        with pytest.raises(TypeError, match="device ordinal"):
            Device(ordinal)  # type: ignore[arg-type]


def test_every_stream_parameter_takes_a_stream_or_none(device: Device) -> None:
    """None is the null stream (for copies and fills: their synchronous form); anything else,
    0 included, is a TypeError before anything reaches HIP."""
    from hip_core import MemoryPool, capture

    buffer, event = device.allocate(64), device.create_event()
    buffer.fill(3, stream=None)
    buffer.copy_from(b"\1" * 8, stream=None)
    event.record(None)
    event.sync()
    with MemoryPool(device, backend="caching") as pool:
        pool.allocate(16, stream=None).close()
        calls = (
            lambda bad: buffer.fill(0, stream=bad),
            lambda bad: buffer.copy_from(b"\0", stream=bad),
            lambda bad: buffer.copy_to(bytearray(1), stream=bad),
            lambda bad: event.record(bad),
            lambda bad: pool.allocate(16, stream=bad),
            lambda bad: capture(bad),
        )
        for bad in (0, 1, "default", object()):
            for call in calls:
                with pytest.raises(TypeError, match=r"stream must be a hip_core\.Stream or None"):
                    call(bad)
    with pytest.raises(ValueError, match="null stream cannot be captured"):
        capture(None)  # type: ignore[arg-type]
    out = bytearray(8)
    buffer.copy_to(out)
    assert out == b"\1" * 8

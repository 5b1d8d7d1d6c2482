"""Streams, events and graphs of the cpu platform.

Ordering is observed through host functions (hipLaunchHostFunc with a cffi callback) that log
what ran when, and that can hold a stream back on a threading.Event: no test relies on timing
luck to see an ordering violation.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator
from typing import Any

import numpy as np
import pytest

import hip_ffi
from hip_ffi import constants

E = constants.ERROR_CODES
# A failed check inside a host function (a cffi callback) must fail the test, not just warn.
pytestmark = pytest.mark.filterwarnings("error::pytest.PytestUnraisableExceptionWarning")


@pytest.fixture(scope="module")
def hip() -> Any:
    return hip_ffi.load("cpu")


class HostFunctions:
    """Enqueue Python callables on streams; they append to `log` when they run."""

    def __init__(self, hip: Any) -> None:
        self.hip = hip
        self.log: list[str] = []
        self._handles: list[Any] = []
        ffi = hip.ffi

        @ffi.callback("void(void*)")
        def trampoline(data: Any) -> None:
            ffi.from_handle(data)()

        self.trampoline = trampoline

    def enqueue(self, stream: Any, action: Callable[[], None]) -> None:
        handle = self.hip.ffi.new_handle(action)
        self._handles.append(handle)  # alive until the callback ran
        assert self.hip.hipLaunchHostFunc(stream, self.trampoline, handle) == 0

    def mark(self, stream: Any, label: str, gate: threading.Event | None = None) -> None:
        """Enqueue: wait for `gate` (if any), then log `label`."""

        def action() -> None:
            if gate is not None:
                assert gate.wait(10), "the test never opened the gate"
            self.log.append(label)

        self.enqueue(stream, action)


@pytest.fixture
def host(hip: Any) -> Iterator[HostFunctions]:
    functions = HostFunctions(hip)
    yield functions
    assert hip.hipDeviceSynchronize() == 0


@pytest.fixture
def streams(hip: Any) -> Iterator[Callable[[int], Any]]:
    created: list[Any] = []

    def create(flags: int) -> Any:
        out = hip.ffi.new("hipStream_t*")
        assert hip.hipStreamCreateWithFlags(out, flags) == 0
        created.append(out[0])
        return out[0]

    yield create
    for stream in created:
        assert hip.hipStreamDestroy(stream) == 0


def test_work_runs_off_the_calling_thread_in_stream_order(
    hip: Any, host: Any, streams: Any
) -> None:
    stream = streams(0)
    gate, threads = threading.Event(), []
    host.mark(stream, "first", gate)
    host.enqueue(stream, lambda: threads.append(threading.get_ident()))
    host.mark(stream, "second")
    assert hip.hipStreamQuery(stream) == E["hipErrorNotReady"]  # held back by the gate
    gate.set()
    # Poll instead of synchronizing: a thread blocked in a synchronize may run the work itself.
    deadline = time.monotonic() + 10
    while hip.hipStreamQuery(stream) == E["hipErrorNotReady"] and time.monotonic() < deadline:
        time.sleep(0.001)
    assert hip.hipStreamQuery(stream) == 0
    assert host.log == ["first", "second"] and threads[0] != threading.get_ident()
    assert hip.hipStreamSynchronize(stream) == 0


@pytest.mark.parametrize("blocking", [True, False], ids=["blocking", "non-blocking"])
def test_null_stream_waits_for_blocking_streams_only(
    hip: Any, host: Any, streams: Any, blocking: bool
) -> None:
    stream = streams(0 if blocking else constants.STREAM_NON_BLOCKING)
    gate = threading.Event()
    host.mark(stream, "stream", gate)
    host.mark(hip.ffi.NULL, "null")
    host.enqueue(hip.ffi.NULL, gate.set)  # only reached early if the null stream did not wait
    if blocking:  # the null stream's work waits behind the stream's: open the gate ourselves
        time.sleep(0.05)
        assert host.log == []
        gate.set()
    assert hip.hipDeviceSynchronize() == 0
    assert host.log == (["stream", "null"] if blocking else ["null", "stream"])


@pytest.mark.parametrize("blocking", [True, False], ids=["blocking", "non-blocking"])
def test_blocking_streams_wait_for_the_null_stream(
    hip: Any, host: Any, streams: Any, blocking: bool
) -> None:
    stream = streams(0 if blocking else constants.STREAM_NON_BLOCKING)
    gate = threading.Event()
    host.mark(hip.ffi.NULL, "null", gate)
    host.mark(stream, "stream")
    host.enqueue(stream, gate.set)
    if blocking:
        time.sleep(0.05)
        assert host.log == []
        gate.set()
    assert hip.hipDeviceSynchronize() == 0
    assert host.log == (["null", "stream"] if blocking else ["stream", "null"])


def test_synchronous_copy_waits_for_blocking_streams(hip: Any, host: Any, streams: Any) -> None:
    ffi = hip.ffi
    stream = streams(0)
    pinned, device = ffi.new("void**"), ffi.new("void**")
    assert hip.hipHostMalloc(pinned, 256, 0) == 0 and hip.hipMalloc(device, 256) == 0
    source = np.arange(256, dtype=np.uint8)
    ffi.memmove(pinned[0], ffi.from_buffer(source), 256)
    out = np.zeros_like(source)
    gate = threading.Event()
    host.mark(stream, "held", gate)
    assert hip.hipMemcpyAsync(device[0], pinned[0], 256, 1, stream) == 0  # queued behind it
    threading.Timer(0.05, gate.set).start()
    # hipMemcpy is on the null stream: it waits for the stream's copy, then reads the result.
    assert hip.hipMemcpy(ffi.from_buffer(out), device[0], 256, 2) == 0
    assert gate.is_set()
    np.testing.assert_array_equal(out, source)
    assert hip.hipHostFree(pinned[0]) == 0 and hip.hipFree(device[0]) == 0


def test_async_copy_from_pinned_memory_is_queued(hip: Any, host: Any, streams: Any) -> None:
    ffi = hip.ffi
    stream = streams(constants.STREAM_NON_BLOCKING)
    pinned, device = ffi.new("void**"), ffi.new("void**")
    assert hip.hipHostMalloc(pinned, 64, 0) == 0 and hip.hipMalloc(device, 64) == 0
    gate = threading.Event()
    host.mark(stream, "held", gate)
    ffi.memmove(pinned[0], b"x" * 64, 64)
    assert hip.hipMemcpyAsync(device[0], pinned[0], 64, 1, stream) == 0  # returns at once
    ffi.memmove(pinned[0], b"y" * 64, 64)  # the copy has not run yet: it will see this
    gate.set()
    assert hip.hipStreamSynchronize(stream) == 0
    out = bytearray(64)
    assert hip.hipMemcpy(ffi.from_buffer(out), device[0], 64, 2) == 0
    assert bytes(out) == b"y" * 64
    assert hip.hipHostFree(pinned[0]) == 0 and hip.hipFree(device[0]) == 0


def test_async_copy_from_pageable_memory_is_synchronous(hip: Any, streams: Any) -> None:
    ffi = hip.ffi
    stream = streams(constants.STREAM_NON_BLOCKING)
    device = ffi.new("void**")
    assert hip.hipMalloc(device, 64) == 0
    pageable = bytearray(b"a" * 64)
    assert hip.hipMemcpyAsync(device[0], ffi.from_buffer(pageable), 64, 1, stream) == 0
    pageable[:] = b"b" * 64  # HIP staged the pageable source before returning
    out = bytearray(64)
    assert hip.hipMemcpyWithStream(ffi.from_buffer(out), device[0], 64, 2, stream) == 0
    assert bytes(out) == b"a" * 64
    assert hip.hipFree(device[0]) == 0


def test_events_time_the_stream_and_join_streams(hip: Any, host: Any, streams: Any) -> None:
    ffi = hip.ffi
    a, b = streams(constants.STREAM_NON_BLOCKING), streams(constants.STREAM_NON_BLOCKING)
    start, stop = ffi.new("hipEvent_t*"), ffi.new("hipEvent_t*")
    assert hip.hipEventCreateWithFlags(start, 0) == 0 and hip.hipEventCreateWithFlags(stop, 0) == 0
    gate = threading.Event()
    assert hip.hipEventRecord(start[0], a) == 0
    host.mark(a, "a", gate)
    host.enqueue(a, lambda: time.sleep(0.05))
    assert hip.hipEventRecord(stop[0], a) == 0
    assert hip.hipStreamWaitEvent(b, stop[0], 0) == 0
    host.mark(b, "b")
    ms = ffi.new("float*")
    assert hip.hipEventQuery(stop[0]) == E["hipErrorNotReady"]
    assert hip.hipEventElapsedTime(ms, start[0], stop[0]) == E["hipErrorNotReady"]
    gate.set()
    assert hip.hipStreamSynchronize(b) == 0  # only b: it waited for a's event
    assert host.log == ["a", "b"] and hip.hipEventQuery(stop[0]) == 0
    assert hip.hipEventSynchronize(stop[0]) == 0
    assert hip.hipEventElapsedTime(ms, start[0], stop[0]) == 0
    assert 45.0 <= ms[0] < 5000.0  # the 50 ms sleep, measured on the stream
    assert hip.hipEventDestroy(start[0]) == 0 and hip.hipEventDestroy(stop[0]) == 0


def test_event_edge_cases(hip: Any) -> None:
    ffi = hip.ffi
    fresh, untimed = ffi.new("hipEvent_t*"), ffi.new("hipEvent_t*")
    assert hip.hipEventCreateWithFlags(fresh, 0) == 0
    assert hip.hipEventCreateWithFlags(untimed, constants.EVENT_DISABLE_TIMING) == 0
    ms = ffi.new("float*")
    assert hip.hipEventQuery(fresh[0]) == 0  # never recorded: nothing to wait for
    assert hip.hipEventElapsedTime(ms, fresh[0], fresh[0]) == E["hipErrorInvalidHandle"]
    assert hip.hipEventRecord(fresh[0], ffi.NULL) == 0
    assert hip.hipEventRecord(untimed[0], ffi.NULL) == 0
    assert hip.hipEventSynchronize(untimed[0]) == 0
    assert hip.hipEventElapsedTime(ms, fresh[0], untimed[0]) == E["hipErrorInvalidHandle"]
    assert hip.hipEventCreateWithFlags(fresh, 0x100) == E["hipErrorInvalidValue"]
    assert hip.hipEventDestroy(untimed[0]) == 0
    assert hip.hipEventDestroy(untimed[0]) == E["hipErrorInvalidHandle"]
    hip.hipGetLastError()


def test_stream_properties_and_special_handles(hip: Any, host: Any, streams: Any) -> None:
    ffi = hip.ffi
    out, flags, priority = ffi.new("hipStream_t*"), ffi.new("unsigned int*"), ffi.new("int*")
    least, greatest = ffi.new("int*"), ffi.new("int*")
    assert hip.hipDeviceGetStreamPriorityRange(least, greatest) == 0
    assert hip.hipStreamCreateWithPriority(out, constants.STREAM_NON_BLOCKING, -3) == 0
    assert hip.hipStreamGetFlags(out[0], flags) == 0 and flags[0] == 1
    assert hip.hipStreamGetPriority(out[0], priority) == 0
    assert greatest[0] <= priority[0] <= least[0]  # clamped into the range
    gate = threading.Event()
    host.mark(out[0], "survives destroy", gate)
    assert hip.hipStreamDestroy(out[0]) == 0  # queued work still runs
    assert hip.hipStreamDestroy(out[0]) == E["hipErrorInvalidHandle"]
    gate.set()
    for special in (0x1, 0x2):  # hipStreamLegacy, hipStreamPerThread
        host.mark(ffi.cast("hipStream_t", special), f"special {special}")
        assert hip.hipStreamSynchronize(ffi.cast("hipStream_t", special)) == 0
    assert hip.hipDeviceSynchronize() == 0
    assert sorted(host.log) == ["special 1", "special 2", "survives destroy"]
    assert hip.hipStreamDestroy(ffi.NULL) == E["hipErrorInvalidHandle"]
    hip.hipGetLastError()


def test_graph_capture_and_replay(hip: Any, streams: Any) -> None:
    ffi = hip.ffi
    stream = streams(constants.STREAM_NON_BLOCKING)
    status = ffi.new("hipStreamCaptureStatus*")
    a, b = ffi.new("void**"), ffi.new("void**")
    assert hip.hipMalloc(a, 16) == 0 and hip.hipMalloc(b, 16) == 0
    assert hip.hipMemset(b[0], 0, 16) == 0
    assert hip.hipStreamBeginCapture(stream, 0) == 0
    assert hip.hipStreamIsCapturing(stream, status) == 0
    assert status[0] == constants.CAPTURE_STATUS_ACTIVE
    assert hip.hipStreamSynchronize(stream) == E["hipErrorStreamCaptureUnsupported"]
    assert hip.hipMemsetD32Async(a[0], 7, 4, stream) == 0  # recorded, not run
    assert hip.hipMemcpyAsync(b[0], a[0], 16, 3, stream) == 0
    graph, executable = ffi.new("hipGraph_t*"), ffi.new("hipGraphExec_t*")
    assert hip.hipStreamEndCapture(stream, graph) == 0
    out = np.zeros(4, dtype=np.uint32)
    assert hip.hipMemcpy(ffi.from_buffer(out), b[0], 16, 2) == 0
    assert (out == 0).all()  # capturing ran nothing
    assert hip.hipGraphInstantiate(executable, graph[0], ffi.NULL, ffi.NULL, 0) == 0
    for _ in range(2):
        assert hip.hipMemset(b[0], 0, 16) == 0
        assert hip.hipGraphLaunch(executable[0], stream) == 0
        assert hip.hipStreamSynchronize(stream) == 0
        assert hip.hipMemcpy(ffi.from_buffer(out), b[0], 16, 2) == 0
        assert (out == 7).all()
    assert hip.hipGraphExecDestroy(executable[0]) == 0 and hip.hipGraphDestroy(graph[0]) == 0
    assert hip.hipStreamEndCapture(stream, graph) == E["hipErrorIllegalState"]  # not capturing
    assert hip.hipStreamBeginCapture(ffi.NULL, 0) == E["hipErrorStreamCaptureUnsupported"]
    assert hip.hipFree(a[0]) == 0 and hip.hipFree(b[0]) == 0
    hip.hipGetLastError()


def test_release_on_a_worker_thread_is_deferred_not_deadlocked(hip: Any, host: Any) -> None:
    """A garbage-collection finalizer can run hipFree on a stream's worker thread; waiting
    there for the streams would wait for that very thread. It must return and free later."""
    ffi = hip.ffi
    pointer = ffi.new("void**")
    assert hip.hipMalloc(pointer, 1024) == 0
    results: list[int] = []
    host.enqueue(ffi.NULL, lambda: results.append(hip.hipFree(pointer[0])))
    assert hip.hipDeviceSynchronize() == 0
    assert results == [0]
    assert hip.hipFree(pointer[0]) == E["hipErrorInvalidValue"]  # already released
    hip.hipGetLastError()


def test_an_interrupt_inside_work_a_waiting_thread_runs_leaves_the_stream_usable() -> None:
    """Ctrl-C while a synchronizing thread runs a stream's work itself (Engine._wait): the
    operation still finishes (as failed), the interrupt reaches the caller, and the stream
    goes on; a finalizer that runs meanwhile defers its release instead of waiting."""
    from hip_cpu import status
    from hip_cpu.stream_state import Stream
    from hip_cpu.streams import Engine

    engine = Engine()
    stream = Stream(0, 0)  # no worker thread: only a synchronizing thread runs its work
    engine.live.append(stream)
    seen: list[bool] = []

    def interrupted() -> int:
        seen.append(engine.must_not_wait())  # what a finalizer running here would see
        raise KeyboardInterrupt

    engine.submit(stream, interrupted)
    engine.submit(stream, lambda: status.SUCCESS)
    with pytest.raises(KeyboardInterrupt):
        engine.synchronize(stream)
    assert seen == [True]
    assert stream.completed == 1 and not stream.running
    assert engine.synchronize(stream) == status.LAUNCH_FAILURE  # the failed op's error, once
    assert stream.completed == 2 and engine.synchronize(stream) == status.SUCCESS


def test_a_synchronize_inside_a_streams_work_is_refused_not_a_wait_for_itself() -> None:
    """Garbage collection ran hip-core's pool finalizer (which synchronizes the device) inside
    an operation that a synchronizing thread ran itself: it waited for that very operation,
    forever (CI, a convolution test under 64-lane warps). Inside a stream's work a
    synchronize now returns hipErrorIllegalState at once, as CUDA refuses API calls in stream
    callbacks; the operation finishes and the outer synchronize returns."""
    from hip_cpu import status
    from hip_cpu.stream_state import Stream
    from hip_cpu.streams import Engine

    engine = Engine()
    stream = Stream(0, 0)  # no worker thread: only a synchronizing thread runs its work
    engine.live.append(stream)
    inside: list[int] = []

    def work() -> int:
        inside.extend([engine.synchronize_device(), engine.synchronize(stream)])
        return status.SUCCESS

    engine.submit(stream, work)
    assert engine.synchronize(stream) == status.SUCCESS
    assert inside == [status.ILLEGAL_STATE] * 2
    assert "would wait for itself" in status.error_detail(status.ILLEGAL_STATE)
    assert engine.synchronize_device() == status.SUCCESS  # outside the work: waits as before


def test_a_host_function_that_synchronizes_gets_an_error_not_a_hang(
    hip: Any, host: Any, streams: Any
) -> None:
    """The same on a stream's worker thread, through the API: a host function calling
    hipDeviceSynchronize, hipStreamSynchronize and hipEventSynchronize on an event recorded
    behind it (refused), and on one its stream has passed already (returns at once)."""
    stream = streams(0)
    behind, passed = hip.ffi.new("hipEvent_t*"), hip.ffi.new("hipEvent_t*")
    assert hip.hipEventCreateWithFlags(behind, 0) == 0
    assert hip.hipEventCreateWithFlags(passed, 0) == 0
    assert hip.hipEventRecord(passed[0], stream) == 0
    results: list[int] = []
    host.enqueue(stream, lambda: results.extend([
        hip.hipDeviceSynchronize(), hip.hipStreamSynchronize(stream),
        hip.hipEventSynchronize(behind[0]), hip.hipEventSynchronize(passed[0]),
    ]))  # fmt: skip
    assert hip.hipEventRecord(behind[0], stream) == 0
    assert hip.hipStreamSynchronize(stream) == 0
    assert results == [E["hipErrorIllegalState"]] * 3 + [0]
    assert hip.hipEventDestroy(behind[0]) == 0 and hip.hipEventDestroy(passed[0]) == 0
    hip.hipGetLastError()


def test_a_finalizer_that_synchronizes_inside_a_claim_cannot_run_an_operation_twice() -> None:
    """Garbage collection can run a finalizer at any allocation, including inside the engine's
    critical sections; one that synchronizes (hip-core's pool destruction does) lets the lock
    go while it waits. Here that happens while a synchronizing thread checks the head
    operation's dependencies, and another thread claims, runs and finishes that operation
    meanwhile: the first thread must not claim it again (it used to run it a second time and
    fail with 'an operation finished that was not claimed', leaving the stream stuck), nor
    sleep through the finish it missed."""
    from hip_cpu import status
    from hip_cpu.stream_state import Stream
    from hip_cpu.streams import Engine

    engine = Engine()
    stream = Stream(0, 0)  # no worker thread: only synchronizing threads run its work
    engine.live.append(stream)
    main, runs, other = threading.current_thread(), [], []

    class FinalizerInTheChecks(list[Any]):
        """Dependencies (none) whose first check on the main thread runs a 'finalizer' that
        starts another synchronizing thread and waits, as hipDeviceSynchronize would."""

        fired = False

        def __iter__(self) -> Any:
            if threading.current_thread() is main and not FinalizerInTheChecks.fired:
                FinalizerInTheChecks.fired = True
                other.append(threading.Thread(target=engine.synchronize, args=(stream,)))
                other[0].start()
                assert engine.synchronize(stream) == status.SUCCESS  # nested: only waits
            return super().__iter__()

    engine.submit(stream, lambda: runs.append(1) or status.SUCCESS)
    stream.queue[0].deps = FinalizerInTheChecks()  # (submit copies the dependencies it is given)
    assert engine.synchronize(stream) == status.SUCCESS
    other[0].join(10)
    assert runs == [1] and stream.completed == 1 and not stream.running and not stream.queue

"""Streams and events of the cpu platform: ordered queues executed by worker threads.

Semantics (HIP's; docs/architecture.md, Semantics):
- Work enqueued on a stream runs in enqueue order, off the thread that enqueued it: on the
  stream's worker thread (a Python thread started with the stream; the C work it calls
  releases the GIL). The asynchronous calls return as soon as the work is queued. A thread
  blocked in a synchronize may run the ready work it waits for itself (Engine._wait), which
  saves two thread switches per round trip and changes no ordering.
- The null stream (NULL, or hipStreamLegacy) is HIP's legacy default stream: work on it starts
  only after all work enqueued earlier on every *blocking* stream has finished, and work
  enqueued on a blocking stream starts only after all work enqueued earlier on the null stream.
  Streams created with hipStreamNonBlocking take no part in this. hipStreamPerThread is one
  blocking stream per host thread and device.
- Each device (ordinals.py) has its own null stream, and a stream belongs to the device that
  was current when it was created: the null stream's ordering, hipDeviceSynchronize and the
  NULL handle all concern the calling thread's current device only, as in HIP. Work of one
  device may wait for an event of another (hipStreamWaitEvent).
- Synchronous calls (hipMemcpy, hipMemset, copies from pageable memory) are ordered the same
  way and return when done; when there is nothing to wait for they run on the calling thread
  (no hand-off), which is indistinguishable from the worker running them.
- An event marks a point of a stream; it completes, and takes its timestamp (the host's
  monotonic clock, time.perf_counter_ns), when the stream reaches it.
- A failing asynchronous operation (a kernel's assert) does not stop its stream; its error is
  returned by the next synchronize of that stream or of the device, then cleared.
"""

from __future__ import annotations

import threading
import time
import traceback
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

from hip_cpu import ordinals, status
from hip_cpu.engine_lock import Held
from hip_cpu.stream_state import Dependency, Event, Operation, Record, Stream, Work, all_done
from hip_ffi.constants import ERROR_CODES, STREAM_NON_BLOCKING
from hip_ffi.handles import Registry, address, takes_handle

if TYPE_CHECKING:
    from hip_cpu.graphs import Capture

LEGACY_STREAM = 0x1  # hipStreamLegacy
PER_THREAD_STREAM = 0x2  # hipStreamPerThread
CAPTURE_ISOLATION = ERROR_CODES["hipErrorStreamCaptureIsolation"]
CAPTURED_EVENT = ERROR_CODES["hipErrorCapturedEvent"]


class Engine:
    """Every stream of the device and the one lock/condition that orders them.

    Garbage collection can run a finalizer (hip-core's safety nets call hipFree,
    hipModuleUnload, hipDeviceSynchronize...) on any thread at any allocation of a tracked
    object (a tuple, a list, a generator...), including inside this class's critical
    sections and on a stream's own worker. A finalizer that synchronizes waits on the
    condition, which lets the lock go however deeply it is held: other threads then run in
    the middle of the critical section. Hence: a critical section decides from what it reads
    after its last allocation (`_claim`, `run_sync` and `record` allocate, then check, then
    mutate); worker threads start when their stream is created, never under the lock; and
    `must_not_wait()` tells a release call that it has to defer its work (`release_later`)
    instead of waiting for the streams.
    """

    def __init__(self) -> None:
        self.cond = threading.Condition(threading.RLock())
        # Counts the state changes announced by _changed(): a wait that finds it moved since
        # it last looked does not sleep (the change may have come while a finalizer waited).
        self.changes = 0
        self._local = threading.local()  # .depth: lock holding; .worker: a stream's thread
        self.held = Held(self.cond, self._local)
        self.nulls = [Stream(0, 0, null=True, device=d) for d in range(ordinals.count())]
        self.live: list[Stream] = [*self.nulls]  # not destroyed, or still draining
        self.handles: Registry[Stream] = Registry("hipStream_t")
        # Deferred releases run here, once the work enqueued before them has finished.
        self._reaper = Stream(STREAM_NON_BLOCKING, 0)
        for null in self.nulls:
            self._start(null)
        self._start(self._reaper)

    @property
    def null(self) -> Stream:
        """The null stream of the calling thread's current device."""
        return self.nulls[ordinals.current()]

    def must_not_wait(self) -> bool:
        """True on a stream's worker thread and inside the engine's lock: waiting for the
        streams there could wait for this very thread."""
        return getattr(self._local, "depth", 0) > 0 or getattr(self._local, "worker", False)

    # ---- streams ------------------------------------------------------------------------
    def create(self, flags: int, priority: int) -> Stream:
        """A new stream of the calling thread's current device."""
        stream = Stream(flags, priority, device=ordinals.current())
        stream.handle = self.handles.add(stream)
        self._start(stream)
        with self.held:
            self.live.append(stream)
        return stream

    def resolve(self, handle: Any) -> Stream | None:
        """The stream behind a hipStream_t (NULL and hipStreamLegacy: the null stream)."""
        value = address(handle)
        if value in (0, LEGACY_STREAM):
            return self.nulls[ordinals.current()]
        if value == PER_THREAD_STREAM:  # one per host thread and device
            streams: dict[int, Stream] = self._local.__dict__.setdefault("streams", {})
            device = ordinals.current()
            if device not in streams:
                streams[device] = self.create(0, 0)
            return streams[device]
        return self.handles.get(value)

    def destroy(self, stream: Stream) -> None:
        """Release `stream` once its queued work is done (the caller does not wait)."""
        self.handles.remove(stream.handle)
        with self.held:
            stream.destroyed = True
            self._changed()

    def _changed(self) -> None:
        """Wake every waiting thread: the streams changed (lock held)."""
        self.changes += 1
        self.cond.notify_all()

    def _start(self, stream: Stream) -> None:
        stream.thread = threading.Thread(
            target=self._worker, args=(stream,), name="hip-ffi cpu stream", daemon=True
        )
        stream.thread.start()

    # ---- enqueueing -----------------------------------------------------------------------
    def _implicit(self, stream: Stream) -> list[Dependency]:
        """What work newly enqueued on `stream` waits for, besides the stream's own order."""
        if stream.null:
            device = stream.device
            return [
                (other, other.enqueued)
                for other in self.live
                if other.blocking and other.device == device and other.enqueued > other.completed
            ]
        null = self.nulls[stream.device]
        if stream.blocking and null.enqueued > null.completed:
            return [(null, null.enqueued)]
        return []

    def _ready(self, stream: Stream, op: Operation) -> bool:
        return stream.completed >= op.ticket - 1 and all_done(op.deps)

    def _enqueue(self, stream: Stream, op: Operation) -> None:
        """Give `op` the stream's next ticket and queue it (no allocation: no GC here)."""
        stream.enqueued += 1
        op.ticket = stream.enqueued
        stream.queue.append(op)
        self._changed()

    def submit(self, stream: Stream, work: Work, deps: Sequence[Dependency] = ()) -> int:
        """Enqueue asynchronous work; during stream capture, record it instead.

        Returns hipSuccess; a failure of `work` is reported by the next synchronize.
        """
        with self.held:
            if stream.capture is not None:
                stream.capture.append(stream, work)
                return status.SUCCESS
            op = Operation(0, [*self._implicit(stream), *deps], work, sticky=True)
            self._enqueue(stream, op)
        return status.SUCCESS

    def release_later(self, action: Callable[[], object]) -> None:
        """Run `action` once all work enqueued so far on every stream has finished, without
        waiting for it here (see must_not_wait)."""

        def work() -> int:
            action()
            return status.SUCCESS

        with self.held:
            op = Operation(
                0, [(stream, stream.enqueued) for stream in self.live], work, sticky=False
            )
            self._enqueue(self._reaper, op)

    def run_sync(self, stream: Stream, work: Work) -> int:
        """Run `work` in `stream`'s order and wait for it; returns its result."""
        with self.held:
            if stream.capture is not None:
                return status.CAPTURE_UNSUPPORTED
            deps = self._implicit(stream)
            op = Operation(0, deps, work, sticky=False)
            # _done allocates (see the class doc): the stream is read after it.
            idle = all_done(deps) and not stream.queue and stream.completed == stream.enqueued
            # (an empty queue means nothing is running either: ops leave it when finished)
            if idle:  # nothing to wait for: run it here, as the stream's next operation
                stream.enqueued += 1
                op.ticket = stream.enqueued
            else:
                self._enqueue(stream, op)
        if idle:
            try:
                return work()
            finally:
                with self.held:
                    stream.completed = op.ticket
                    self._changed()
        with self.held:
            self._wait(lambda: stream.completed >= op.ticket, [d for d, _ in deps] + [stream])
        return op.result

    def _claim(self, stream: Stream) -> Operation | None:
        """The stream's head operation, marked running, if it may run now (lock held)."""
        if stream.running or not stream.queue:
            return None
        op = stream.queue[0]
        if not self._ready(stream, op):
            return None
        # _ready allocates: a finalizer that waited there let other threads claim, run and
        # finish `op` meanwhile. Nothing allocates from this check to the claim.
        if stream.running or not stream.queue or stream.queue[0] is not op:
            return None
        stream.running = True
        return op

    def _execute(self, op: Operation) -> int:
        """Run one operation (lock not held) as a stream worker would."""
        was_worker = getattr(self._local, "worker", False)
        self._local.worker = True  # a finalizer running inside it must not wait for streams
        try:
            result = op.work()
        except Exception:  # a platform bug: report it, keep the stream alive
            traceback.print_exc()
            result = status.LAUNCH_FAILURE
        finally:
            self._local.worker = was_worker
        if result:  # what the failing work noted about it (status.note_failure)
            op.detail = status.take_note()
        return result

    def _finish(self, stream: Stream, op: Operation, result: int) -> None:
        """Record the operation's completion (lock held); `op` is the stream's claimed head."""
        if not stream.running or not stream.queue or stream.queue[0] is not op:
            raise RuntimeError("hip-ffi cpu engine: an operation finished that was not claimed")
        stream.queue.popleft()
        op.result = result
        stream.completed = op.ticket
        stream.running = False
        if result and op.sticky and not stream.error:
            stream.error = result
            stream.error_detail = op.detail
        self._changed()

    def _worker(self, stream: Stream) -> None:
        self._local.worker = True
        cond = self.cond
        while True:
            with self.held:
                while True:
                    seen = self.changes
                    op = self._claim(stream)
                    if op is not None:
                        break
                    if stream.destroyed and not stream.queue:
                        if stream in self.live:
                            self.live.remove(stream)
                        self._changed()
                        return
                    if seen == self.changes:
                        cond.wait()
            result = self._execute(op)
            with self.held:
                self._finish(stream, op, result)
            # The op's work may hold the last references to objects with finalizers: let them
            # go here, outside the lock, not at the next claim's assignment inside it.
            del op

    def _wait(self, done: Callable[[], bool], streams: Sequence[Stream]) -> None:
        """Wait (lock held once) until done(), running ready work of `streams` meanwhile.

        A thread that blocks in a synchronize would otherwise hand the work to a worker and
        wait to be woken: two thread switches per round trip. Running the next ready operation
        itself keeps each stream's order and dependencies (operations are claimed one at a
        time); asynchronous calls never run work, only a waiting thread does. Not done by a
        worker or re-entrantly (a finalizer inside the engine): those only wait.
        """
        helping = getattr(self._local, "depth", 0) == 1 and not getattr(
            self._local, "worker", False
        )
        while True:
            seen = self.changes  # before anything that allocates (see the class doc)
            if done():
                return
            op, owner = None, None
            if helping:
                for stream in streams:
                    op = self._claim(stream)
                    if op is not None:
                        owner = stream
                        break
            if op is None or owner is None:
                if seen == self.changes:
                    self.cond.wait()
                continue
            # The lock is let go while the work runs; the depth stays, so a finalizer running
            # on this thread meanwhile defers (as on a worker: _execute marks the thread one).
            interrupted: BaseException | None = None
            self.cond.release()
            try:
                result = self._execute(op)
            except BaseException as error:  # Ctrl-C inside the work: finish the op, then raise
                result, interrupted = status.LAUNCH_FAILURE, error
            finally:
                self.cond.acquire()
            self._finish(owner, op, result)
            if interrupted is not None:
                raise interrupted

    # ---- waiting ------------------------------------------------------------------------
    def _pending_for(self, stream: Stream) -> list[Dependency]:
        """Everything a synchronize of `stream` waits for."""
        own = (stream, stream.enqueued)
        return [*self._implicit(stream), own] if stream.null else [own]

    def runs_work(self) -> bool:
        """True on a thread that runs streams' work (a stream's worker, or a synchronizing
        thread inside an operation it runs itself): a wait for the streams there could wait
        for the operation this very thread is in the middle of."""
        return bool(getattr(self._local, "worker", False))

    def _refuse_wait(self) -> int:
        """What a synchronize returns where it cannot wait (`runs_work`: a finalizer that
        garbage collection ran inside an operation, or a host function): hipErrorIllegalState,
        as CUDA refuses API calls inside stream callbacks, instead of waiting for itself."""
        status.publish(status.ILLEGAL_STATE, "a synchronize inside a stream's work (a finalizer "
                       "or host function running on the thread that runs it) would wait for "
                       "itself")  # fmt: skip
        return status.ILLEGAL_STATE

    def synchronize(self, stream: Stream) -> int:
        """Wait for all work enqueued so far on `stream` (for the null stream: also on every
        blocking stream); returns and clears the stream's asynchronous error. Inside a
        stream's work: hipErrorIllegalState at once (`_refuse_wait`)."""
        if self.runs_work():
            return self._refuse_wait()
        with self.held:
            if stream.capture is not None:
                return status.CAPTURE_UNSUPPORTED
            deps = self._pending_for(stream)
            self._wait(lambda: all_done(deps), [d for d, _ in deps])
            error, stream.error = stream.error, status.SUCCESS
            status.publish(error, stream.error_detail)
        return error

    def query(self, stream: Stream) -> int:
        with self.held:
            return status.SUCCESS if all_done(self._pending_for(stream)) else status.NOT_READY

    def wait_all(self, device: int | None = None) -> None:
        """Wait for all work on every stream (of `device` only, when given), leaving their
        errors for their synchronize."""
        with self.held:
            deps = [(s, s.enqueued) for s in self.live if device is None or s.device == device]
            self._wait(lambda: all_done(deps), [d for d, _ in deps])

    def synchronize_device(self) -> int:
        """Wait for all work on every stream of the current device; returns (and clears) the
        first error of those streams. Inside a stream's work: hipErrorIllegalState at once
        (`_refuse_wait`)."""
        if self.runs_work():
            return self._refuse_wait()
        device = ordinals.current()
        self.wait_all(device)
        error, detail = status.SUCCESS, ""
        with self.held:
            for stream in self.live:
                if stream.device != device:
                    continue
                if not error:
                    error, detail = stream.error, stream.error_detail
                stream.error = status.SUCCESS
        status.publish(error, detail)
        return error

    # ---- events ---------------------------------------------------------------------------
    def record(self, event: Event, stream: Stream) -> int:
        record = Record(stream, 0)

        def stamp() -> int:
            record.time_ns = time.perf_counter_ns()
            return status.SUCCESS

        with self.held:
            if stream.capture is not None:  # a point of the graph, for other streams to wait on
                event.captured = (stream.capture, stream.capture.point(stream))
                return status.SUCCESS
            event.captured = None
            op = Operation(0, self._implicit(stream), stamp, sticky=True)
            if all_done(op.deps) and not stream.queue and stream.completed == stream.enqueued:
                stream.enqueued += 1  # the stream is there already: complete it now
                record.ticket = stream.completed = stream.enqueued
                record.time_ns = time.perf_counter_ns()
            else:
                self._enqueue(stream, op)
                record.ticket = op.ticket
            event.record = record
            self._changed()
        return status.SUCCESS

    def event_done(self, event: Event) -> bool:
        record = event.record
        return record is None or record.stream.completed >= record.ticket

    def event_synchronize(self, event: Event) -> int:
        """Wait until the stream reaches `event`; inside a stream's work, hipErrorIllegalState
        unless it has already (`_refuse_wait`: the event may be queued behind this work)."""
        record = event.record
        if record is None:
            return status.SUCCESS
        if self.runs_work():
            with self.held:
                done = self.event_done(event)
            return status.SUCCESS if done else self._refuse_wait()
        with self.held:
            self._wait(lambda: self.event_done(event), [*self.live])
        return status.SUCCESS

    def wait_event(self, stream: Stream, event: Event) -> int:
        """Make later work on `stream` wait for `event` (as recorded now)."""
        captured = event.captured
        if captured is not None:
            return self._wait_captured(stream, *captured)
        record = event.record
        if record is None:
            return status.SUCCESS  # never recorded: nothing to wait for
        if stream.capture is not None:
            return status.SUCCESS if record.stream is stream else status.CAPTURE_UNSUPPORTED
        return self.submit(stream, lambda: status.SUCCESS, [(record.stream, record.ticket)])

    def _wait_captured(self, stream: Stream, capture: Capture, point: dict[Stream, int]) -> int:
        """`stream` waits for an event recorded inside `capture`: it joins the capture (a
        fork), or, taking part already, depends on that point from now on (a join)."""
        with self.held:
            if not capture.active:  # the capture ended: the event never completes anything
                return CAPTURED_EVENT
            if stream.capture is None:
                if stream.null:  # the legacy stream would order with every stream
                    return status.CAPTURE_UNSUPPORTED
                stream.capture = capture
            elif stream.capture is not capture:
                return CAPTURE_ISOLATION
            capture.wait(stream, point)
        return status.SUCCESS


ENGINE = Engine()
#: Decorator for a call whose first argument is a hipStream_t: the function gets the Stream
#: (NULL and hipStreamLegacy: the null stream), the call hipErrorInvalidHandle for a bad handle.
on_stream = takes_handle(ENGINE.resolve, status.INVALID_HANDLE)

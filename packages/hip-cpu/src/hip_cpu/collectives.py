"""The RCCL / NCCL surface on the cpu platform: communicators over shared memory, in stream order.

Ranks are host threads of one process (ncclCommInitAll, or ncclCommInitRank in a group), or
processes of one host (ncclCommInitRank with a unique id handed over by any means); both meet
in a shared file (collective_rendezvous.py) and run the algorithms of collective_ops.py. This
file has the communicators, groups and queueing; the collective calls are collective_calls.py.

Semantics, as NCCL's where it defines them:
- A collective is queued on its stream (NULL: the null stream of the communicator's device)
  and runs when the stream gets there, on the stream's worker, in stream order with the other
  work of that device; the call returns once it is queued. The ops of one communicator run one
  at a time in a process, in the order their streams reach them; each rank must call the same
  collectives in the same order, as NCCL requires (a mismatch is ncclInvalidUsage, not a
  hang: collective_ops.py).
- Arguments are checked at the call (ncclInvalidArgument: a bad communicator, type, operation,
  root or peer, NULL buffers, a stream of another device; ncclInvalidUsage: a stream being
  captured, which the cpu platform cannot replay collectives from), and nothing is queued.
- A failure while running (a peer that left, failed or exited; the timeout; a mismatch) makes
  the operation fail like a kernel: the stream's next synchronize returns
  hipErrorLaunchFailure, with what happened as its detail (HipApi.error_detail). The
  communicator then reports the ncclResult_t from ncclCommGetAsyncError and from every later
  call, and ncclGetLastError says why; its peers fail too (ncclRemoteError), at once.
- ncclGroupStart / ncclGroupEnd: calls in between are queued at the outermost ncclGroupEnd,
  the ops of each (communicator, stream) as one stream operation (collectives in order, then
  sends and receives together); ncclCommInitRank calls in a group wait for their peers there.
- ncclCommDestroy waits for the communicator's queued operations (at most the timeout, then
  it aborts them; from a finalizer on a stream's worker, it is deferred until the work queued
  before it is done); ncclCommAbort makes them fail at once. Neither is collective. Shared
  memory is unmapped only while none of the communicator's operations runs.
"""

from __future__ import annotations

import functools
import importlib.util
import threading
from collections.abc import Callable
from typing import Any

from hip_cpu import collective_ops as ops
from hip_cpu import ordinals, status
from hip_cpu.collective_rendezvous import (
    FAILED,
    ID_BYTES,
    LEFT,
    STATE,
    PeerFailure,
    Segment,
    new_id,
    timeout_seconds,
)
from hip_cpu.stream_state import Stream
from hip_cpu.streams import ENGINE, LEGACY_STREAM
from hip_ffi._ffi import ffi
from hip_ffi.collective_constants import (
    INTERNAL_ERROR,
    INVALID_ARGUMENT,
    INVALID_USAGE,
    MESSAGES,
    REMOTE_ERROR,
    SUCCESS,
    SYSTEM_ERROR,
    pack_version,
)
from hip_ffi.handles import Registry, address, is_null, items, takes_handle

#: The NCCL API level this implementation follows (ncclAvg and bfloat16 came with 2.10,
#: ncclGetLastError with 2.13).
VERSION = pack_version(2, 21, 0)


class Comm:
    """One rank of a communicator in this process."""

    def __init__(self, segment: Segment, device: int) -> None:
        self.segment = segment
        self.device = device
        self.async_error = SUCCESS
        self.last_error = ""
        self.lock = threading.Lock()  # its operations run one at a time in this process
        self.idle = threading.Condition()
        self.pending = 0  # operations queued and not finished
        self.closing = False
        self.handle = 0

    def fail(self, result: int, message: str) -> None:
        """Record a failure; the peers learn of it from this rank's state."""
        if not self.async_error:
            self.async_error, self.last_error = result, message
        if self.segment.address:
            self.segment.control(self.segment.rank)[STATE] = FAILED

    def wait_idle(self, timeout: float) -> bool:
        """Wait (at most `timeout` seconds) until its queued operations are done."""
        with self.idle:
            return self.idle.wait_for(lambda: self.pending == 0, timeout)


COMMS: Registry[Comm] = Registry("ncclComm_t")
on_comm = takes_handle(COMMS.get, INVALID_ARGUMENT)


class _Group(threading.local):
    depth = 0

    def __init__(self) -> None:
        self.calls: list[tuple[Comm, Stream, ops.Call]] = []
        self.joins: list[Comm] = []
        self.error = ""  # the calling thread's last error (ncclGetLastError)


_thread = _Group()
_strings: dict[str, Any] = {}  # text -> its char[] (a const char* must outlive the call)


def refuse(result: int, message: str) -> int:
    _thread.error = message
    return result


def _c_string(text: str) -> Any:
    found = _strings.get(text)
    if found is None:
        found = _strings[text] = ffi.new("char[]", text.encode())
        if len(_strings) > 256:  # ncclGetLastError's texts: keep the recent ones only
            _strings.pop(next(iter(_strings)))
    return found


# ---- versions, ids, errors -----------------------------------------------------------------
def ncclGetVersion(version: Any) -> int:
    if is_null(version):
        return refuse(INVALID_ARGUMENT, "ncclGetVersion: version is NULL")
    version[0] = VERSION
    return SUCCESS


def ncclGetUniqueId(unique_id: Any) -> int:
    if is_null(unique_id):
        return refuse(INVALID_ARGUMENT, "ncclGetUniqueId: uniqueId is NULL")
    try:
        raw = new_id()
    except PeerFailure as failure:
        return refuse(failure.result, str(failure))
    ffi.memmove(unique_id.internal, raw, ID_BYTES)
    return SUCCESS


def ncclGetErrorString(result: int) -> Any:
    return _c_string(MESSAGES.get(result, "unknown result code"))


def ncclGetLastError(comm: Any) -> Any:
    found = None if is_null(comm) else COMMS.get(comm)
    return _c_string((found.last_error if found is not None else "") or _thread.error)


# ---- communicators ---------------------------------------------------------------------------
def _id_bytes(unique_id: Any) -> bytes:
    """The 128 bytes of an ncclUniqueId passed by value (or as bytes)."""
    if isinstance(unique_id, bytes | bytearray):
        return bytes(unique_id)
    try:
        return bytes(ffi.buffer(unique_id.internal))
    except (AttributeError, TypeError) as error:
        raise PeerFailure(INVALID_ARGUMENT, f"not an ncclUniqueId: {unique_id!r}") from error


def _join(raw: bytes, ranks: int, rank: int, device: int) -> Comm:
    """This process's rank `rank` (not waited for yet); PeerFailure when it cannot join."""
    segment = Segment(raw, ranks, rank, timeout_seconds())
    for other in COMMS.values():  # two ranks of one stream worker would wait for each other
        if other.segment.token == segment.token and other.device == device:
            segment.close()
            raise PeerFailure(
                INVALID_USAGE, f"ranks {other.segment.rank} and {rank} both on device {device}"
            )
    return Comm(segment, device)


def _joined(comm: Comm) -> int:
    try:
        comm.segment.wait_joined()
    except PeerFailure as failure:
        comm.fail(failure.result, f"ncclCommInitRank: {failure}")  # (a handle of a group's)
        comm.segment.forget_file()
        comm.segment.close(FAILED)
        return refuse(failure.result, f"ncclCommInitRank: {failure}")
    return SUCCESS


def ncclCommInitRank(comm_out: Any, ranks: int, unique_id: Any, rank: int) -> int:
    if is_null(comm_out):
        return refuse(INVALID_ARGUMENT, "ncclCommInitRank: comm is NULL")
    if ranks < 1 or not 0 <= rank < ranks:
        return refuse(INVALID_ARGUMENT, f"ncclCommInitRank: rank {rank} of {ranks} ranks")
    try:
        comm = _join(_id_bytes(unique_id), ranks, rank, ordinals.current())
    except PeerFailure as failure:
        return refuse(failure.result, f"ncclCommInitRank: {failure}")
    if _thread.depth:
        _thread.joins.append(comm)
    else:
        result = _joined(comm)
        if result:
            return result
    comm_out[0] = _register(comm)
    return SUCCESS


def ncclCommInitAll(comms: Any, count: int, devices: Any) -> int:
    if is_null(comms) or count < 1:
        return refuse(INVALID_ARGUMENT, f"ncclCommInitAll: {count} devices or comms NULL")
    listed = range(count) if is_null(devices) else items(devices, count)
    ordinal_list = [int(d) for d in listed]
    if len(set(ordinal_list)) != count:
        return refuse(INVALID_USAGE, f"ncclCommInitAll: duplicate devices in {ordinal_list}")
    if not all(ordinals.valid(d) for d in ordinal_list):
        return refuse(INVALID_ARGUMENT, f"ncclCommInitAll: no device among {ordinal_list}")
    made: list[Comm] = []
    try:
        raw = new_id()
        for rank, device in enumerate(ordinal_list):
            made.append(_join(raw, count, rank, device))
    except PeerFailure as failure:
        for comm in made:
            comm.segment.close(FAILED)
        return refuse(failure.result, f"ncclCommInitAll: {failure}")
    for comm in made:  # every rank joined: these waits return at once
        result = _joined(comm)
        if result:
            for other in made:  # (closing one closed already is nothing)
                other.segment.close(FAILED)
            return result
    for rank, comm in enumerate(made):
        comms[rank] = _register(comm)
    return SUCCESS


def _register(comm: Comm) -> Any:
    comm.handle = COMMS.add(comm)
    return COMMS.cdata(comm.handle)


def _abort(comm: Comm, why: str) -> None:
    comm.segment.aborted = True  # a running operation fails at its next look (within 1 ms)
    comm.fail(REMOTE_ERROR, why)  # queued ones fail before touching the shared memory


def _close(comm: Comm, state: int) -> None:
    """Unmap under the comm's lock: no operation runs meanwhile, and those that run later
    find it unmapped (or failed) and fail without touching it."""
    COMMS.remove(comm.handle)
    with comm.lock:
        comm.segment.close(state)


@on_comm
def ncclCommDestroy(comm: Comm) -> int:
    comm.closing = True  # nothing more is queued
    if ENGINE.must_not_wait():  # a finalizer on a stream's worker: after the work queued
        ENGINE.release_later(lambda: _close(comm, LEFT))
        return SUCCESS
    if not comm.wait_idle(comm.segment.timeout):  # stuck behind other work: give up on it
        _abort(comm, "destroyed with operations still queued")
    _close(comm, LEFT)
    return SUCCESS


@on_comm
def ncclCommAbort(comm: Comm) -> int:
    comm.closing = True
    _abort(comm, "the communicator was aborted")
    _close(comm, FAILED)
    return SUCCESS


def _query(name: str, read: Callable[[Comm], int]) -> Callable[..., int]:
    """ncclCommGetAsyncError, ncclCommCount, ncclCommCuDevice, ncclCommUserRank: one int of
    the communicator written to the second argument."""

    @on_comm
    def query(comm: Comm, out: Any) -> int:
        if is_null(out):
            return refuse(INVALID_ARGUMENT, f"{name}: the output pointer is NULL")
        out[0] = read(comm)
        return SUCCESS

    query.__name__ = query.__qualname__ = name
    return query


ncclCommGetAsyncError = _query("ncclCommGetAsyncError", lambda comm: comm.async_error)
ncclCommCount = _query("ncclCommCount", lambda comm: comm.segment.ranks)
ncclCommCuDevice = _query("ncclCommCuDevice", lambda comm: comm.device)
ncclCommUserRank = _query("ncclCommUserRank", lambda comm: comm.segment.rank)


# ---- queueing ------------------------------------------------------------------------------
@functools.cache
def _have_numpy() -> bool:
    return importlib.util.find_spec("numpy") is not None


def _stream(comm: Comm, handle: Any) -> Stream | None:
    """The stream of a call: NULL (and hipStreamLegacy) is the null stream of the
    communicator's device, whichever device is current (NCCL switches to the comm's device)."""
    if address(handle) in (0, LEGACY_STREAM):
        return ENGINE.nulls[comm.device]
    return ENGINE.resolve(handle)


def queue(comm: Comm, handle: Any, call: ops.Call) -> int:
    """Check what the call's arguments cannot tell alone, then queue it (or keep it for the
    group's end)."""
    name = ops.NAMES[call.kind]
    if comm.async_error:
        return refuse(comm.async_error, f"{name}: the communicator failed: {comm.last_error}")
    if comm.closing:
        return refuse(INVALID_USAGE, f"{name}: the communicator is being destroyed")
    stream = _stream(comm, handle)
    if stream is None or stream.device != comm.device:
        where = "no stream" if stream is None else f"a stream of device {stream.device}"
        return refuse(INVALID_ARGUMENT, f"{name}: {where}, not of device {comm.device}")
    if stream.capture is not None:
        return refuse(INVALID_USAGE, f"{name}: the cpu platform cannot capture collectives")
    if call.kind in ops.REDUCING and not _have_numpy():
        return refuse(SYSTEM_ERROR, f"{name}: the cpu platform reduces with numpy: install it")
    if _thread.depth:
        _thread.calls.append((comm, stream, call))
        return SUCCESS
    return _submit(comm, stream, [call])


def _submit(comm: Comm, stream: Stream, calls: list[ops.Call]) -> int:
    with comm.idle:
        comm.pending += 1

    def work() -> int:
        try:
            with comm.lock:
                if comm.async_error or not comm.segment.address:  # failed, aborted, closed
                    why = comm.last_error or "the communicator was destroyed"
                    raise PeerFailure(comm.async_error or REMOTE_ERROR, why)
                ops.run(comm.segment, calls)
            return status.SUCCESS
        except Exception as error:  # a bug or no memory: still fail the peers, never hang
            failure = error if isinstance(error, PeerFailure) else PeerFailure(
                INTERNAL_ERROR, f"{type(error).__name__}: {error}"
            )  # fmt: skip
            what = ", ".join(call.describe() for call in calls)
            message = f"{what} on rank {comm.segment.rank}: {failure}"
            comm.fail(failure.result, message)
            status.note_failure(message)
            return status.LAUNCH_FAILURE
        finally:
            with comm.idle:
                comm.pending -= 1
                comm.idle.notify_all()

    return ENGINE.submit(stream, work)


def ncclGroupStart() -> int:
    _thread.depth += 1
    return SUCCESS


def ncclGroupEnd() -> int:
    if _thread.depth == 0:
        return refuse(INVALID_USAGE, "ncclGroupEnd without ncclGroupStart")
    _thread.depth -= 1
    if _thread.depth:
        return SUCCESS
    joins, _thread.joins = _thread.joins, []
    calls, _thread.calls = _thread.calls, []
    result = SUCCESS
    for comm in joins:  # (all joined by now, or they time out: the waits run one by one)
        result = _joined(comm) or result
    batches: dict[tuple[int, int], tuple[Comm, Stream, list[ops.Call]]] = {}
    for comm, stream, call in calls:
        batches.setdefault((id(comm), id(stream)), (comm, stream, []))[2].append(call)
    for comm, stream, batch in batches.values():
        result = _submit(comm, stream, batch) or result
    return result

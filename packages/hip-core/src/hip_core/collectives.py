"""Collectives between devices and processes: all-reduce and friends over RCCL / NCCL.

    # one process per device (any launcher: multiprocessing, torchrun, mpirun)
    unique_id = rendezvous_file("/tmp/job-42.id", rank)   # or UniqueId.new(), handed over
    comm = Communicator(Device(local_rank), unique_id, rank, size)
    comm.all_reduce(grads, grads, n, "float32")           # in place, summed over the ranks
    comm.close()

    # one process driving several devices
    comms = Communicator.all_for([Device(0), Device(1)])
    with Communicator.group():                            # one call per rank, issued together
        for comm, buffer in zip(comms, buffers):
            comm.all_reduce(buffer, buffer, n, "bfloat16", op="avg")

The library is RCCL on amd, NCCL on nvidia (both opened at the first collective: a missing one
is a FunctionUnavailableError then, saying what was tried), and a shared-memory implementation
on the cpu platform (docs/platforms/cpu.md says what it costs).

Stream semantics (every collective and send / recv): the operation is queued on `stream` (a
Stream of the communicator's device; None: the device's null stream) and the call returns once
it is queued. It runs after the work queued before it on that stream and before the work queued
after; its output is ready once the stream gets past it (`stream.sync()`, an event,
`comm.wait(stream, timeout=)`). The calls of one `group()` are one launch: NCCL may run them
concurrently, so none may read what another of the same group writes (use a later group).
Every rank must queue the same collectives in the same order, each on some stream of its own;
a rank's collective waits on the device for its peers, without end on NCCL and RCCL:
`comm.wait(stream, timeout=)` is the wait that gives up (and aborts). Buffers given with
`stream=` are kept referenced until that stream's next sync.

Checks before anything reaches the device: the communicator is open (ClosedError), buffers
are open DeviceBuffers of the communicator's device (TypeError / ClosedError / ValueError) large
enough for `count` elements of `dtype` as the collective reads and writes them (ValueError),
`dtype` is one the library reduces (ValueError: int8, uint8, int32, uint32, int64, uint64,
float16, float32, float64, bfloat16), `op` one of sum, prod, max, min, avg, roots and peers are
ranks of the communicator. A failing call raises NcclError, whose message has the library's
error string and its last-error text. What only the ranks together can tell (another rank
calling a different collective or count) is NCCL's undefined behavior (a hang or garbage); the
cpu platform reports it as a failed operation (the stream's synchronize raises HipLaunchError,
and `async_error()` is the NcclError).
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Iterator, Sequence
from typing import TYPE_CHECKING, Any

from hip_core._checks import integer
from hip_core._hip import hip
from hip_core._resource import Resource
from hip_core.device import current_ordinal
from hip_core.nccl import ID_BYTES, NcclError, UniqueId, check_nccl, nccl_error
from hip_ffi.collective_constants import (
    DATA_TYPES,
    ELEMENT_BYTES,
    REDUCTION_OPS,
)

if TYPE_CHECKING:
    from hip_core.device import Device
    from hip_core.memory import DeviceBuffer
    from hip_core.stream import Stream

#: Other spellings of the data types (numpy's names are the keys of DATA_TYPES).
_ALIASES = {
    "i8": "int8", "u8": "uint8", "i32": "int32", "u32": "uint32", "i64": "int64",
    "u64": "uint64", "f16": "float16", "half": "float16", "f32": "float32", "float": "float32",
    "f64": "float64", "double": "float64", "bf16": "bfloat16",
}  # fmt: skip


def _data_type(dtype: Any) -> tuple[int, int]:
    """(ncclDataType_t, bytes per element) of a numpy dtype, a name or an alias."""
    if isinstance(dtype, str):
        name = _ALIASES.get(dtype, dtype)
    else:
        import numpy as np

        try:
            name = np.dtype(dtype).name
        except TypeError as error:
            raise ValueError(f"{dtype!r} is not a data type") from error
    code = DATA_TYPES.get(name)
    if code is None:
        raise ValueError(f"collectives take {', '.join(DATA_TYPES)}; not {dtype!r}")
    return code, ELEMENT_BYTES[code]


def _reduction(op: str) -> int:
    code = REDUCTION_OPS.get(op) if isinstance(op, str) else None
    if code is None:
        raise ValueError(f"op must be one of {', '.join(REDUCTION_OPS)}, not {op!r}")
    return code


class Communicator(Resource):
    """One rank of a communicator: this process's member on `device` (ncclComm_t).

    `Communicator(device, unique_id, rank, size)` joins the communicator of `size` ranks that
    `unique_id` names as rank `rank` (ncclCommInitRank: it returns once all `size` ranks have
    joined). `Communicator.all_for(devices)` makes a whole communicator in this process, rank
    i on devices[i] (ncclCommInitAll). `close()` (or `with`, or collection) destroys it
    (ncclCommDestroy, after its queued work); `abort()` stops it at once (ncclCommAbort).
    """

    __slots__ = ("_api", "_handle", "device", "rank", "size")
    _named_by_launches = False  # a kernel's arguments never name one

    def __init__(self, device: Device, unique_id: UniqueId, rank: int, size: int) -> None:
        from hip_core.device import Device

        if not isinstance(device, Device):
            raise TypeError(f"device must be a hip_core.Device, not {type(device).__name__}")
        if not isinstance(unique_id, UniqueId):
            raise TypeError(f"unique_id must be a UniqueId, not {type(unique_id).__name__}")
        size, rank = integer(size, "size"), integer(rank, "rank")
        if size < 1 or not 0 <= rank < size:
            raise ValueError(f"rank {rank} is not a rank of a communicator of {size}")
        api = device._api
        if unique_id.platform != api.platform:
            raise ValueError(
                f"a UniqueId of the {unique_id.platform} platform cannot join one on {api.platform}"
            )
        out = api.ffi.new("ncclComm_t*")
        raw = api.ffi.new("ncclUniqueId*")
        api.ffi.memmove(raw, unique_id.raw, ID_BYTES)
        with device:
            check_nccl(api.ncclCommInitRank(out, size, raw[0], rank), "ncclCommInitRank")
        self._adopt(api, out[0], device, rank, size)

    def _adopt(self, api: Any, handle: Any, device: Device, rank: int, size: int) -> None:
        self._api, self._handle = api, handle
        self.device, self.rank, self.size = device, rank, size
        self._own(_destroy, api, handle)

    @classmethod
    def all_for(cls, devices: Sequence[Device]) -> list[Communicator]:
        """A communicator over `devices` (distinct) driven by this process: rank i on
        devices[i] (ncclCommInitAll). Issue their collectives inside `Communicator.group()`
        (or from one thread per rank): a rank's collective waits for the others."""
        from hip_core.device import Device

        devices = list(devices)
        if not devices or not all(isinstance(d, Device) for d in devices):
            raise TypeError("all_for takes a non-empty sequence of hip_core.Device")
        ordinals = [d.ordinal for d in devices]
        if len(set(ordinals)) != len(ordinals):
            raise ValueError(f"all_for: devices {ordinals} repeat one")
        api = devices[0]._api
        comms = api.ffi.new("ncclComm_t[]", len(devices))
        try:
            check_nccl(
                api.ncclCommInitAll(comms, len(devices), api.ffi.new("int[]", ordinals)),
                "ncclCommInitAll",
            )
        finally:
            _keep_current_device(api)
        made = []
        for rank, device in enumerate(devices):
            comm = cls.__new__(cls)
            comm._adopt(api, comms[rank], device, rank, len(devices))
            made.append(comm)
        return made

    @staticmethod
    @contextlib.contextmanager
    def group() -> Iterator[None]:
        """Collectives and sends / receives issued inside are queued together at the end
        (ncclGroupStart / ncclGroupEnd), on this thread: how one thread drives several ranks,
        and how a rank sends to and receives from peers without deadlock. Nests. Errors of the
        calls inside may surface at the end (NcclError)."""
        api = hip()
        check_nccl(api.ncclGroupStart(), "ncclGroupStart")
        try:
            yield
        finally:
            try:
                check_nccl(api.ncclGroupEnd(), "ncclGroupEnd")
            finally:
                _keep_current_device(api)

    # ---- collectives -------------------------------------------------------------------
    def all_reduce(
        self, buffer_in: DeviceBuffer, buffer_out: DeviceBuffer, count: int, dtype: Any,
        op: str = "sum", *, stream: Stream | None = None,
    ) -> None:  # fmt: skip
        """buffer_out[:count] on every rank = `op` over the ranks' buffer_in[:count]
        (elements of `dtype`; the two may be the same buffer). ncclAllReduce, queued on
        `stream` (None: the device's null stream)."""
        code, size = _data_type(dtype)
        count = self._count(count)
        self._buffers((buffer_in, count * size), (buffer_out, count * size))
        self._call("ncclAllReduce", stream, (buffer_in, buffer_out),
                   buffer_in, buffer_out, count, code, _reduction(op))  # fmt: skip

    def broadcast(
        self, buffer_in: DeviceBuffer | None, buffer_out: DeviceBuffer, count: int, dtype: Any,
        *, root: int = 0, stream: Stream | None = None,
    ) -> None:  # fmt: skip
        """buffer_out[:count] on every rank = the root's buffer_in[:count] (read on the root
        only: None elsewhere). ncclBroadcast, queued on `stream` (None: the null stream)."""
        code, size = _data_type(dtype)
        count, root = self._count(count), self._rank(root, "root")
        self._buffers((buffer_in if self.rank == root else None, count * size),
                      (buffer_out, count * size))  # fmt: skip
        self._call("ncclBroadcast", stream, (buffer_in, buffer_out),
                   buffer_in, buffer_out, count, code, root)  # fmt: skip

    def reduce(
        self, buffer_in: DeviceBuffer, buffer_out: DeviceBuffer | None, count: int, dtype: Any,
        op: str = "sum", *, root: int = 0, stream: Stream | None = None,
    ) -> None:  # fmt: skip
        """The root's buffer_out[:count] = `op` over the ranks' buffer_in[:count] (buffer_out
        is written on the root only: None elsewhere). ncclReduce, queued on `stream`."""
        code, size = _data_type(dtype)
        count, root = self._count(count), self._rank(root, "root")
        self._buffers((buffer_in, count * size),
                      (buffer_out if self.rank == root else None, count * size))  # fmt: skip
        self._call("ncclReduce", stream, (buffer_in, buffer_out),
                   buffer_in, buffer_out, count, code, _reduction(op), root)  # fmt: skip

    def all_gather(
        self, buffer_in: DeviceBuffer, buffer_out: DeviceBuffer, count: int, dtype: Any,
        *, stream: Stream | None = None,
    ) -> None:  # fmt: skip
        """buffer_out on every rank = the ranks' buffer_in[:count] one after the other, rank
        order (`count` elements in, size * count out). ncclAllGather, queued on `stream`."""
        code, size = _data_type(dtype)
        count = self._count(count)
        self._buffers((buffer_in, count * size), (buffer_out, self.size * count * size))
        self._call("ncclAllGather", stream, (buffer_in, buffer_out),
                   buffer_in, buffer_out, count, code)  # fmt: skip

    def reduce_scatter(
        self, buffer_in: DeviceBuffer, buffer_out: DeviceBuffer, count: int, dtype: Any,
        op: str = "sum", *, stream: Stream | None = None,
    ) -> None:  # fmt: skip
        """buffer_out[:count] on rank r = `op` over the ranks' buffer_in[r*count:(r+1)*count]
        (size * count elements in, `count` out). ncclReduceScatter, queued on `stream`."""
        code, size = _data_type(dtype)
        count = self._count(count)
        self._buffers((buffer_in, self.size * count * size), (buffer_out, count * size))
        self._call("ncclReduceScatter", stream, (buffer_in, buffer_out),
                   buffer_in, buffer_out, count, code, _reduction(op))  # fmt: skip

    def send(
        self, buffer: DeviceBuffer, count: int, dtype: Any, peer: int, *,
        stream: Stream | None = None,
    ) -> None:  # fmt: skip
        """Send buffer[:count] to rank `peer`, which receives it with `recv` (ncclSend, queued
        on `stream`). Pair sends and receives inside `group()` when ranks exchange both ways."""
        code, size = _data_type(dtype)
        count, peer = self._count(count), self._rank(peer, "peer")
        self._buffers((buffer, count * size))
        self._call("ncclSend", stream, (buffer,), buffer, count, code, peer)

    def recv(
        self, buffer: DeviceBuffer, count: int, dtype: Any, peer: int, *,
        stream: Stream | None = None,
    ) -> None:  # fmt: skip
        """Receive `count` elements from rank `peer`'s `send` into buffer[:count] (ncclRecv,
        queued on `stream`); the counts and types of both sides must agree."""
        code, size = _data_type(dtype)
        count, peer = self._count(count), self._rank(peer, "peer")
        self._buffers((buffer, count * size))
        self._call("ncclRecv", stream, (buffer,), buffer, count, code, peer)

    # ---- waiting -------------------------------------------------------------------------
    def wait(self, stream: Stream | None = None, *, timeout: float) -> None:
        """Block until the work queued so far on `stream` (None: the device's null stream) is
        done, at most `timeout` seconds, watching this communicator meanwhile.

        NCCL and RCCL never give up on a peer: a rank whose peers do not call the same
        collective waits on the device forever, and so would `stream.sync()`. This polls the
        stream (hipStreamQuery, every 50 µs at first, then up to every 2 ms) and the
        communicator (ncclCommGetAsyncError): NcclError at once when its work failed (a peer
        aborted or died where the library can tell); after `timeout` seconds the communicator
        is aborted (ncclCommAbort: its kernels end, the stream can be used again, this object
        is closed) and TimeoutError says so. What the stream holds for its work
        (`keep_until_sync`) is let go as after a sync. It bounds waits on the device only:
        NCCL connects the ranks at a collective's first call, which blocks on the host until
        the peers make that call too (NCCL_RUNTIME_CONNECT=0 connects them all at init).
        """
        from hip_core.stream import Stream, checked_handle

        self._check_open()
        if isinstance(timeout, bool) or not isinstance(timeout, (int, float)) or timeout < 0:
            raise ValueError(f"timeout must be a number of seconds >= 0, not {timeout!r}")
        if stream is not None:
            checked_handle(stream)  # a Stream, open (TypeError, ClosedError)
            checked_stream_of(self, stream, "wait")
        waited = Stream.null(self.device) if stream is None else stream
        deadline = time.monotonic() + timeout
        pause = 50e-6
        while not waited.done:
            error = self.async_error()
            if error is not None:
                raise error
            if time.monotonic() >= deadline:
                what = f"rank {self.rank} of {self.size} on device {self.device.ordinal}"
                self.abort()
                raise TimeoutError(
                    f"{what}: the work queued on {waited!r} was not done after {timeout:g} s "
                    "(a peer that never called the same collective?); the communicator was "
                    "aborted (ncclCommAbort)"
                )
            time.sleep(pause)
            pause = min(pause * 2, 2e-3)
        waited.sync()  # done already: returns at once and lets go of what the stream kept

    # ---- state ---------------------------------------------------------------------------
    def async_error(self) -> NcclError | None:
        """The failure of work already queued (ncclCommGetAsyncError), or None."""
        self._check_open()
        out = self._api.ffi.new("ncclResult_t*")
        check_nccl(self._api.ncclCommGetAsyncError(self._handle, out), "ncclCommGetAsyncError")
        result = int(out[0])
        if result in (0, 7):  # success, ncclInProgress
            return None
        return nccl_error(result, "ncclCommGetAsyncError", self._handle)

    def abort(self) -> None:
        """Stop the communicator now (ncclCommAbort): its queued work fails or is dropped and
        its peers' waits end with ncclRemoteError. Closed after; aborting twice is harmless."""
        if self.closed:
            return
        self._releaser = _abort
        self.close()

    def __repr__(self) -> str:
        state = "closed" if self.closed else f"device {self.device.ordinal}"
        return f"<Communicator rank {self.rank} of {self.size} ({state})>"

    # ---- checks ----------------------------------------------------------------------------
    def _count(self, count: int) -> int:
        self._check_open()
        count = integer(count, "count")
        if count < 0:
            raise ValueError(f"count must be >= 0, not {count}")
        return count

    def _rank(self, rank: int, what: str) -> int:
        rank = integer(rank, what)
        if not 0 <= rank < self.size:
            raise ValueError(f"{what} {rank} is not a rank of this communicator of {self.size}")
        return rank

    def _buffers(self, *needs: tuple[DeviceBuffer | None, int]) -> None:
        """Each buffer (None: not used by this rank) an open DeviceBuffer of this device with
        at least the bytes it needs."""
        from hip_core.memory import DeviceBuffer

        for buffer, nbytes in needs:
            if buffer is None:
                continue
            if not isinstance(buffer, DeviceBuffer):
                raise TypeError(f"collectives take DeviceBuffers, not {type(buffer).__name__}")
            buffer._check_open()
            if buffer.device.ordinal != self.device.ordinal:
                raise ValueError(
                    f"a buffer of device {buffer.device.ordinal} for the rank on device "
                    f"{self.device.ordinal}"
                )
            if buffer.size < nbytes:
                raise ValueError(f"the buffer has {buffer.size} bytes; the call needs {nbytes}")

    def _call(self, name: str, stream: Stream | None, keep: tuple[Any, ...], *args: Any) -> None:
        from hip_core.stream import checked_handle

        handle = checked_handle(stream)
        if stream is not None:
            checked_stream_of(self, stream, name)
        ffi = self._api.ffi
        pointers = [ffi.NULL if a is None else a._void() if hasattr(a, "_void") else a
                    for a in args]  # fmt: skip
        function = getattr(self._api, name)
        with self.device:
            check_nccl(function(*pointers, self._handle, handle), name, self._handle)
        if stream is not None:
            stream.keep_until_sync(tuple(b for b in keep if b is not None))


def checked_stream_of(comm: Communicator, stream: Stream, what: str) -> None:
    """ValueError unless `stream` is a stream of `comm`'s device."""
    if stream.device.ordinal != comm.device.ordinal:
        raise ValueError(
            f"{what}: a stream of device {stream.device.ordinal} for the rank on device "
            f"{comm.device.ordinal}"
        )


def _keep_current_device(api: Any) -> None:
    """Make this thread's current device the one hip-core tracks again (`with device:`
    reads its own record, not the runtime's). The libraries switch devices while they launch
    or set up the ranks of several devices: should one leave another device current (a failed
    group end does), later synchronous copies would go to that device's null stream."""
    out = api.ffi.new("int*")
    ordinal = current_ordinal()
    if api.hipGetDevice(out) == 0 and out[0] != ordinal:
        api.hipSetDevice(ordinal)


def _destroy(api: Any, handle: Any) -> None:
    try:
        check_nccl(api.ncclCommDestroy(handle), "ncclCommDestroy")
    finally:
        _keep_current_device(api)


def _abort(api: Any, handle: Any) -> None:
    try:
        check_nccl(api.ncclCommAbort(handle), "ncclCommAbort")
    finally:
        _keep_current_device(api)

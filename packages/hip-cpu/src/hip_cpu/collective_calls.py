"""The collectives of the cpu platform's RCCL / NCCL surface: each call's own arguments checked
(ncclInvalidArgument, nothing queued), then queued by collectives.py (which says when and how
they run) for collective_ops.py's algorithms.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from hip_cpu import collective_ops as ops
from hip_cpu.collectives import COMMS, queue, refuse
from hip_ffi.collective_constants import DATA_TYPE_NAMES, INVALID_ARGUMENT, REDUCTION_OP_NAMES
from hip_ffi.handles import address


def _needs(call: ops.Call, rank: int) -> tuple[int, ...]:
    """The buffers a rank's call reads or writes (NCCL ignores broadcast's send buffer and
    reduce's receive buffer off the root)."""
    kind = call.kind
    if kind == ops.SEND:
        return (call.send,)
    if kind == ops.RECV:
        return (call.recv,)
    if kind == ops.BROADCAST and rank != call.root:
        return (call.recv,)
    if kind == ops.REDUCE and rank != call.root:
        return (call.send,)
    return call.send, call.recv


def _collective(handle: Any, call: ops.Call, stream: Any) -> int:
    """Check a call's own arguments (ncclInvalidArgument, nothing queued), then queue it."""
    name = ops.NAMES[call.kind]
    comm = COMMS.get(handle)
    if comm is None:
        return refuse(INVALID_ARGUMENT, f"{name}: not a communicator")
    ranks, rank = comm.segment.ranks, comm.segment.rank
    why = ""
    if call.data_type not in DATA_TYPE_NAMES:
        why = f"no data type {call.data_type}"
    elif call.kind in ops.REDUCING and call.op not in REDUCTION_OP_NAMES:
        why = f"no reduction operation {call.op}"
    elif (call.kind in ops.ROOTED or call.kind in (ops.SEND, ops.RECV)) and not (
        0 <= call.root < ranks
    ):
        why = f"no rank {call.root} in a communicator of {ranks}"
    elif call.count and not all(_needs(call, rank)):
        why = f"a NULL buffer for {call.count} elements"
    if why:
        return refuse(INVALID_ARGUMENT, f"{name}: {why}")
    return queue(comm, stream, call)


def _reducing(kind: int, name: str) -> Callable[..., int]:
    """ncclAllReduce and ncclReduceScatter, which take the same arguments."""

    def call(
        send: Any, recv: Any, count: int, data_type: int, op: int, comm: Any, stream: Any
    ) -> int:
        made = ops.Call(kind, address(send), address(recv), count, data_type, op)
        return _collective(comm, made, stream)

    call.__name__ = call.__qualname__ = name
    return call


ncclAllReduce = _reducing(ops.ALL_REDUCE, "ncclAllReduce")
ncclReduceScatter = _reducing(ops.REDUCE_SCATTER, "ncclReduceScatter")


def ncclBroadcast(
    send: Any, recv: Any, count: int, data_type: int, root: int, comm: Any, stream: Any
) -> int:
    call = ops.Call(ops.BROADCAST, address(send), address(recv), count, data_type, root=root)
    return _collective(comm, call, stream)


def ncclReduce(
    send: Any, recv: Any, count: int, data_type: int, op: int, root: int, comm: Any, stream: Any
) -> int:
    call = ops.Call(ops.REDUCE, address(send), address(recv), count, data_type, op, root)
    return _collective(comm, call, stream)


def ncclAllGather(send: Any, recv: Any, count: int, data_type: int, comm: Any, stream: Any) -> int:
    call = ops.Call(ops.ALL_GATHER, address(send), address(recv), count, data_type)
    return _collective(comm, call, stream)


def ncclSend(send: Any, count: int, data_type: int, peer: int, comm: Any, stream: Any) -> int:
    call = ops.Call(ops.SEND, address(send), 0, count, data_type, root=peer)
    return _collective(comm, call, stream)


def ncclRecv(recv: Any, count: int, data_type: int, peer: int, comm: Any, stream: Any) -> int:
    call = ops.Call(ops.RECV, 0, address(recv), count, data_type, root=peer)
    return _collective(comm, call, stream)

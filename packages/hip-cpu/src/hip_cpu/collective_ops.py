"""The algorithms of the cpu platform's collectives, run by one rank over its Segment.

Every collective moves its elements in chunks of at most `STAGING_BYTES` per rank: each rank
copies its part of the chunk into its own staging area, all meet at a barrier, each reads what
it needs from every staging area (a reduction in rank order, or copies), and all meet again
before the areas are reused. So a collective costs two barriers per chunk and each element is
copied in once and read once by every rank that needs it. In-place calls (send and receive
buffers the same) work, since every contribution is staged before any output is written.

The first barrier of a collective also compares what each rank called (collective, count,
type, operation, root): ranks that disagree all see it there, meet once more and fail with
ncclInvalidUsage, instead of reading past a buffer or hanging as NCCL may.

ncclSend / ncclRecv go through the pair's mailbox, one chunk of `MAILBOX_BYTES` at a time:
a send leaves a chunk and returns once its receiver has taken all but the last, so a message
of one chunk or less is buffered (a send completes without its receiver); the ops of one
group progress together, so a rank may send to and receive from any peers in one group.
"""

from __future__ import annotations

from dataclasses import dataclass

from hip_cpu.collective_rendezvous import (
    CHUNK_BYTES,
    MAILBOX_BYTES,
    MESSAGE_BYTES,
    SENT,
    STAGING_BYTES,
    TAKEN,
    PeerFailure,
    Segment,
)
from hip_ffi._ffi import ffi
from hip_ffi.collective_constants import DATA_TYPE_NAMES, ELEMENT_BYTES, INVALID_USAGE

ALL_REDUCE, BROADCAST, REDUCE, ALL_GATHER, REDUCE_SCATTER, SEND, RECV = range(1, 8)
NAMES = {
    ALL_REDUCE: "ncclAllReduce",
    BROADCAST: "ncclBroadcast",
    REDUCE: "ncclReduce",
    ALL_GATHER: "ncclAllGather",
    REDUCE_SCATTER: "ncclReduceScatter",
    SEND: "ncclSend",
    RECV: "ncclRecv",
}
REDUCING = frozenset((ALL_REDUCE, REDUCE, REDUCE_SCATTER))
ROOTED = frozenset((BROADCAST, REDUCE))


@dataclass
class Call:
    """One collective or point-to-point call as queued: addresses, element count, types,
    `root` (the peer of a send or receive)."""

    kind: int
    send: int
    recv: int
    count: int
    data_type: int
    op: int = 0
    root: int = 0

    def describe(self) -> str:
        what = f"{NAMES[self.kind]} of {self.count} {DATA_TYPE_NAMES[self.data_type]}"
        return what + (f" (root {self.root})" if self.kind in ROOTED else "")


def run(segment: Segment, calls: list[Call]) -> None:
    """The calls of one stream operation: the collectives in order, then the point-to-point
    ones together (a group). PeerFailure when one cannot complete."""
    for call in calls:
        if call.kind not in (SEND, RECV):
            collective(segment, call)
    exchanges = [call for call in calls if call.kind in (SEND, RECV)]
    if exchanges:
        point_to_point(segment, exchanges)


def collective(segment: Segment, call: Call) -> None:
    segment.sequence += 1
    size = ELEMENT_BYTES[call.data_type]
    signature = (
        segment.sequence,
        call.kind,
        call.count,
        call.data_type,
        call.op if call.kind in REDUCING else 0,
        call.root if call.kind in ROOTED else 0,
    )
    segment.post_signature(signature)
    per_rank = segment.ranks if call.kind == REDUCE_SCATTER else 1  # staged parts per rank
    step = max(1, STAGING_BYTES // (size * per_rank))  # elements per chunk
    lo = 0
    first = True
    while first or lo < call.count:
        hi = min(call.count, lo + step)
        _stage(segment, call, lo, hi, size)
        segment.barrier(f"in {call.describe()}")
        if first:
            first = False
            _check_signatures(segment, signature, call)
        _gather(segment, call, lo, hi, size)
        segment.barrier(f"after {call.describe()}")
        lo = hi


def _check_signatures(segment: Segment, mine: tuple[int, ...], call: Call) -> None:
    signatures = segment.signatures()
    if all(other == mine for other in signatures):
        return
    names = ("sequence", "collective", "count", "type", "operation", "root")
    differ = [
        f"rank {r}: " + ", ".join(f"{n} {v}" for n, v in zip(names[1:], other[1:], strict=True))
        for r, other in enumerate(signatures)
        if other != mine
    ]
    segment.barrier("after a mismatched collective")  # every rank sees it: all leave together
    raise PeerFailure(
        INVALID_USAGE,
        f"ranks called different collectives: rank {segment.rank} {call.describe()}; "
        + "; ".join(differ),
    )


def _stage(segment: Segment, call: Call, lo: int, hi: int, size: int) -> None:
    """Copy this rank's contribution to elements [lo, hi) into its staging area."""
    staging, n = segment.staging(segment.rank), hi - lo
    if call.kind == BROADCAST and segment.rank != call.root:
        return
    if call.kind == REDUCE_SCATTER:
        for part in range(segment.ranks):
            source = call.send + (part * call.count + lo) * size
            _copy(staging + part * n * size, source, n * size)
        return
    _copy(staging, call.send + lo * size, n * size)


def _gather(segment: Segment, call: Call, lo: int, hi: int, size: int) -> None:
    """Read what this rank needs of elements [lo, hi) from every staging area."""
    n, ranks, rank = hi - lo, segment.ranks, segment.rank
    if n == 0:
        return
    if call.kind == BROADCAST:
        _copy(call.recv + lo * size, segment.staging(call.root), n * size)
    elif call.kind == ALL_GATHER:
        for other in range(ranks):
            _copy(call.recv + (other * call.count + lo) * size, segment.staging(other), n * size)
    elif call.kind == REDUCE_SCATTER:
        parts = [segment.staging(other) + rank * n * size for other in range(ranks)]
        _reduce(call, call.recv + lo * size, parts, n, ranks)
    elif call.kind == ALL_REDUCE or rank == call.root:  # ncclReduce: the root's output only
        parts = [segment.staging(other) for other in range(ranks)]
        _reduce(call, call.recv + lo * size, parts, n, ranks)


def _reduce(call: Call, out: int, parts: list[int], count: int, ranks: int) -> None:
    from hip_cpu.collective_math import reduce_into

    reduce_into(out, parts, count, call.data_type, call.op, ranks)


def _copy(destination: int, source: int, nbytes: int) -> None:
    if nbytes and destination != source:
        ffi.memmove(ffi.cast("char*", destination), ffi.cast("char*", source), nbytes)


class _Exchange:
    """One send or receive of a group, advanced a chunk at a time by `step()`."""

    def __init__(self, segment: Segment, call: Call) -> None:
        self.segment, self.call = segment, call
        self.peer = call.root
        self.total = call.count * ELEMENT_BYTES[call.data_type]
        self.moved = 0
        self.sending = call.kind == SEND
        if self.sending:
            self.words = segment.channel(segment.rank, self.peer)
            self.box = segment.mailbox(segment.rank, self.peer)
        else:
            self.words = segment.channel(self.peer, segment.rank)
            self.box = segment.mailbox(self.peer, segment.rank)
        self.done = False

    def step(self) -> None:
        words = self.words
        if self.sending:
            if words[SENT] != words[TAKEN]:
                return  # the receiver has not taken the last chunk yet
            if self.moved >= self.total and self.moved:  # last chunk left: done (buffered)
                self.done = True
                return
            n = min(MAILBOX_BYTES, self.total - self.moved)
            _copy(self.box, self.call.send + self.moved, n)
            words[CHUNK_BYTES], words[MESSAGE_BYTES] = n, self.total
            words[SENT] = words[SENT] + 1
            self.moved += n
            self.done = self.moved >= self.total
        else:
            if words[SENT] == words[TAKEN]:
                return  # nothing there yet
            if words[MESSAGE_BYTES] != self.total:
                raise PeerFailure(
                    INVALID_USAGE,
                    f"rank {self.segment.rank} receives {self.total} bytes from rank "
                    f"{self.peer}, which sends {int(words[MESSAGE_BYTES])}",
                )
            n = int(words[CHUNK_BYTES])
            _copy(self.call.recv + self.moved, self.box, n)
            self.moved += n
            words[TAKEN] = words[TAKEN] + 1
            self.done = self.moved >= self.total
        self.segment.moves += 1


def point_to_point(segment: Segment, calls: list[Call]) -> None:
    exchanges = [_Exchange(segment, call) for call in calls]

    def awaited() -> list[int]:
        for exchange in exchanges:
            if not exchange.done:
                exchange.step()
        return [e.peer for e in exchanges if not e.done]

    what = ", ".join(f"{NAMES[c.kind]} with rank {c.root}" for c in calls)
    segment.wait(awaited, f"in {what}")

"""Launch plans (issue 15: a repeated call costs a dict look-up, not its validation): the key
of a call (`plan_key`: each operand's layout id), what every plan starts with (`plan_head`:
the output's shape, dtype and reuse, the operands' extents for the out= check), and the
pointer arguments of a planned launch (`launch_pointers`). OpsBase (ops/base.py) keeps the
plans and checks a planned call's operands; each op family makes its own.
"""

from __future__ import annotations

import itertools
import sys
from collections.abc import Sequence
from typing import Any

from hip_core import DevicePointer, capture_in_progress
from hip_runtime.tensors.tensor import DeviceTensor

PLAN_LIMIT = 4096  # plans a backend keeps (`OpsBase._keep_plan`)
RECYCLE_BYTES = 1 << 20  # the largest output a plan keeps for reuse (`PlanOutput`)
RECYCLE_BUDGET = 32 << 20  # the bytes a backend's plans keep at most, together
_refcount = sys.getrefcount

_LAYOUTS: dict[tuple[Any, ...], int] = {}  # (dtype, shape, strides, address mod 16) -> id
_LAYOUT_LIMIT = 1 << 16  # ids kept; past it the table starts over (ids are never reused)
_next_layout = itertools.count(1)


def layout_id(t: DeviceTensor) -> int:
    """One int for what of `t` decides a launch plan: its dtype, shape, strides and address
    mod 16 (vector access). Equal layouts get equal ids while the table holds them; an id
    never names two layouts (the counter never goes back), so a plan keyed by ids is never
    served a layout it was not made for. Read as `t._layout or layout_id(t)`: worked out
    once per tensor (a tensor's layout is fixed when it is made), and a plan's key is then
    a tuple of small ints (issue 15: hashing dtypes and shapes at every call cost more
    than the look-up)."""
    key = (t.dtype, t.shape, t._strides, t.ptr & 15)
    found = _LAYOUTS.get(key)
    if found is None:
        if len(_LAYOUTS) >= _LAYOUT_LIMIT:
            _LAYOUTS.clear()
        found = _LAYOUTS[key] = next(_next_layout)
    t._layout = found
    return found


def plan_key(*tensors: Any) -> tuple[Any, ...] | None:
    """What of each operand (None, or a DeviceTensor; the output last) decides a plan: its
    layout (`layout_id`: dtype, shape, strides, address mod 16), and which operand the output
    is. None when one is anything else (the checked path then says what is wrong)."""
    key: list[Any] = []
    for t in tensors:
        if t is None:
            key.append(None)
        elif type(t) is DeviceTensor:
            key.append(t._layout or layout_id(t))
        else:
            return None
    out = tensors[-1]
    if out is not None:  # which inputs out is, as bits (a loop: a comprehension is a call)
        bits, bit = 0, 1
        for t in tensors:
            if t is out:
                bits |= bit
            bit <<= 1
        key.append(bits)
    return tuple(key)


class PlanOutput:
    """What a plan knows of its new outputs: their bytes (`nbytes`, what the pool is asked
    for), and the last one it returned (`last`), which the next call returns again when
    nothing else holds it or its memory any more: no reference but the plan's (so no view,
    no other tensor's operand, no graph, no DLPack export), no weak reference, not closed,
    and no capture running. Its memory then has no other user, exactly as when a dropped
    output's block goes back to the pool and the next call of the same size gets it back
    on the same stream, and the call skips the pool, the new tensor and the dropped one's
    release (issue 15: most of a small op's host cost).

    Kept only up to RECYCLE_BYTES an output and RECYCLE_BUDGET a backend (such outputs stay
    in the pool's `in_use` while a plan keeps them); a plan that is dropped drops it."""

    __slots__ = ("last", "nbytes")

    def __init__(self, nbytes: int) -> None:
        self.nbytes = nbytes
        self.last: DeviceTensor | None = None


def _unheld_counts() -> tuple[int, int]:
    """What `sys.getrefcount` reads, in `_planned_output`'s own steps, for a plan's last
    output that nothing else holds: (the tensor's, its buffer's). Measured, not assumed (an
    interpreter may count references on its stack differently); (0, 0), so nothing is ever
    kept, on a build without the GIL, where another thread may take a reference between the
    count and the reuse."""
    if not getattr(sys, "_is_gil_enabled", lambda: True)():
        return 0, 0

    class Held:
        __slots__ = ("buffer",)

    kept: Any = PlanOutput(1)
    kept.last = Held()
    kept.last.buffer = Held()
    y = kept.last
    b = y.buffer
    counts = _refcount(y), _refcount(b)
    return counts if min(counts) > 1 else (0, 0)


_UNHELD = _unheld_counts()


def plan_head(inputs: Sequence[DeviceTensor | None], y: DeviceTensor) -> tuple[Any, ...]:
    """What every plan starts with (`_planned_output` reads it): y's shape, dtype and its
    `PlanOutput` (the bytes to allocate), and for the out= overlap check the bytes each input
    and y span where all are contiguous, else (None, then each one's span as byte offsets
    from its address)."""
    head = (y.shape, y.dtype, PlanOutput(max(y.nbytes, 1)))  # (an empty tensor: an address)
    if y._strides is None and all(t is None or t._strides is None for t in inputs):
        return (*head, (*(0 if t is None else t.nbytes for t in inputs), y.nbytes))
    # A strided one: each one's span as byte offsets from its address, after a None (the
    # layouts in the key fix them; `_strided_out_clear` reads them).
    return (*head, (None, *(byte_extent(t) for t in inputs), byte_extent(y)))


def byte_extent(t: DeviceTensor | None) -> tuple[int, int]:
    """t's span as byte offsets from its address ((0, 0) for None: no bytes); fixed by its
    layout, so a plan keeps it and adds the address of each call's tensor."""
    if t is None:
        return 0, 0
    first, end = t.span()
    return first - t.ptr, end - t.ptr


def _strided_out_clear(
    out: DeviceTensor, inputs: Sequence[DeviceTensor | None], extents: tuple[Any, ...]
) -> bool:
    """Whether out= shares no byte with an input it is not, from a strided plan's extents
    (`plan_head`): spans that meet are left to the checked path (interleaved views may still
    share no element)."""
    low, high = extents[-1]
    start, end = out.ptr + low, out.ptr + high
    k = 1
    for t in inputs:
        if t is not None and t is not out:
            first, last = extents[k]
            if t.ptr + first < end and start < t.ptr + last:
                return False
        k += 1
    return True


_ADDRESSES: dict[int, DevicePointer] = {}  # one DevicePointer per address (launch_pointers)


def launch_pointers(tensors: Sequence[DeviceTensor | None]) -> Sequence[Any]:
    """The pointer arguments of a planned launch, whose tensors `_planned_output` found open:
    each address as a DevicePointer, one object per address. hip-core's Kernel reuses its
    last packing when the arguments are the same objects (a tensor is never compared: its
    `==` is elementwise), and the pool's same-size reuse hands a repeated call the same
    addresses, so a repeated call packs nothing. The memory need not be kept alive by the
    launch: work on it is stream-ordered before any reuse, as for any tensor dropped after
    a launch. While a capture runs, the tensors themselves: the graph keeps what they name."""
    if capture_in_progress():
        return tensors
    found: list[Any] = []
    for t in tensors:
        if t is None:
            found.append(None)
            continue
        pointer = _ADDRESSES.get(t.ptr)
        if pointer is None:
            if len(_ADDRESSES) >= PLAN_LIMIT:
                _ADDRESSES.clear()
            pointer = _ADDRESSES[t.ptr] = DevicePointer(t.ptr)
        found.append(pointer)
    return found


def address_of(t: DeviceTensor | None) -> int:
    """A prepared launch's pointer argument (`Kernel.prepare`): the address, 0 for None."""
    return 0 if t is None else t.ptr


__all__ = [
    "PLAN_LIMIT", "RECYCLE_BUDGET", "RECYCLE_BYTES", "PlanOutput", "address_of",
    "byte_extent", "launch_pointers", "layout_id", "plan_head", "plan_key",
]  # fmt: skip

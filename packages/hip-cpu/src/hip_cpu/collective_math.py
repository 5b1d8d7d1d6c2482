"""The arithmetic of the cpu platform's reducing collectives (numpy; imported at the first one).

Each rank's contribution is a run of elements in host memory; the result is reduced in rank
order (0, 1, ...), so every rank computes the same bits. Integers reduce in their own type and
wrap as in C; float32 and float64 in their own type; float16 and bfloat16 in float64, rounded
once to the element type at the end (round to nearest even; NCCL rounds after each step, so
its float16 / bfloat16 sums may differ in the last bit). ncclAvg is the sum divided by the rank
count: truncated toward zero for integers, as C's division.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from hip_cpu import dnn_math
from hip_ffi import dnn_constants as dc
from hip_ffi._ffi import ffi
from hip_ffi.collective_constants import DATA_TYPES, REDUCTION_OPS

#: ncclDataType_t -> the numpy type of its elements (the 16-bit floats go through dnn_math).
_STORAGE: dict[int, Any] = {
    DATA_TYPES[name]: np.dtype(name)
    for name in ("int8", "uint8", "int32", "uint32", "int64", "uint64", "float32", "float64")
}
#: The 16-bit floats: reduced in float64, rounded once on the way out (dnn_math's load/store).
_WIDENED = {DATA_TYPES["float16"]: dc.MIOPEN_HALF, DATA_TYPES["bfloat16"]: dc.MIOPEN_BFLOAT16}
_UFUNCS = {
    REDUCTION_OPS["sum"]: np.add,
    REDUCTION_OPS["prod"]: np.multiply,
    REDUCTION_OPS["max"]: np.maximum,
    REDUCTION_OPS["min"]: np.minimum,
    REDUCTION_OPS["avg"]: np.add,
}


def _view(address: int, count: int, data_type: int) -> Any:
    storage = _STORAGE[data_type]
    raw = ffi.buffer(ffi.cast("char*", address), count * storage.itemsize)
    return np.frombuffer(raw, storage)


def _load(address: int, count: int, data_type: int) -> Any:
    widened = _WIDENED.get(data_type)
    if widened is not None:
        return dnn_math.load(widened, (count,), (1,), address)
    return _view(address, count, data_type)


def reduce_into(
    out: int, parts: Sequence[int], count: int, data_type: int, op: int, ranks: int
) -> None:
    """out[:count] = op over the `count` elements at each address of `parts`, in their order
    (`out` may be one of them: every part is read before the output is written)."""
    if count == 0:
        return
    ufunc = _UFUNCS[op]
    accumulator = np.array(_load(parts[0], count, data_type), copy=True)
    for part in parts[1:]:
        ufunc(accumulator, _load(part, count, data_type), out=accumulator)
    if op == REDUCTION_OPS["avg"]:
        if accumulator.dtype.kind in "iu":
            quotient = accumulator // ranks
            if accumulator.dtype.kind == "i":  # C truncates toward zero where numpy floors
                quotient += ((accumulator % ranks) != 0) & (accumulator < 0)
            accumulator = quotient
        else:
            accumulator /= ranks
    widened = _WIDENED.get(data_type)
    if widened is not None:
        dnn_math.store(widened, (count,), (1,), out, accumulator)
    else:
        _view(out, count, data_type)[...] = accumulator

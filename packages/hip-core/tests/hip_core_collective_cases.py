"""The collective cases that test_collectives.py and test_collectives_processes.py check, and
their expected results (numpy), shared with the ranks that spawned processes run
(hip_core_collective_children.py): each rank computes its inputs from (seed, rank) alone.

Values are small integers, so every sum, product and average (over 2 or 4 ranks) is exact in
every type, bfloat16 and float16 included: the results compare exactly.
"""

from __future__ import annotations

from typing import Any

import ml_dtypes
import numpy as np

from hip_core import Communicator, Device, DeviceBuffer, Stream

DTYPES = ("float32", "float16", "bfloat16", "int32", "int8", "uint8", "uint32", "int64",
          "uint64", "float64")  # fmt: skip
OPS = ("sum", "prod", "max", "min", "avg")
REDUCING = ("all_reduce", "reduce", "reduce_scatter")
COPYING = ("broadcast", "all_gather")


def numpy_dtype(name: str) -> Any:
    return np.dtype(ml_dtypes.bfloat16) if name == "bfloat16" else np.dtype(name)


def inputs(seed: int, rank: int, count: int, dtype: str, op: str = "sum") -> Any:
    """Rank `rank`'s input: `count` small integers (1..3 for unsigned types, -3..3 else; no
    negative integers to average, whose rounding NCCL does not document)."""
    rng = np.random.default_rng([seed, rank])
    low = 1 if dtype.startswith("u") or (op == "avg" and "int" in dtype) else -3
    return rng.integers(low, 4, count).astype(numpy_dtype(dtype))


def reduced(parts: list[Any], op: str, dtype: str) -> Any:
    """`op` over the ranks' arrays as the library computes it (avg: truncated for integers)."""
    wide = np.stack([p.astype(np.float64) for p in parts])
    if op in ("sum", "avg"):
        value = wide.sum(axis=0)
        if op == "avg":
            value = value / len(parts)
            if numpy_dtype(dtype).kind in "iu":
                value = np.trunc(value)
    else:
        value = {"prod": np.prod, "max": np.max, "min": np.min}[op](wide, axis=0)
    return value.astype(numpy_dtype(dtype))


def expected(kind: str, all_inputs: list[Any], rank: int, op: str, dtype: str, root: int) -> Any:
    """What rank `rank`'s output holds after collective `kind` (None: nothing is written)."""
    ranks = len(all_inputs)
    if kind == "all_reduce":
        return reduced(all_inputs, op, dtype)
    if kind == "reduce":
        return reduced(all_inputs, op, dtype) if rank == root else None
    if kind == "reduce_scatter":
        count = all_inputs[0].size // ranks
        return reduced([x[rank * count : (rank + 1) * count] for x in all_inputs], op, dtype)
    if kind == "broadcast":
        return all_inputs[root]
    return np.concatenate(all_inputs)  # all_gather


def input_count(kind: str, count: int, ranks: int) -> int:
    """Elements in each rank's input buffer for a call with `count`."""
    return ranks * count if kind == "reduce_scatter" else count


def output_count(kind: str, count: int, ranks: int) -> int:
    return ranks * count if kind == "all_gather" else count


def issue(
    comm: Communicator, kind: str, source: DeviceBuffer, target: DeviceBuffer, count: int,
    dtype: str, op: str, root: int, stream: Stream | None = None,
) -> None:  # fmt: skip
    """Queue collective `kind` on `comm` (on `stream`)."""
    if kind in ("all_reduce", "reduce_scatter"):
        getattr(comm, kind)(source, target, count, dtype, op, stream=stream)
    elif kind == "reduce":
        comm.reduce(source, target, count, dtype, op, root=root, stream=stream)
    elif kind == "broadcast":
        comm.broadcast(source, target, count, dtype, root=root, stream=stream)
    else:
        comm.all_gather(source, target, count, dtype, stream=stream)


def buffers(device: Device, data: Any, out_elements: int) -> tuple[DeviceBuffer, DeviceBuffer]:
    """A buffer holding `data` and an output buffer of `out_elements` of its type (zeros).

    Written with `device` current: a synchronous copy or fill runs on the null stream of the
    current device, and only that device's null stream orders it before the collective (on
    nvidia a fill, and the end of a copy from pageable memory, may still run after the call
    returns)."""
    with device:
        source = device.allocate(max(data.nbytes, 1))
        source.copy_from(data.view(np.uint8))  # (bfloat16 has no buffer-protocol format)
        target = device.allocate(max(out_elements * data.itemsize, 1))
        target.fill(0)
    return source, target


def read(device: Device, buffer: DeviceBuffer, count: int, dtype: str) -> Any:
    out = np.zeros(count * numpy_dtype(dtype).itemsize, np.uint8)
    with device:
        buffer.view(0, out.nbytes).copy_to(out)
    return out.view(numpy_dtype(dtype))

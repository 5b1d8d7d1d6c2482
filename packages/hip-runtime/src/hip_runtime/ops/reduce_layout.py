"""How a reduction (or a softmax along an axis) sees its input: [outer, reduced, inner].

Host arithmetic only, cached per (shape, strides, axes): the ops of `reductions`, `softmax` and
`norms` ask `along(...)` for three sizes and three strides (in elements) such that the input's
element (o, r, i) sits at `o * so + r * sr + i * si` and the result's at `o * I + i` (the kept
axes in their order, C-contiguous). Size-1 axes are dropped and neighbouring axes merged where
the strides allow (`hip_runtime.tensors.strides` rules); a layout that does not come down to
kept-reduced-kept (reduced axes apart, or a kept run that does not merge) gives None, and the
op first copies the input, with the reduced axes moved last, into a contiguous temporary.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Sequence
from typing import Any, NamedTuple

from hip_runtime.tensors import strides as layout


class Merged(NamedTuple):
    O: int  # noqa: E741 - the sizes' names in the kernels
    R: int
    I: int  # noqa: E741
    so: int
    sr: int
    si: int


def axes_argument(axis: Any, ndim: int, op: str) -> tuple[int, ...]:
    """`axis` (None: all; an int; a tuple or list of ints, negative allowed) as sorted axes in
    [0, ndim); ValueError naming the op for an axis out of range or named twice, TypeError for
    a non-integer."""
    if axis is None:
        return tuple(range(ndim))
    items = tuple(axis) if isinstance(axis, (tuple, list)) else (axis,)
    found = []
    for item in items:
        try:
            found.append(layout.normalize_axis(item, ndim))
        except IndexError as error:
            raise ValueError(f"{op}: {error}") from None
        except TypeError as error:
            raise TypeError(f"{op}: {error}") from None
    if len(set(found)) != len(found):
        raise ValueError(f"{op}: axis {axis!r} names an axis twice")
    return tuple(sorted(found))


def kept_shape(shape: Sequence[int], axes: tuple[int, ...], keepdim: bool) -> tuple[int, ...]:
    """The result's shape: the reduced axes dropped, or kept as size 1 (keepdim)."""
    if keepdim:
        return tuple(1 if a in axes else d for a, d in enumerate(shape))
    return tuple(d for a, d in enumerate(shape) if a not in axes)


@functools.lru_cache(maxsize=1024)
def along(shape: tuple[int, ...], strides: tuple[int, ...], axes: tuple[int, ...]) -> Merged | None:
    """The [O, R, I] view of a layout reduced over `axes` (see the module's doc), or None.
    For an empty reduction (R = 0) or an empty result the strides are 0 and I is 1."""
    reduced = math.prod(shape[a] for a in axes)
    kept = math.prod(d for a, d in enumerate(shape) if a not in axes)
    if reduced == 0 or kept == 0:
        return Merged(kept, reduced, 1, 0, 0, 0)
    runs: list[list[int]] = []  # [label, size, stride]; label 1: reduced
    for a, (d, s) in enumerate(zip(shape, strides, strict=True)):
        if d == 1:
            continue
        label = int(a in axes)
        last = runs[-1] if runs else None
        if last is not None and last[0] == label and last[2] == s * d:
            last[1] *= d
            last[2] = s
        else:
            runs.append([label, d, s])
    labels = [r[0] for r in runs]
    if labels not in ([], [0], [1], [0, 1], [1, 0], [0, 1, 0]):
        return None  # kept-reduced-kept at most: the output index is o * I + i
    if 1 not in labels:  # nothing of size > 1 reduced
        return Merged(kept, 1, 1, runs[0][2] if runs and kept > 1 else 0, 0, 0)
    at = labels.index(1)
    _, size, step = runs[at]
    outer = runs[at - 1] if at > 0 else [0, 1, 0]
    inner = runs[at + 1] if at + 1 < len(runs) else [0, 1, 0]
    return Merged(outer[1], size, inner[1], outer[2], step, inner[2])


def moved_last(ndim: int, axes: tuple[int, ...]) -> tuple[int, ...]:
    """The permutation that moves `axes` after the others (each group in its order)."""
    return tuple(a for a in range(ndim) if a not in axes) + axes


def row_strides(shape: tuple[int, ...], strides: tuple[int, ...]) -> tuple[int, int, int] | None:
    """(inner, outer, step) placing row r of a layout whose last axis is the columns at
    (r // inner) * outer + (r % inner) * step, when that axis is contiguous and the leading
    axes merge into at most two (a slice of columns, permuted or reversed leading axes); None
    otherwise. What the row kernels (norms, softmax; rows.h's RowStrides) read without a copy."""
    cols = shape[-1]
    if cols > 1 and strides[-1] != 1:
        return None
    lead, (steps,) = layout.collapse(shape[:-1], strides[:-1])
    if len(lead) == 1:
        return 1, (steps[0] if lead[0] > 1 else cols), 0
    if len(lead) == 2:
        return lead[1], steps[0], steps[1]
    return None


def next_power_of_two(n: int) -> int:
    return 1 << max(n - 1, 0).bit_length()


__all__ = [
    "Merged", "along", "axes_argument", "kept_shape", "moved_last", "next_power_of_two",
    "row_strides",
]  # fmt: skip

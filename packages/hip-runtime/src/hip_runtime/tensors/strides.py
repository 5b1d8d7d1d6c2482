"""Index and stride arithmetic of strided tensors, on the host, with no device in sight.

A layout is a shape and strides, both in elements (not bytes, unlike numpy), over storage that
starts at some element offset. The functions here compute the layouts of views (indexing,
permutations, reshapes, broadcasts) and the simplified layouts copies launch with; every one
follows numpy's rules, so a chain of views gives the elements numpy's would. Bad arguments
raise IndexError (an index out of range, too many indices), TypeError (an index of the wrong
type) or ValueError (anything else), with the numbers in the message.
"""

from __future__ import annotations

import math
import operator
from collections.abc import Sequence
from typing import Any

Shape = tuple[int, ...]
Strides = tuple[int, ...]


def c_strides(shape: Shape) -> Strides:
    """The strides of a C-contiguous (row-major) layout of `shape`, in elements."""
    strides, step = [], 1
    for d in reversed(shape):
        strides.append(step)
        step *= max(d, 1)
    return tuple(reversed(strides))


def is_c_contiguous(shape: Shape, strides: Strides) -> bool:
    """Whether the elements lie row-major without gaps (numpy's rule: the stride of a size-1
    axis does not matter, and an empty layout is contiguous)."""
    if 0 in shape:
        return True
    step = 1
    for d, s in zip(reversed(shape), reversed(strides), strict=True):
        if d != 1:
            if s != step:
                return False
            step *= d
    return True


def extent(shape: Shape, strides: Strides) -> tuple[int, int]:
    """(lowest, highest) element offset the layout reaches from its first element; (0, -1)
    when it holds no element."""
    low = high = 0
    for d, s in zip(shape, strides, strict=True):
        if d == 0:
            return 0, -1
        reach = s * (d - 1)
        if reach < 0:
            low += reach
        else:
            high += reach
    return low, high


def as_index(value: Any, what: str) -> int:
    """An integer argument (a Python or numpy int, not a bool); TypeError otherwise."""
    if isinstance(value, bool):
        raise TypeError(f"{what} must be an int, not a bool")
    try:
        return operator.index(value)
    except TypeError:
        raise TypeError(f"{what} must be an int, not {type(value).__name__}") from None


def normalize_axis(axis: Any, ndim: int) -> int:
    """`axis` in [-ndim, ndim) as an index in [0, ndim); IndexError otherwise."""
    a = as_index(axis, "an axis")
    if not -ndim <= a < ndim:
        raise IndexError(f"axis {a} is out of range for {ndim} dimensions")
    return a + ndim if a < 0 else a


def dims_argument(dims: tuple[Any, ...]) -> tuple[Any, ...]:
    """`f(1, 2)` and `f((1, 2))` alike: the varargs of a shape- or axes-taking method."""
    if len(dims) == 1 and isinstance(dims[0], (tuple, list)):
        return tuple(dims[0])
    return dims


# --- views ----------------------------------------------------------------------------------


def index(shape: Shape, strides: Strides, key: Any) -> tuple[Shape, Strides, int]:
    """The layout `tensor[key]` selects: (shape, strides, element offset from the first
    element). `key` holds ints (an axis dropped), slices (any step, negative too), None (a new
    axis of size 1) and at most one Ellipsis, as in numpy's basic indexing."""
    items = key if isinstance(key, tuple) else (key,)
    for item in items:
        if not (item is None or item is Ellipsis or type(item) is slice or type(item) is int):
            as_index(item, "an index")  # only ints besides: TypeError for lists, bools, floats
    # (only ints, slices, None and Ellipsis from here: `count`'s == compares them safely)
    ellipses = items.count(Ellipsis)
    if ellipses > 1:
        raise IndexError("an index can only have a single ellipsis ('...')")
    used = len(items) - items.count(None) - ellipses
    if used > len(shape):
        raise IndexError(f"too many indices: {used} for {len(shape)} dimensions")
    if Ellipsis not in items:
        items = (*items, Ellipsis)
    new_shape: list[int] = []
    new_strides: list[int] = []
    offset, axis = 0, 0
    for item in items:
        if item is None:
            new_shape.append(1)
            new_strides.append(0)
        elif item is Ellipsis:
            rest = len(shape) - used
            new_shape.extend(shape[axis : axis + rest])
            new_strides.extend(strides[axis : axis + rest])
            axis += rest
            used = len(shape)  # an appended Ellipsis after all indices covers nothing more
        elif isinstance(item, slice):
            start, stop, step = item.indices(shape[axis])  # ValueError for a zero step
            count = len(range(start, stop, step))
            new_shape.append(count)
            new_strides.append(strides[axis] * step)
            if count:
                offset += start * strides[axis]
            axis += 1
        else:
            i, size = as_index(item, "an index"), shape[axis]
            if not -size <= i < size:
                raise IndexError(f"index {i} is out of range for axis {axis} of size {size}")
            offset += (i + size if i < 0 else i) * strides[axis]
            axis += 1
    return tuple(new_shape), tuple(new_strides), offset


def permutation(dims: Sequence[Any], ndim: int) -> tuple[int, ...]:
    """`dims` as a permutation of range(ndim); ValueError if it is not one."""
    order = tuple(normalize_axis(d, ndim) for d in dims)
    if sorted(order) != list(range(ndim)):
        raise ValueError(f"{tuple(dims)} is not a permutation of {ndim} axes")
    return order


def resolve_shape(size: int, dims: Sequence[Any]) -> Shape:
    """A target shape for `size` elements: ints >= 0 and at most one -1 (inferred)."""
    # (plain ints without a call each: views are made at every op of a model's step)
    values = [d if type(d) is int else as_index(d, "a dimension") for d in dims]
    if values.count(-1) > 1:
        raise ValueError("only one dimension may be -1")
    if values and min(values) < -1:
        raise ValueError(f"negative dimension in {tuple(values)}")
    if -1 in values:
        known = math.prod(d for d in values if d != -1)
        if known == 0 or size % known:
            raise ValueError(f"cannot reshape {size} elements into {tuple(values)}")
        values[values.index(-1)] = size // known
    if math.prod(values) != size:
        raise ValueError(f"cannot reshape {size} elements into {tuple(values)}")
    return tuple(values)


def reshape(shape: Shape, strides: Strides, new_shape: Shape) -> Strides | None:
    """Strides that show the layout's elements, in row-major order, as `new_shape` without
    moving them; None when no strides can (numpy's rule: each group of new axes must cover a
    group of old axes that are contiguous among themselves)."""
    if math.prod(shape) == 0 or is_c_contiguous(shape, strides):
        return c_strides(new_shape)
    old = [(d, s) for d, s in zip(shape, strides, strict=True) if d != 1]
    result = [0] * len(new_shape)
    oi = ni = 0
    while ni < len(new_shape) and oi < len(old):
        nj, oj = ni + 1, oi + 1
        new_count, old_count = new_shape[ni], old[oi][0]
        while new_count != old_count:  # grow the smaller side until both groups match
            if new_count < old_count:
                new_count *= new_shape[nj]
                nj += 1
            else:
                old_count *= old[oj][0]
                oj += 1
        for k in range(oi, oj - 1):
            if old[k][1] != old[k + 1][0] * old[k + 1][1]:
                return None  # the old group is not contiguous in itself: its elements move
        result[nj - 1] = old[oj - 1][1]
        for k in range(nj - 1, ni, -1):
            result[k - 1] = result[k] * new_shape[k]
        ni, oi = nj, oj
    for k in range(ni, len(new_shape)):  # trailing axes of size 1
        result[k] = result[ni - 1] if ni else 1
    return tuple(result)


def broadcast_shapes(*shapes: Shape) -> Shape:
    """numpy's broadcast of several shapes; ValueError naming them when they do not."""
    ndim = max((len(s) for s in shapes), default=0)
    result = []
    for axis in range(ndim):
        sizes = {s[axis - ndim + len(s)] for s in shapes if axis - ndim + len(s) >= 0}
        sizes.discard(1)
        if len(sizes) > 1:
            listed = " and ".join(str(s) for s in shapes)
            raise ValueError(f"shapes {listed} do not broadcast")
        result.append(sizes.pop() if sizes else 1)
    return tuple(result)


def broadcast_to(shape: Shape, strides: Strides, target: Shape) -> Strides:
    """Strides showing the layout as `target` by numpy's broadcasting: new leading axes and
    size-1 axes repeat with stride 0. ValueError when `shape` does not broadcast to `target`."""
    extra = len(target) - len(shape)
    if extra < 0:
        raise ValueError(f"cannot broadcast {shape} to fewer dimensions: {target}")
    result = [0] * extra
    for d, s, t in zip(shape, strides, target[extra:], strict=True):
        if d == t:
            result.append(s)
        elif d == 1:
            result.append(0)
        else:
            raise ValueError(f"cannot broadcast {shape} to {target}")
    return tuple(result)


def squeeze(shape: Shape, strides: Strides, dims: tuple[Any, ...] | None) -> tuple[Shape, Strides]:
    """The layout without the size-1 axes `dims` (all of them when None). As numpy: naming an
    axis whose size is not 1 is a ValueError."""
    ndim = len(shape)
    if dims is None:
        drop = {a for a in range(ndim) if shape[a] == 1}
    else:
        drop = {normalize_axis(d, ndim) for d in dims}
        for a in sorted(drop):
            if shape[a] != 1:
                raise ValueError(f"cannot squeeze axis {a} of size {shape[a]} (shape {shape})")
    kept = [a for a in range(ndim) if a not in drop]
    return tuple(shape[a] for a in kept), tuple(strides[a] for a in kept)


def unsqueeze(shape: Shape, strides: Strides, dim: Any) -> tuple[Shape, Strides]:
    """The layout with a new axis of size 1 at `dim` (in [-ndim - 1, ndim], as torch)."""
    a = normalize_axis(dim, len(shape) + 1)
    # The stride torch gives: what keeps a contiguous layout's strides contiguous-looking.
    stride = shape[a] * strides[a] if a < len(shape) else 1
    return (*shape[:a], 1, *shape[a:]), (*strides[:a], stride, *strides[a:])


# --- copies ---------------------------------------------------------------------------------


def collapse(shape: Shape, *strides: Strides) -> tuple[Shape, list[Strides]]:
    """The fewest axes that visit the same elements in the same order for every stride set:
    size-1 axes dropped, neighbours merged where each set steps over them as over one axis.
    At least one axis is left for a non-empty layout."""
    kept = [a for a, d in enumerate(shape) if d != 1]
    dims: list[int] = []
    steps: list[list[int]] = [[] for _ in strides]
    for a in kept:
        if dims and all(st[-1] == s[a] * shape[a] for st, s in zip(steps, strides, strict=True)):
            dims[-1] *= shape[a]
            for st, s in zip(steps, strides, strict=True):
                st[-1] = s[a]
        else:
            dims.append(shape[a])
            for st, s in zip(steps, strides, strict=True):
                st.append(s[a])
    if not dims:
        return (1,), [(1,) for _ in strides]
    return tuple(dims), [tuple(st) for st in steps]


__all__ = [
    "Shape",
    "Strides",
    "as_index",
    "broadcast_shapes",
    "broadcast_to",
    "c_strides",
    "collapse",
    "dims_argument",
    "extent",
    "index",
    "is_c_contiguous",
    "normalize_axis",
    "permutation",
    "reshape",
    "resolve_shape",
    "squeeze",
    "unsqueeze",
]

"""The views of a DeviceTensor: new shapes and strides over the same storage, never a copy.

Every method here returns a DeviceTensor that shares its parent's buffer (`view.buffer is
parent.buffer`), keeps it alive and never frees it; writes through a view land in the parent.
Nothing is queued on any stream: a view is host arithmetic only (`hip_runtime.tensors.strides`), and
it carries its parent's stream and pool. The rules are numpy's (torch's where numpy has no
such method); bad arguments raise before anything is made.
"""

from __future__ import annotations

from math import prod as _prod
from typing import TYPE_CHECKING, Any

import numpy as np

from hip_runtime.tensors import strides as layout
from hip_runtime.tensors.dtypes import DTypeLike, as_dtype

if TYPE_CHECKING:
    from hip_runtime.tensors.tensor import DeviceTensor


class TensorViews:
    """Mixed into DeviceTensor: the view methods. (A separate class only to keep one concern
    per file; it holds no state.)"""

    __slots__ = ()

    if TYPE_CHECKING:
        shape: layout.Shape
        dtype: np.dtype[Any]
        offset: int

        @property
        def strides(self) -> layout.Strides: ...

        @property
        def ndim(self) -> int: ...

        @property
        def size(self) -> int: ...

        @property
        def is_contiguous(self) -> bool: ...

        def _derive(
            self,
            shape: layout.Shape,
            strides: layout.Strides | None,
            offset: int = 0,
            *,
            dtype: np.dtype[Any] | None = None,
        ) -> DeviceTensor: ...

    def __getitem__(self, key: Any) -> DeviceTensor:
        """numpy's basic indexing: ints (the axis is dropped; an int on every axis gives a 0-d
        tensor, not a scalar), slices with any step (negative too), None (a new axis of size 1)
        and one Ellipsis, in a tuple or alone. Advanced indexing (lists, arrays, bools) is a
        TypeError: gather ops do that."""
        if type(key) is int and self.is_contiguous and self.shape:  # a row: the common case
            rows, rest = self.shape[0], self.shape[1:]
            if -rows <= key < rows:
                return self._derive(rest, None, (key + rows if key < 0 else key) * _prod(rest))
        shape, strides, offset = layout.index(self.shape, self.strides, key)
        return self._derive(shape, strides, offset)

    def permute(self, *dims: Any) -> DeviceTensor:
        """The axes reordered: axis i of the result is axis dims[i] of this tensor
        (`t.permute(2, 0, 1)` or `t.permute((2, 0, 1))`)."""
        order = layout.permutation(layout.dims_argument(dims), self.ndim)
        shape, strides = self.shape, self.strides
        return self._derive(tuple(shape[a] for a in order), tuple(strides[a] for a in order))

    def transpose(self, dim0: Any, dim1: Any) -> DeviceTensor:
        """Axes dim0 and dim1 swapped (any rank; negative axes count from the end)."""
        order = list(range(self.ndim))
        a, b = layout.normalize_axis(dim0, self.ndim), layout.normalize_axis(dim1, self.ndim)
        order[a], order[b] = b, a
        return self.permute(order)

    @property
    def T(self) -> DeviceTensor:
        """Every axis reversed, as numpy's `.T` (a matrix transposed)."""
        return self.permute(tuple(reversed(range(self.ndim))))

    @property
    def mT(self) -> DeviceTensor:
        """The last two axes swapped: a batch of matrices transposed."""
        if self.ndim < 2:
            raise ValueError(f"mT needs at least 2 dimensions, not {self.shape}")
        return self.transpose(-2, -1)

    def narrow(self, dim: Any, start: Any, length: Any) -> DeviceTensor:
        """Elements [start, start + length) of axis `dim` (start may be negative, as torch)."""
        a = layout.normalize_axis(dim, self.ndim)
        size = self.shape[a]
        first, count = layout.as_index(start, "start"), layout.as_index(length, "length")
        first += size if first < 0 else 0
        if not 0 <= first <= size or count < 0 or first + count > size:
            raise IndexError(f"narrow({a}, {start}, {length}) is outside an axis of size {size}")
        key = (slice(None),) * a + (slice(first, first + count),)
        return self[key]

    def broadcast_to(self, shape: Any) -> DeviceTensor:
        """numpy's `broadcast_to`: new leading axes and size-1 axes repeated with stride 0 (no
        memory). Copying *into* such a view is refused: its elements overlap."""
        target = _shape_of(shape)
        return self._derive(target, layout.broadcast_to(self.shape, self.strides, target))

    def expand(self, *sizes: Any) -> DeviceTensor:
        """torch's `expand`: `broadcast_to`, where -1 keeps the size of an existing axis."""
        target = list(_shape_of(layout.dims_argument(sizes), allow_minus_one=True))
        extra = len(target) - self.ndim
        for i, d in enumerate(target):
            if d == -1:
                if i < extra:
                    raise ValueError(f"-1 is only allowed for existing axes, not in {sizes}")
                target[i] = self.shape[i - extra]
        return self.broadcast_to(tuple(target))

    def squeeze(self, dim: Any = None) -> DeviceTensor:
        """Without the size-1 axes `dim` (an int or a tuple), or without all of them when None;
        an axis whose size is not 1 is a ValueError (numpy's rule)."""
        dims = None if dim is None else (tuple(dim) if isinstance(dim, (tuple, list)) else (dim,))
        shape, strides = layout.squeeze(self.shape, self.strides, dims)
        return self._derive(shape, strides)

    def unsqueeze(self, dim: Any) -> DeviceTensor:
        """With a new axis of size 1 at `dim` (in [-ndim - 1, ndim])."""
        shape, strides = layout.unsqueeze(self.shape, self.strides, dim)
        return self._derive(shape, strides)

    def reshape(self, *shape: Any) -> DeviceTensor:
        """The same elements, row-major, in another shape of the same size (one dimension may
        be -1). Always a view: where the strides cannot show the elements in the new shape
        without moving them (numpy would copy), ValueError pointing at `contiguous()`."""
        new = layout.resolve_shape(self.size, layout.dims_argument(shape))
        if self.is_contiguous:
            return self._derive(new, None)  # the op path: no stride arithmetic
        strides = layout.reshape(self.shape, self.strides, new)
        if strides is None:
            raise ValueError(
                f"cannot reshape a view of shape {self.shape} and strides {self.strides} into "
                f"{new} without copying; call .contiguous() first (it copies)"
            )
        return self._derive(new, strides)

    def view(self, dtype: DTypeLike) -> DeviceTensor:
        """The same bytes read as another dtype. Of the same item size: any tensor, shape kept.
        Of another size: the last axis must have stride 1 (or size 1), its bytes must divide
        into the new items, and the other strides and the byte offset must be multiples of the
        new item size (torch's rule, which keeps every element aligned); the last axis scales."""
        new = as_dtype(dtype)
        old_size, new_size = self.dtype.itemsize, new.itemsize
        if new_size == old_size:
            return self._derive(self.shape, self.strides, 0, dtype=new)
        if self.ndim == 0:
            raise ValueError(f"a 0-d tensor cannot be viewed as {new} of another item size")
        *lead, last = self.shape
        *lead_strides, last_stride = self.strides
        if last != 1 and last_stride != 1:
            raise ValueError(
                f"viewing {self.dtype} as {new} needs the last axis contiguous (stride 1), not "
                f"{last_stride}; call .contiguous() first"
            )
        lead_bytes = [s * old_size for s in lead_strides]
        if (last * old_size) % new_size or self.offset % new_size:
            raise ValueError(
                f"{last} elements of {self.dtype} at byte offset {self.offset} do not divide "
                f"into items of {new} ({new_size} bytes)"
            )
        if any(s % new_size for s in lead_bytes):
            raise ValueError(f"strides {self.strides} of {self.dtype} are not whole {new} items")
        shape = (*lead, last * old_size // new_size)
        strides = (*(s // new_size for s in lead_bytes), 1)
        return self._derive(shape, strides, 0, dtype=new)


def _shape_of(shape: Any, *, allow_minus_one: bool = False) -> layout.Shape:
    dims = (shape,) if not isinstance(shape, (tuple, list)) else tuple(shape)
    values = tuple(layout.as_index(d, "a dimension") for d in dims)
    floor = -1 if allow_minus_one else 0
    if any(d < floor for d in values):
        raise ValueError(f"negative dimension in {values}")
    return values


__all__ = ["TensorViews"]

"""Tensors made on the device: arange, full, fill_, tril, triu and causal masks
(kernels/fill.hip). Queued on the backend's stream; nothing waits.

A fill value is converted to the tensor's dtype on the host as numpy converts it
(`np.asarray(value, dtype)`: floats to ints truncate, anything to bool is its truth); a value
the dtype cannot hold (300 as int8, NaN as an integer) is a ValueError before anything is
queued. The kernels then write bits, one kernel per element size for every dtype.
"""

from __future__ import annotations

import math
import operator
from typing import Any

import numpy as np

from hip_runtime.ops.base import OpsBase
from hip_runtime.tensors import strides as layout
from hip_runtime.tensors.dtypes import DTypeLike, as_dtype, float32
from hip_runtime.tensors.dtypes import suffix as dtype_suffix
from hip_runtime.tensors.strided_copy import check_writable
from hip_runtime.tensors.tensor import DeviceTensor, ShapeLike, as_shape

_RANK = 6  # axes fill_<u> takes after merging (HIPK_FILL_RANK)
_INT64 = np.dtype(np.int64)
_BOOL = np.dtype(np.bool_)


class CreationOps(OpsBase):
    def arange(
        self, start: float, stop: float | None = None, step: float = 1, *, dtype: DTypeLike = None
    ) -> DeviceTensor:
        """[start, start + step, ...) up to `stop` (exclusive), as numpy's arange: one argument
        is the stop from 0. dtype: int64 when start, stop and step are all ints, float32
        otherwise (torch's defaults), or any dtype of kernels/dtypes.h but bool. Element i is
        start + i * step computed in double (floats; rounded once) or in 64-bit integers
        (wrapping into the dtype); len = ceil((stop - start) / step)."""
        self._check_open()
        if stop is None:
            start, stop = 0, start
        values = (start, stop, step)
        integral = all(_is_int(v) for v in values)
        if not all(integral or isinstance(v, (int, float, np.integer, np.floating))
                   for v in values) or any(isinstance(v, bool) for v in values):  # fmt: skip
            raise ValueError(f"arange takes ints or floats, not {values!r}")
        target = (_INT64 if integral else float32) if dtype is None else as_dtype(dtype)
        name = dtype_suffix(target, "arange's dtype")
        if target == _BOOL:
            raise ValueError("arange cannot make bool tensors")
        if step == 0:
            raise ValueError("arange: step must not be 0")
        if not all(math.isfinite(v) for v in values):
            raise ValueError(f"arange: start, stop and step must be finite, not {values!r}")
        if integral:
            count = max(0, -(-(int(stop) - int(start)) // int(step)))
        else:
            delta = float(stop) - float(start)
            ratio = delta / float(step)
            # A ratio that underflowed to 0 from a nonzero span: one element when its sign says
            # the span runs the step's way (as numpy: arange(0.0, -5e-324, -2.0) is [0.0]).
            if ratio == 0.0 and delta != 0.0:
                count = 0 if math.copysign(1.0, ratio) < 0 else 1
            else:
                count = max(0, math.ceil(ratio))
        y = self._output(None, (count,), target)
        if target.kind in "iu":
            if not integral:
                raise ValueError(f"arange of {target} takes int start, stop and step")
            args: tuple[Any, ...] = (_wrapped(start), _wrapped(step))
        else:
            args = (float(start), float(step))
        self._launch_flat(self._kernel("fill.hip", f"arange_{name}"), count, 16, y, count, *args)
        return y

    def full(self, shape: ShapeLike, value: Any, dtype: DTypeLike = float32) -> DeviceTensor:
        """A new C-contiguous tensor of `shape` with every element `value` (converted to
        `dtype` as the module docstring says)."""
        self._check_open()
        target = as_dtype(dtype)
        pattern = _pattern(value, target, "full")
        y = self._output(None, as_shape(shape), target)
        self._creation_fill(y, pattern)
        return y

    def fill_(self, tensor: DeviceTensor, value: Any) -> DeviceTensor:
        """tensor[...] = value, in place, whatever its layout (strided, reversed; a broadcast
        view is a ValueError, its elements share memory); returns tensor."""
        tensor = self._operand(tensor, "tensor")
        check_writable(tensor)
        self._creation_fill(tensor, _pattern(value, tensor.dtype, "fill_"))
        return tensor

    def tril(self, x: DeviceTensor, k: int = 0, *, out: DeviceTensor | None = None) -> DeviceTensor:
        """The lower triangle of x's last two axes (numpy's tril: elements with column - row
        <= k kept, the rest zero bits), for x of any rank >= 2, dtype and layout. `out=x`
        works in place when x is C-contiguous."""
        return self._creation_triangle(x, k, 0, out, "tril")

    def triu(self, x: DeviceTensor, k: int = 0, *, out: DeviceTensor | None = None) -> DeviceTensor:
        """The upper triangle of x's last two axes (numpy's triu: column - row >= k kept),
        as `tril`."""
        return self._creation_triangle(x, k, 1, out, "triu")

    def causal_mask(
        self, rows: int, cols: int | None = None, *, offset: int = 0, dtype: DTypeLike = bool
    ) -> DeviceTensor:
        """A [rows, cols] (cols = rows by default) causal attention mask in one launch, where
        query row r may see key column c <= r + offset (offset = cols - rows lines the last
        query up with the last key of a cache). bool: True where it may see (as
        `tril(ones, offset)`); a float dtype: an additive mask, 0 where it may see and -inf
        elsewhere (to add to attention scores before softmax)."""
        self._check_open()
        cols = rows if cols is None else cols
        shape = as_shape((rows, cols))
        target = as_dtype(dtype)
        if target == _BOOL:
            keep, drop = 1, 0
        elif target.kind == "f" or target.name == "bfloat16":
            keep, drop = 0, _pattern(-np.inf, target, "causal_mask")
        else:
            raise ValueError(f"causal_mask makes bool or float masks, not {target}")
        k = _index(offset, "causal_mask", "offset")
        y = self._output(None, shape, target)
        self._creation_mask(None, y, 1, shape[0], shape[1], k, 0, keep, drop)
        return y

    # --- private ------------------------------------------------------------------------------

    def _creation_triangle(
        self, x: Any, k: int, upper: int, out: DeviceTensor | None, op: str
    ) -> DeviceTensor:
        x = self._operand(x, "x")
        k = _index(k, op, "k")
        if x.ndim < 2:
            raise ValueError(f"{op} needs x of at least 2 dimensions, not {x.shape}")
        _unit(x.dtype, op)
        rows, cols = x.shape[-2:]
        contiguous = x.is_contiguous
        y = self._output(out, x.shape, x.dtype, inputs=(x,) if contiguous else (),
                         distinct_from=() if contiguous else (x,))  # fmt: skip
        if not x.is_contiguous:  # copied in first, then masked in place (each thread its own)
            y.copy_(x)
            x = y
        self._creation_mask(x, y, math.prod(x.shape[:-2]), rows, cols, k, upper, 0, 0)
        return y

    def _creation_mask(
        self,
        x: DeviceTensor | None,
        y: DeviceTensor,
        batch: int,
        rows: int,
        cols: int,
        k: int,
        upper: int,
        keep: int,
        drop: int,
    ) -> None:
        kernel = self._kernel("fill.hip", f"tril_u{_unit(y.dtype, 'tril') * 8}")
        self._launch_flat(kernel, y.size, 16, x, y, batch, rows, cols, k, upper, keep, drop)

    def _creation_fill(self, y: DeviceTensor, pattern: int) -> None:
        """Every element of y (any writable layout) = the bits `pattern`."""
        if y.size == 0:
            return
        dims: tuple[int, ...]
        steps: tuple[int, ...]
        if y.is_contiguous:
            dims, steps = (y.size,), (1,)
        else:
            dims, (steps,) = layout.collapse(y.shape, y.strides)
        if len(dims) > _RANK:  # rare: fill a contiguous copy's worth by rows of the layout
            for i in range(y.shape[0]):
                self._creation_fill(y[i], pattern)
            return
        pad = _RANK - len(dims)
        kernel = self._kernel("fill.hip", f"fill_u{_unit(y.dtype, 'fill') * 8}")
        self._launch_flat(kernel, y.size, y.dtype.itemsize, y, y.size, pattern, len(dims),
                          *dims, *([1] * pad), *steps, *([0] * pad))  # fmt: skip


def _is_int(value: Any) -> bool:
    return isinstance(value, (int, np.integer)) and not isinstance(value, bool)


def _index(value: Any, op: str, name: str) -> int:
    try:
        return operator.index(value)
    except TypeError:
        raise ValueError(f"{op}: {name} must be an int, not {value!r}") from None


def _wrapped(value: Any) -> int:
    """A Python int as the signed 64-bit value the kernel takes (two's complement)."""
    return (int(value) + 2**63) % 2**64 - 2**63


def _unit(dtype: np.dtype[Any], op: str) -> int:
    item = dtype.itemsize
    if item not in (1, 2, 4, 8):
        raise ValueError(f"{op}: {dtype} has {item}-byte elements; the kernels write 1, 2, 4 or 8")
    return item


def _pattern(value: Any, dtype: np.dtype[Any], op: str) -> int:
    """`value` as an element of `dtype`, its bits as an unsigned int (for the fill kernels)."""
    _unit(dtype, op)
    try:
        with np.errstate(invalid="raise", over="raise"):
            element = np.asarray(value, dtype=dtype)
    except (ValueError, TypeError, OverflowError, FloatingPointError) as error:
        raise ValueError(f"{op}: {value!r} is not a {dtype} value ({error})") from None
    if element.shape != ():
        raise ValueError(f"{op} takes one value, not an array of shape {element.shape}")
    return int(element.reshape(1).view(np.dtype(f"u{dtype.itemsize}"))[0])


__all__ = ["CreationOps"]

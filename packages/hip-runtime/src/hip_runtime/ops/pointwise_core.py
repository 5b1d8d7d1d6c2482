"""What every pointwise op shares: operands (tensors of any layout, or Python scalars), numpy's
broadcasting, the output, and one launch of a kernel family of kernels/pointwise.h.

A call is validated whole before anything is queued (ValueError/TypeError naming the op and
the argument), then runs as one launch on the backend's stream. On the host, the layout is
merged first (`strides.collapse`: axes every operand steps over as one become one), then:

- the rows path (`<family>_<t>`) when at most two axes are left, the output's innermost stride
  is 1 and every input's is 1 or 0: a contiguous tensor (rows = 1), [rows, cols] op [cols],
  [rows, cols] op [rows, 1]. 16-byte vector accesses where the columns and addresses allow;
- the strided path (`<family>_any_<t>`) for anything else, up to 8 merged axes (more is a
  ValueError: a layout that resists merging into 8 axes needs `.contiguous()` first).

Kernels are looked up once per (source, family, dtype, path) and cached; the per-call host work
is a few attribute reads when every operand is contiguous and of the output's shape.
"""

from __future__ import annotations

import math
import numbers
from collections.abc import Sequence
from typing import Any

import numpy as np

from hip_core import Kernel
from hip_runtime.ops.base import OpsBase
from hip_runtime.ops.plans import launch_pointers, layout_id, plan_head
from hip_runtime.ops.pointwise_codes import CAST_TARGETS
from hip_runtime.tensors import dtypes
from hip_runtime.tensors import strides as layout
from hip_runtime.tensors.dtypes import SUFFIXES, DTypeLike, as_dtype
from hip_runtime.tensors.tensor import DeviceTensor

_BLOCK = 256
_RANK = 8  # axes the strided path takes (kernels/pointwise.h HIPK_PW_RANK)
_PAD = (0,) * _RANK

Operand = Any  # a DeviceTensor, or a Python (or numpy) number


class PointwiseCore(OpsBase):
    """The launch machinery of the pointwise families (ops/pointwise*.py, elementwise,
    activations): no public op of its own."""

    def _pw_kernel(self, source: str, family: str, suffix: str, rows: bool) -> Kernel:
        cache: dict[tuple[str, str, str, bool], Kernel]
        cache = self.__dict__.setdefault("_pointwise_kernels", {})
        key = (source, family, suffix, rows)
        kernel = cache.get(key)
        if kernel is None:
            name = f"{family}_{suffix}" if rows else f"{family}_any_{suffix}"
            kernel = cache[key] = self.kernels.get(source, name)
        return kernel

    # --- operands ------------------------------------------------------------------------

    def _pw_operands(
        self, values: Sequence[Operand], names: Sequence[str]
    ) -> tuple[list[DeviceTensor | None], np.dtype[Any]]:
        """Each value as a tensor (None for a scalar) and the tensors' common dtype."""
        tensors: list[DeviceTensor | None] = []
        dtype: np.dtype[Any] | None = None
        first = ""
        for value, name in zip(values, names, strict=True):
            if type(value) is not DeviceTensor and _is_scalar(value):
                tensors.append(None)
                continue
            tensor = self._operand(value, name)
            if dtype is None:
                dtype, first = tensor.dtype, name
            elif tensor.dtype != dtype:
                raise ValueError(
                    f"{_op()}: {first} has dtype {dtype} and {name} has dtype {tensor.dtype}; "
                    "cast one of them first"
                )
            tensors.append(tensor)
        if dtype is None:
            raise TypeError(f"{_op()} needs at least one DeviceTensor operand")
        return tensors, dtype

    def _pw_output(
        self,
        out: DeviceTensor | None,
        tensors: Sequence[DeviceTensor | None],
        dtype: np.dtype[Any],
        *,
        distinct: bool = False,
    ) -> DeviceTensor:
        """The output of the broadcast of `tensors`' shapes (numpy's rules), of `dtype`: a new
        C-contiguous tensor, or `out` (any writable layout; it may be an input exactly, unless
        `distinct`)."""
        shapes = [t.shape for t in tensors if t is not None]
        shape = shapes[0]
        for other in shapes[1:]:
            if other != shape:
                try:
                    shape = layout.broadcast_shapes(*shapes)
                except ValueError as error:
                    raise ValueError(f"{_op()}: {error}") from None
                break
        inputs = [t for t in tensors if t is not None]
        if distinct:
            return self._output(out, shape, dtype, distinct_from=inputs, strided=True)
        return self._output(out, shape, dtype, inputs=inputs, strided=True)

    # --- families ------------------------------------------------------------------------

    def _pw_binary(
        self,
        source: str,
        family: str,
        code: int,
        a: Operand,
        b: Operand,
        out: DeviceTensor | None,
        types: frozenset[str],
        *,
        result: np.dtype[Any] | None = None,
        exact: bool = True,
    ) -> DeviceTensor:
        """y = op(a, b) of binary.hip / compare.hip (`result`: y's dtype when not the
        operands'); a scalar operand takes the tensor's dtype (rounded to it when `exact`).

        Two tensors: a repeated call of the same layouts is served by a plan (`_pw_cached`)."""
        key = None
        if type(a) is DeviceTensor is type(b) and (out is None or type(out) is DeviceTensor):
            key = (family, code, types, result, a._layout or layout_id(a),
                   b._layout or layout_id(b), None if out is None else
                   (out._layout or layout_id(out), out is a, out is b))  # fmt: skip
            y = self._pw_cached(key, (a, b), out, _NO_SCALAR)
            if y is not None:
                return y
        else:  # a tensor and a Python scalar (`x * 0.5`, scale): the value is in the key
            key, y = self._pw_scalar_planned((family, code, types, result, exact), (a, b), out)
            if y is not None:
                return y
        tensors, dtype = self._pw_operands((a, b), ("a", "b"))
        suffix = SUFFIXES.get(dtype, "")
        if suffix not in types:
            dtype_suffix(dtype, types, "a" if tensors[0] is not None else "b")  # raises
        tail = _NO_SCALAR  # (this object: a plan's prepared launch is then found by identity)
        if tensors[0] is None or tensors[1] is None:
            scalar = 1 if tensors[0] is None else 2
            fs, ls = scalar_args((a, b)[scalar - 1], dtype, "ab"[scalar - 1], exact=exact)
            tail = (scalar, fs, ls)
        y = self._pw_output(out, tensors, dtype if result is None else result)
        return self._pw_launch(source, family, suffix, (code,), tensors, y, tail, key)

    def _pw_unary(
        self,
        source: str,
        code: int,
        x: DeviceTensor,
        out: DeviceTensor | None,
        types: frozenset[str],
        params: tuple[float, float, int, int] = (0.0, 0.0, 0, 0),
    ) -> DeviceTensor:
        """y = f(x) of unary.hip or math.hip (family = the source's name), params (p0, p1,
        q0, q1) as the kernels read them. A repeated call of the same layouts is served by a
        plan (`_pw_cached`)."""
        key = None
        if type(x) is DeviceTensor and (out is None or type(out) is DeviceTensor):
            key = (source, code, types, x._layout or layout_id(x),
                   None if out is None else (out._layout or layout_id(out), out is x))  # fmt: skip
            y = self._pw_cached(key, (x,), out, params)
            if y is not None:
                return y
        x = self._operand(x, "x")
        suffix = dtype_suffix(x.dtype, types, "x")
        y = self._output(out, x.shape, x.dtype, inputs=(x,), strided=True)
        family = source[: -len(".hip")]
        return self._pw_launch(source, family, suffix, (code,), (x,), y, params, key)

    def _pw_cast(self, x: DeviceTensor, dtype: DTypeLike, out: DeviceTensor | None) -> DeviceTensor:
        """ElementwiseOps.cast: x converted to `dtype` by cast.hip (out must not overlap x;
        the same dtype is a copy). A repeated call of the same layouts and `dtype` argument
        is served by a plan (`_pw_cached`)."""
        key = None
        if (
            type(x) is DeviceTensor
            and (out is None or type(out) is DeviceTensor)
            and isinstance(dtype, (type, str, np.dtype))  # (what can be a key's part)
        ):
            key = ("cast", dtype, x._layout or layout_id(x),
                   None if out is None else (out._layout or layout_id(out), out is x))  # fmt: skip
            y = self._pw_cached(key, (x,), out, ())
            if y is not None:
                return y
        x = self._operand(x, "x")
        source = dtype_suffix(x.dtype, ALL, "x")
        target = as_dtype(dtype)
        dtypes.suffix(target, "the cast's target")
        y = self._pw_output(out, (x,), target, distinct=True)
        if target == x.dtype:
            y.copy_(x)
            return y
        return self._pw_launch("cast.hip", "cast", source, (CAST_TARGETS[target],), (x,), y, (),
                               key)  # fmt: skip

    # --- the launch ----------------------------------------------------------------------

    def _pw_launch(
        self,
        source: str,
        family: str,
        suffix: str,
        head: tuple[Any, ...],
        tensors: Sequence[DeviceTensor | None],
        y: DeviceTensor,
        tail: tuple[Any, ...],
        key: tuple[Any, ...] | None = None,
    ) -> DeviceTensor:
        """One launch of `family` over `tensors` (None: a scalar input, whose value is in
        `tail`) into y: arguments `*head, *pointers, *path arguments, *tail`. With `key` (the
        call's layouts: see `_pw_cached`), what was worked out here is kept as its plan."""
        if y.size == 0:
            return y
        rows, grid, path = self._pw_path(tensors, y)
        kernel = self._pw_kernel(source, family, suffix, rows)
        grid = min(grid, self._grid_cap)
        pointers = [y if t is None else t for t in tensors]
        if key is not None:
            self._pw_keep(key, kernel, grid, head, path, pointers, y, tail)
        kernel.launch(grid, _BLOCK, *head, *pointers, y, *path, *tail, stream=self.stream)
        return y

    def _pw_path(
        self, tensors: Sequence[DeviceTensor | None], y: DeviceTensor
    ) -> tuple[bool, int, tuple[Any, ...]]:
        """The kernel (rows or strided), grid and path arguments of a launch into y (of at
        least one element): what depends only on the layouts, dtypes and alignments."""
        shape = y.shape
        n = y.size
        widest, dense, cols = y.dtype.itemsize, y._strides is None, 0
        for t in tensors:
            if t is not None:
                widest = max(widest, t.dtype.itemsize)
                if t._strides is not None:
                    dense = False
                elif t.shape != shape:  # a trailing block of the output's shape, repeated?
                    block = t.size
                    dense = dense and t.ndim < len(shape) and t.shape == shape[-t.ndim :]
                    dense = dense and cols in (0, block) and block > 0
                    cols = block
        lanes = 16 // widest
        if dense and cols and n % lanes == 0 and cols % lanes == 0 and _aligned(lanes, tensors, y):
            # [rows, cols] op [cols] with contiguous operands: the benchmarks' broadcast row
            steps = (0 if t is None or t.shape != shape else cols for t in tensors)
            runs = (0 if t is None else 1 for t in tensors)
            path: tuple[Any, ...] = (n // cols, cols, *steps, cols, *runs)
            grid = -(-n // (_BLOCK * lanes))
            return True, grid, path
        if dense and not cols:  # the common case: one contiguous run each (scalars: stride 0)
            inner = tuple(0 if t is None else 1 for t in tensors)
            if n % lanes == 0 and _aligned(lanes, tensors, y):
                path = (1, n, *(0 for _ in tensors), 0, *inner)
                grid = -(-n // (_BLOCK * lanes))
                return True, grid, path
            dims: tuple[int, ...] = (n,)
            in_strides: list[tuple[int, ...]] = [(s,) for s in inner]
            out_strides: tuple[int, ...] = (1,)
        else:
            strided = [
                (0,) * len(shape) if t is None else layout.broadcast_to(t.shape, t.strides, shape)
                for t in tensors
            ]
            dims, merged = layout.collapse(shape, y.strides, *strided)
            out_strides, in_strides = merged[0], merged[1:]
            if len(dims) <= 2 and dims[-1] % lanes == 0 and out_strides[-1] == 1:
                inner = tuple(s[-1] for s in in_strides)
                row = [0 if len(dims) == 1 else s[0] for s in (*in_strides, out_strides)]
                if (
                    all(i in (0, 1) for i in inner)
                    and all(r % lanes == 0 for r, i in zip(row, (*inner, 1), strict=True) if i)
                    and _aligned(lanes, tensors, y, inner)
                ):
                    path = ((1, *dims) if len(dims) == 1 else dims) + (*row, *inner)
                    grid = -(-n // (_BLOCK * lanes))
                    return True, grid, path
            if len(dims) > _RANK:
                raise ValueError(
                    f"{_op()}: the operands' layouts merge into {len(dims)} axes; the kernels "
                    f"take up to {_RANK} (pass .contiguous() copies)"
                )
        pad = _PAD[len(dims) :]
        path = (n, len(dims), *dims, *pad)
        for s in (*in_strides, out_strides):
            path += (*s, *pad)
        grid = -(-n // _BLOCK)
        return False, grid, path

    # --- plans ---------------------------------------------------------------------------

    def _pw_keep(
        self,
        key: tuple[Any, ...],
        kernel: Kernel,
        grid: int,
        head: tuple[Any, ...],
        path: tuple[Any, ...],
        inputs: Sequence[DeviceTensor],
        y: DeviceTensor,
        tail: tuple[Any, ...],
    ) -> None:
        """Keep what a validated call of `key` worked out, for `_pw_cached` (`tail`: the
        scalar arguments, for keys that hold the scalars' values)."""
        prepared = kernel.prepare(grid, _BLOCK, *head, *inputs, y, *path, *tail, stream=self.stream)
        plan = (
            *plan_head(inputs, y),
            kernel,
            grid,
            head,
            path,
            y.ptr & 15,
            tail,
            prepared.__call__,
        )  # (bound once: calling the object costs a method lookup)
        self._keep_plan(key, plan)

    def _pw_scalar_planned(
        self, op: tuple[Any, ...], operands: tuple[Any, ...], out: DeviceTensor | None
    ) -> tuple[tuple[Any, ...] | None, DeviceTensor | None]:
        """(key, y) of a call with Python scalars among its tensors (`op`: what the op adds
        to the key): y when its plan served it, else None (the checked path then keeps the
        plan under key). The key holds each tensor's layout and each scalar's type and value;
        None (no plan) when an operand is neither a DeviceTensor nor a plain float/int/bool,
        or is a float zero (0.0 and -0.0 are one key but not one value), or all are scalars."""
        key: list[Any] = ["scalar", op]
        slots: list[DeviceTensor | None] = []  # (as `_pw_cached` takes them: None, a scalar)
        tensor = False  # (a flag: `slots.count(None)` would call each tensor's elementwise ==)
        for v in operands:
            kind = type(v)
            if kind is DeviceTensor:
                key.append(v._layout or layout_id(v))
                slots.append(v)
                tensor = True
            elif (kind is float and v) or kind is int or kind is bool:
                key.append((kind, v))
                slots.append(None)
            else:
                return None, None
        if not tensor or (out is not None and type(out) is not DeviceTensor):
            return None, None
        if out is not None:
            bits, bit = 0, 1  # (which operands out is)
            for v in operands:
                if out is v:
                    bits |= bit
                bit <<= 1
            key.append((out._layout or layout_id(out), bits))
        found = tuple(key)
        return found, self._pw_cached(found, tuple(slots), out, None)

    def _pw_cached(
        self,
        key: tuple[Any, ...],
        inputs: tuple[DeviceTensor | None, ...],
        out: DeviceTensor | None,
        tail: tuple[Any, ...] | None,
    ) -> DeviceTensor | None:
        """The launch of a call whose layouts (`key`: op, dtypes, shapes, strides, addresses
        mod 16, and out's, with which input it is) a validated call had, or None (no plan,
        or a check to make: `OpsBase._planned_output`). A None input is a scalar (y's
        address is passed for it, as `_pw_launch` does); tail None: the plan's own (keys
        that hold the scalars' values)."""
        plans = self._plans  # (`_planned`, inline: the hottest path of the pointwise ops)
        if plans is None or self._releaser is None:
            return None
        plan = plans.get(key)
        if plan is None:
            return None
        y = self._planned_output(plan, inputs, out)
        if y is None:
            return None
        at = y.ptr
        if out is None and at & 15 != plan[8]:
            return None  # (never for a pool's blocks) y goes back; the path is redone
        kept, prepared = plan[9], plan[10]
        if tail is None or tail is kept or _same_values(tail, kept):
            # The prepared launch: only the addresses are written (a scalar's is y's)
            if len(inputs) == 2:
                a, b = inputs
                if prepared(at if a is None else a.ptr, at if b is None else b.ptr, at):
                    return y
            elif len(inputs) == 1:
                if prepared(inputs[0].ptr, at):  # type: ignore[union-attr]
                    return y
            elif prepared(*[at if t is None else t.ptr for t in inputs], at):
                return y
        kernel, grid, head, path = plan[4:8]
        pointers = launch_pointers((*inputs, y))
        if tail is None:
            tail = kept
            pointers = [pointers[-1] if p is None else p for p in pointers]
        kernel.launch(grid, _BLOCK, *head, *pointers, *path, *tail, stream=self.stream)
        return y


_NO_SCALAR = (0, 0.0, 0)  # binary.hip's scalar arguments of two tensors


def _same_values(tail: tuple[Any, ...], kept: tuple[Any, ...]) -> bool:
    """Whether a call's scalar arguments are the prepared ones: equal and of the same types
    (1 and 1.0 are equal but not packed alike)."""
    return tail == kept and all(type(a) is type(b) for a, b in zip(tail, kept, strict=True))


def _aligned(
    lanes: int,
    tensors: Sequence[DeviceTensor | None],
    y: DeviceTensor,
    inner: Sequence[int] | None = None,
) -> bool:
    """Whether y and every input that runs along the rows (`inner`: all by default) start at
    an address of a whole vector of `lanes` of their elements."""
    if y.ptr % (lanes * y.dtype.itemsize):
        return False
    for k, t in enumerate(tensors):
        if t is not None and (inner is None or inner[k]) and t.ptr % (lanes * t.dtype.itemsize):
            return False
    return True


# --- scalars -----------------------------------------------------------------------------


def _is_scalar(value: Any) -> bool:
    return isinstance(value, (numbers.Number, np.bool_)) and not isinstance(value, DeviceTensor)


def scalar_args(
    value: Any, dtype: np.dtype[Any], name: str, *, exact: bool = True
) -> tuple[float, int]:
    """A Python scalar as the (double, long long) pair the kernels read: floats the double,
    integers the long long. The value takes `dtype` (rounded to it when `exact`; else only
    to the kernel's compute type there): a float for an integer tensor, a number out of an
    integer type's range, or a non-bool for a bool tensor is a ValueError naming `name`."""
    kind = SUFFIXES[dtype]
    if kind == "b8":
        if not isinstance(value, (bool, np.bool_)):
            raise ValueError(f"{_op()}: {name} must be a bool for a bool tensor, not {value!r}")
        return float(value), int(value)
    if kind[0] in "iu":
        if not isinstance(value, (numbers.Integral, np.bool_)):
            raise ValueError(
                f"{_op()}: {name} = {value!r} cannot take the tensor's dtype {dtype}; pass an "
                "int, or cast the tensor to a float type"
            )
        info = np.iinfo(dtype)
        if not info.min <= int(value) <= info.max:
            raise ValueError(f"{_op()}: {name} = {value} is out of the range of {dtype}")
        return 0.0, int(value)
    if not isinstance(value, (numbers.Real, np.bool_)):
        raise ValueError(f"{_op()}: {name} must be a real number, not {value!r}")
    number = float(value)
    if exact and dtype.itemsize < 8 and math.isfinite(number):
        with np.errstate(over="ignore"):
            number = float(np.asarray(number, dtype))
    return number, 0


FLOATS = frozenset({"f32", "f64", "f16", "bf16"})
INTEGERS = frozenset({"i8", "i16", "i32", "i64", "u8", "u32"})
NUMBERS = FLOATS | INTEGERS
ALL = NUMBERS | {"b8"}


def dtype_suffix(dtype: np.dtype[Any], types: frozenset[str], name: str) -> str:
    """dtype's kernel suffix if the op takes it; ValueError naming the op and `name`."""
    found = SUFFIXES.get(dtype)
    if found not in types:
        taken = ", ".join(str(t) for t, s in SUFFIXES.items() if s in types)
        raise ValueError(f"{_op()}: {name} has dtype {dtype}; this op takes {taken}")
    return found


def _op() -> str:
    """The public op being validated (for messages; only ever run on error paths)."""
    from hip_runtime.ops.base import _calling_op

    return _calling_op()


__all__ = [
    "ALL",
    "FLOATS",
    "INTEGERS",
    "NUMBERS",
    "Operand",
    "PointwiseCore",
    "scalar_args",
]

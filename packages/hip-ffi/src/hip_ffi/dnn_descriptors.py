"""MIOpen's descriptor entry points over Python objects, for the platforms without MIOpen.

The nvidia and cpu platforms keep a tensor, convolution or pooling descriptor as a plain
Python object behind an opaque handle (hip_ffi.handles: never NULL, never a
valid address). The calls that make, set, read and destroy them are the same on both, so they
are written once here; each platform reads the objects when it runs an operation. The nvidia
platform builds its cuDNN descriptors from them on first use and keeps them in `native`, which
`Descriptors(drop)` releases when the descriptor is set again or destroyed.

Statuses are MIOpen's: miopenStatusBadParm for an unknown handle, a NULL output or a value out
of range (as MIOpen answers), miopenStatusSuccess otherwise.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from hip_ffi import dnn_constants as dc
from hip_ffi._ffi import ffi
from hip_ffi.handles import Registry, is_null, takes_handle

#: The most dimensions a tensor descriptor takes (MIOpen's and cuDNN's limit).
MAX_DIMS = 8


@dataclass
class TensorDesc:
    """A tensor descriptor: element type, dimensions and strides (in elements; packed
    row-major when set without strides). Unset: data_type -1, no dims."""

    data_type: int = -1
    dims: tuple[int, ...] = ()
    strides: tuple[int, ...] = ()
    native: dict[Any, Any] = field(default_factory=dict)
    generation: int = 0  # counts the times it was set: what platforms' caches check


@dataclass
class ConvDesc:
    """A convolution descriptor: per spatial axis padding, stride and dilation, the mode
    (miopenConvolution / miopenTranspose) and the group count."""

    pads: tuple[int, ...] = ()
    strides: tuple[int, ...] = ()
    dilations: tuple[int, ...] = ()
    mode: int = dc.MIOPEN_CONVOLUTION
    groups: int = 1
    native: dict[Any, Any] = field(default_factory=dict)
    generation: int = 0  # counts the times it was set: what platforms' caches check


@dataclass
class PoolDesc:
    """A pooling descriptor: mode, per spatial axis window, padding and stride."""

    mode: int = dc.MIOPEN_POOLING_MAX
    window: tuple[int, ...] = ()
    pads: tuple[int, ...] = ()
    strides: tuple[int, ...] = ()
    index_type: int = dc.MIOPEN_INDEX_UINT8
    index_mode: int = dc.MIOPEN_POOLING_WORKSPACE_INDEX_MASK
    native: dict[Any, Any] = field(default_factory=dict)
    generation: int = 0  # counts the times it was set: what platforms' caches check


def packed_strides(dims: tuple[int, ...]) -> tuple[int, ...]:
    """Row-major strides (elements) of `dims`."""
    strides, step = [], 1
    for dim in reversed(dims):
        strides.append(step)
        step *= dim
    return tuple(reversed(strides))


def _ints(array: Any, count: int) -> tuple[int, ...]:
    return tuple(int(array[i]) for i in range(count))


def _put(out: Any, values: tuple[int, ...]) -> None:
    if not is_null(out):
        for index, value in enumerate(values):
            out[index] = value


_ERROR_TEXT = {
    code: ffi.new("char[]", name.encode()) for code, name in dc.MIOPEN_STATUS_NAMES.items()
}
_UNKNOWN_TEXT = ffi.new("char[]", dc.MIOPEN_UNKNOWN_STATUS_TEXT.encode())


def miopenGetErrorString(error: int) -> Any:
    """MIOpen's text for a status: its name (what libMIOpen answers), static storage."""
    return _ERROR_TEXT.get(error, _UNKNOWN_TEXT)


class Descriptors:
    """The descriptor registries of one platform and the surface functions over them.

    `drop(native)` releases what a platform made from a descriptor (its `native` dict) when
    the descriptor is set again or destroyed; None when the platform makes nothing.
    """

    def __init__(self, drop: Callable[[dict[Any, Any]], None] | None = None) -> None:
        self.tensors: Registry[TensorDesc] = Registry("miopenTensorDescriptor_t")
        self.convolutions: Registry[ConvDesc] = Registry("miopenConvolutionDescriptor_t")
        self.poolings: Registry[PoolDesc] = Registry("miopenPoolingDescriptor_t")
        self._drop = drop

    def _reset(self, desc: TensorDesc | ConvDesc | PoolDesc) -> None:
        """Before a descriptor changes (or goes): release what was made from it."""
        if desc.native and self._drop is not None:
            self._drop(desc.native)
        desc.native.clear()
        desc.generation += 1

    def functions(self) -> dict[str, Callable[..., Any]]:
        """The descriptor entry points of the surface (and miopenGetErrorString)."""
        tensors, convolutions, poolings = self.tensors, self.convolutions, self.poolings
        reset = self._reset
        bad = dc.BAD_PARM

        def creator(registry: Registry[Any], make: Callable[[], Any]) -> Callable[[Any], int]:
            def create(out: Any) -> int:
                if is_null(out):
                    return bad
                out[0] = registry.cdata(registry.add(make()))
                return dc.SUCCESS

            return create

        def destroyer(registry: Registry[Any]) -> Callable[[Any], int]:
            def destroy(handle: Any) -> int:
                found = registry.remove(handle)
                if found is None:
                    return bad
                reset(found)
                return dc.SUCCESS

            return destroy

        @takes_handle(tensors.get, bad)
        def miopenSetTensorDescriptor(
            desc: TensorDesc, data_type: int, nb_dims: int, dims: Any, strides: Any
        ) -> int:
            if data_type not in dc.MIOPEN_TYPE_SIZES or not 1 <= nb_dims <= MAX_DIMS:
                return bad
            if is_null(dims):
                return bad
            shape = _ints(dims, nb_dims)
            steps = packed_strides(shape) if is_null(strides) else _ints(strides, nb_dims)
            if min(shape) < 1 or min(steps) < 1:
                return bad
            reset(desc)
            desc.data_type, desc.dims, desc.strides = data_type, shape, steps
            return dc.SUCCESS

        @takes_handle(tensors.get, bad)
        def miopenGetTensorDescriptorSize(desc: TensorDesc, size: Any) -> int:
            if is_null(size):
                return bad
            size[0] = len(desc.dims)
            return dc.SUCCESS

        @takes_handle(tensors.get, bad)
        def miopenGetTensorDescriptor(
            desc: TensorDesc, data_type: Any, dims: Any, strides: Any
        ) -> int:
            if not is_null(data_type):
                data_type[0] = desc.data_type
            _put(dims, desc.dims)
            _put(strides, desc.strides)
            return dc.SUCCESS

        @takes_handle(convolutions.get, bad)
        def miopenInitConvolutionNdDescriptor(
            desc: ConvDesc, spatial: int, pads: Any, strides: Any, dilations: Any, mode: int
        ) -> int:
            if not 1 <= spatial <= MAX_DIMS - 2 or mode not in (0, 1):
                return bad
            if is_null(pads) or is_null(strides) or is_null(dilations):
                return bad
            p, s, d = _ints(pads, spatial), _ints(strides, spatial), _ints(dilations, spatial)
            if min(p) < 0 or min(s) < 1 or min(d) < 1:
                return bad
            reset(desc)
            desc.pads, desc.strides, desc.dilations, desc.mode, desc.groups = p, s, d, mode, 1
            return dc.SUCCESS

        @takes_handle(convolutions.get, bad)
        def miopenGetConvolutionNdDescriptor(
            desc: ConvDesc, requested: int, spatial: Any, pads: Any, strides: Any,
            dilations: Any, mode: Any,
        ) -> int:  # fmt: skip
            count = max(0, min(requested, len(desc.pads)))
            if not is_null(spatial):
                spatial[0] = len(desc.pads)
            _put(pads, desc.pads[:count])
            _put(strides, desc.strides[:count])
            _put(dilations, desc.dilations[:count])
            if not is_null(mode):
                mode[0] = desc.mode
            return dc.SUCCESS

        @takes_handle(convolutions.get, bad)
        def miopenSetConvolutionGroupCount(desc: ConvDesc, groups: int) -> int:
            if groups < 1:
                return bad
            reset(desc)
            desc.groups = groups
            return dc.SUCCESS

        @takes_handle(convolutions.get, bad)
        def miopenGetConvolutionGroupCount(desc: ConvDesc, groups: Any) -> int:
            if is_null(groups):
                return bad
            groups[0] = desc.groups
            return dc.SUCCESS

        @takes_handle(poolings.get, bad)
        def miopenSetNdPoolingDescriptor(
            desc: PoolDesc, mode: int, nb_dims: int, window: Any, pads: Any, strides: Any
        ) -> int:
            if mode not in (0, 1, 2) or not 1 <= nb_dims <= MAX_DIMS - 2:
                return bad
            if is_null(window) or is_null(pads) or is_null(strides):
                return bad
            k, p, s = _ints(window, nb_dims), _ints(pads, nb_dims), _ints(strides, nb_dims)
            if min(k) < 1 or min(p) < 0 or min(s) < 1:
                return bad
            reset(desc)
            desc.mode, desc.window, desc.pads, desc.strides = mode, k, p, s
            return dc.SUCCESS

        @takes_handle(poolings.get, bad)
        def miopenGetNdPoolingDescriptor(
            desc: PoolDesc, requested: int, mode: Any, nb_dims: Any, window: Any, pads: Any,
            strides: Any,
        ) -> int:  # fmt: skip
            count = max(0, min(requested, len(desc.window)))
            if not is_null(mode):
                mode[0] = desc.mode
            if not is_null(nb_dims):
                nb_dims[0] = len(desc.window)
            _put(window, desc.window[:count])
            _put(pads, desc.pads[:count])
            _put(strides, desc.strides[:count])
            return dc.SUCCESS

        @takes_handle(poolings.get, bad)
        def miopenSetPoolingIndexType(desc: PoolDesc, index_type: int) -> int:
            if index_type not in (0, 1, 2, 3):
                return bad
            desc.index_type = index_type
            return dc.SUCCESS

        @takes_handle(poolings.get, bad)
        def miopenSetPoolingWorkSpaceIndexMode(desc: PoolDesc, index_mode: int) -> int:
            if index_mode not in (0, 1):
                return bad
            desc.index_mode = index_mode
            return dc.SUCCESS

        return {
            "miopenGetErrorString": miopenGetErrorString,
            "miopenCreateTensorDescriptor": creator(tensors, TensorDesc),
            "miopenSetTensorDescriptor": miopenSetTensorDescriptor,
            "miopenGetTensorDescriptorSize": miopenGetTensorDescriptorSize,
            "miopenGetTensorDescriptor": miopenGetTensorDescriptor,
            "miopenDestroyTensorDescriptor": destroyer(tensors),
            "miopenCreateConvolutionDescriptor": creator(convolutions, ConvDesc),
            "miopenInitConvolutionNdDescriptor": miopenInitConvolutionNdDescriptor,
            "miopenGetConvolutionNdDescriptor": miopenGetConvolutionNdDescriptor,
            "miopenSetConvolutionGroupCount": miopenSetConvolutionGroupCount,
            "miopenGetConvolutionGroupCount": miopenGetConvolutionGroupCount,
            "miopenDestroyConvolutionDescriptor": destroyer(convolutions),
            "miopenCreatePoolingDescriptor": creator(poolings, PoolDesc),
            "miopenSetNdPoolingDescriptor": miopenSetNdPoolingDescriptor,
            "miopenGetNdPoolingDescriptor": miopenGetNdPoolingDescriptor,
            "miopenSetPoolingIndexType": miopenSetPoolingIndexType,
            "miopenSetPoolingWorkSpaceIndexMode": miopenSetPoolingWorkSpaceIndexMode,
            "miopenDestroyPoolingDescriptor": destroyer(poolings),
        }


@dataclass(frozen=True)
class ConvProblem:
    """A 2-D convolution's shapes, checked against its descriptors (platform-neutral).

    x [N, C, H, W], w [K, C / groups, R, S], y [N, K, P, Q] as logical dims (whatever the
    strides), with P = (H + 2 pad - dil (R - 1) - 1) // stride + 1 (and Q likewise)."""

    x: TensorDesc
    w: TensorDesc
    y: TensorDesc
    conv: ConvDesc


def conv_problem(x: TensorDesc, w: TensorDesc, conv: ConvDesc, y: TensorDesc) -> ConvProblem | None:
    """The forward convolution y = conv(x, w), or None when the descriptors do not make one
    (unset, not 4-D, types differ, channels not divisible by groups, y's size wrong)."""
    if not (len(x.dims) == len(w.dims) == len(y.dims) == 4 and len(conv.pads) == 2):
        return None
    if not x.data_type == w.data_type == y.data_type:
        return None
    n, c, h, wd = x.dims
    k, cg, r, s = w.dims
    g = conv.groups
    if c != cg * g or k % g or y.dims[:2] != (n, k):
        return None
    for size, window, pad, stride, dil, out in zip(
        (h, wd), (r, s), conv.pads, conv.strides, conv.dilations, y.dims[2:], strict=True
    ):
        if (size + 2 * pad - dil * (window - 1) - 1) // stride + 1 != out or out < 1:
            return None
    return ConvProblem(x, w, y, conv)

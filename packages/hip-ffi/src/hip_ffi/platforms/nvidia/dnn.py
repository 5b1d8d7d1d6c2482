"""MIOpen's surface over cuDNN 9: handles, descriptors, convolution, pooling.

Why MIOpen's names: the surface is HIP's own DNN library, as hipBLAS's is for BLAS (bound over
cuBLAS in blas.py): code above hip-ffi is written once against MIOpen's calls and enums.

What differs, and how it is bridged:
- Descriptors are Python objects (hip_ffi.dnn_descriptors); their cuDNN descriptors are made
  on first use and kept until the descriptor is set again or destroyed. MIOpen's weights are a
  tensor descriptor; cuDNN's a filter with a format (NCHW- or NHWC-packed, else
  miopenStatusNotImplemented). cuDNN's convolution descriptor carries a compute type (f32; f64
  for f64) and a math type (tensor cores for 16-bit inputs, FMA only for f32: no TF32, as
  MIOpen computes f32 in f32): one per math type.
- Find: exhaustiveSearch=false answers cuDNN's heuristics (cudnnGet...Algorithm_v7, nothing
  runs); true times the algorithms (cudnnFind...AlgorithmEx) within the given workspace.
  cuDNN's algorithms are reported as the MIOpen algorithm of their family, and the convolution
  descriptor remembers which algorithm and math type each family stood for on those shapes.
- Forward / BackwardData of 16-bit 4-D problems of one group whose algorithm came from the
  heuristics, unscaled (alpha 1, beta 0), run as backend-API plans (dnn_graph.py: the legacy
  call costs 90-150 us of host time each; HIP_FFI_CUDNN_GRAPH=0 turns this off); the rest run
  the legacy call with exactly the algorithm found.
- GetWorkSpaceSize (MIOpen: enough for any algorithm): the largest workspace among the first
  WORKSPACE_CANDIDATES heuristic choices and the graph plan's; Find reports at least the plan's.
- Pooling keeps no index workspace on cuDNN (its backward recomputes): size 0, do_backward
  ignored. Statuses: cuDNN's through dnn_tables.miopen_status.
All work is queued on the handle's stream (miopenSetStream -> cudnnSetStream); Find with
exhaustiveSearch waits for it, as MIOpen's does.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from typing import Any

from hip_ffi import dnn_constants as dc
from hip_ffi import surface
from hip_ffi._ffi import ffi
from hip_ffi.api import Unavailable
from hip_ffi.dnn_descriptors import ConvDesc, Descriptors, TensorDesc, conv_problem
from hip_ffi.handles import is_null
from hip_ffi.platforms.nvidia import dnn_tables as t
from hip_ffi.platforms.nvidia.dnn_graph import UNLIMITED, GraphFailed, Graphs, unscaled
from hip_ffi.platforms.nvidia.dnn_tables import BACKWARD_DATA, FORWARD, Direction

#: Heuristic choices whose workspace GetWorkSpaceSize covers.
WORKSPACE_CANDIDATES = 4
#: Prepared convolution calls kept (one per case a caller keeps descriptors for).
PREPARED = 4096


class _Failed(Exception):
    """Ends a surface call with a miopenStatus_t."""

    def __init__(self, status: int) -> None:
        self.status = status


class _Owned:
    """A cuDNN descriptor made from a surface descriptor, destroyed with it."""

    __slots__ = ("cdata", "destroy")

    def __init__(self, cdata: Any, destroy: Callable[[Any], int]) -> None:
        self.cdata, self.destroy = cdata, destroy


def _drop(native: dict[Any, Any]) -> None:
    for value in native.values():
        if isinstance(value, _Owned):
            value.destroy(value.cdata)


def _checked(status: int) -> None:
    if status:
        raise _Failed(t.miopen_status(status))


def _surface(function: Callable[..., int]) -> Callable[..., int]:
    """A surface call written with _Failed for its failures."""

    def call(*args: Any) -> int:
        try:
            return function(*args)
        except _Failed as failed:
            return failed.status

    call.__name__ = call.__qualname__ = function.__name__
    return call


def _int_array(values: tuple[int, ...]) -> Any:
    return ffi.new("int[]", list(values))


def _filter_format(desc: TensorDesc) -> int:
    _, c, r, s = desc.dims
    if desc.strides == (c * r * s, r * s, s, 1):
        return t.CUDNN_TENSOR_NCHW
    if desc.strides == (r * s * c, 1, s * c, c):
        return t.CUDNN_TENSOR_NHWC
    raise _Failed(dc.NOT_IMPLEMENTED)


def _key(*descs: TensorDesc) -> tuple[Any, ...]:
    return tuple((d.data_type, d.dims, d.strides) for d in descs)


def bind_checked(cudnn: Any, path: str) -> dict[str, Callable[..., Any]]:
    """The MIOPEN surface over an opened libcudnn, or Unavailable stand-ins saying why when
    it is older than cuDNN 9 (whose statuses and libraries these tables follow)."""
    version = int(cudnn.cudnnGetVersion())
    if version < t.MIN_CUDNN_VERSION:
        reason = f"{path} is cuDNN {version}; the DNN surface needs cuDNN >= 9"
        return {name: Unavailable(name, reason) for name in surface.MIOPEN}
    return bind(cudnn, graph=os.environ.get("HIP_FFI_CUDNN_GRAPH", "1") != "0")


def bind(cudnn: Any, *, graph: bool = False) -> dict[str, Callable[..., Any]]:
    """The MIOPEN surface over an opened libcudnn.so.9. `graph`: run the 16-bit convolutions
    whose algorithm came from the heuristics as backend-API plans (dnn_graph.py); the loader
    turns it on unless HIP_FFI_CUDNN_GRAPH=0."""
    descriptors = Descriptors(_drop)
    graphs = Graphs(cudnn, graph)
    tensors, convolutions, poolings = (
        descriptors.tensors,
        descriptors.convolutions,
        descriptors.poolings,
    )

    def own(native: dict[Any, Any], key: Any, kind: str, setup: Callable[[Any], int]) -> Any:
        found = native.get(key)
        if found is not None:
            return found.cdata
        out = ffi.new(f"cudnn{kind}Descriptor_t*")
        _checked(getattr(cudnn, f"cudnnCreate{kind}Descriptor")(out))
        destroy = getattr(cudnn, f"cudnnDestroy{kind}Descriptor")
        status = setup(out[0])
        if status:
            destroy(out[0])
            raise _Failed(t.miopen_status(status))
        native[key] = _Owned(out[0], destroy)
        return out[0]

    def tensor(handle: Any) -> TensorDesc:
        desc = tensors.get(handle)
        if desc is None or not desc.dims:
            raise _Failed(dc.BAD_PARM)
        return desc

    def cu_tensor(desc: TensorDesc) -> Any:
        dtype = t.DATA_TYPE[desc.data_type]
        dims, strides = desc.dims, desc.strides
        if len(dims) < 3:  # cuDNN takes 3 to 8 dimensions: trailing 1s change nothing
            dims = dims + (1,) * (3 - len(dims))
            strides = strides + (1,) * (3 - len(strides))
        return own(
            desc.native, "tensor", "Tensor",
            lambda d: cudnn.cudnnSetTensorNdDescriptor(
                d, dtype, len(dims), _int_array(dims), _int_array(strides)
            ),
        )  # fmt: skip

    def cu_filter(desc: TensorDesc) -> Any:
        if len(desc.dims) != 4:
            raise _Failed(dc.NOT_IMPLEMENTED)
        layout, dtype = _filter_format(desc), t.DATA_TYPE[desc.data_type]
        return own(
            desc.native, "filter", "Filter",
            lambda d: cudnn.cudnnSetFilterNdDescriptor(d, dtype, layout, 4, _int_array(desc.dims)),
        )  # fmt: skip

    def cu_conv(desc: ConvDesc, data_type: int, math: int | None = None) -> Any:
        """cuDNN's convolution descriptor for inputs of `data_type`, with `math` (the type's
        default: tensor cores for 16-bit, FMA for f32). One per math type, never changed once
        made: setting a descriptor again costs cuDNN a new execution plan at the next call."""
        if desc.mode != dc.MIOPEN_CONVOLUTION:
            raise _Failed(dc.NOT_IMPLEMENTED)  # transposed: use BackwardData
        wide = data_type == dc.MIOPEN_DOUBLE
        compute = t.CUDNN_DATA_DOUBLE if wide else t.CUDNN_DATA_FLOAT
        chosen_math = default_math(data_type) if math is None else math

        def setup(d: Any) -> int:
            status: int = cudnn.cudnnSetConvolutionNdDescriptor(
                d, len(desc.pads), _int_array(desc.pads), _int_array(desc.strides),
                _int_array(desc.dilations), t.CUDNN_CROSS_CORRELATION, compute,
            )  # fmt: skip
            return (
                status
                or cudnn.cudnnSetConvolutionGroupCount(d, desc.groups)
                or cudnn.cudnnSetConvolutionMathType(d, chosen_math)
            )

        return own(desc.native, ("conv", compute, chosen_math), "Convolution", setup)

    def default_math(data_type: int) -> int:
        if data_type in (dc.MIOPEN_HALF, dc.MIOPEN_BFLOAT16):
            return t.CUDNN_TENSOR_OP_MATH
        return t.CUDNN_FMA_MATH if data_type == dc.MIOPEN_FLOAT else t.CUDNN_DEFAULT_MATH

    def problem(x: Any, w: Any, conv: Any, y: Any) -> tuple[Any, Any, Any, Any, ConvDesc]:
        """cuDNN's (x tensor, w filter, conv, y tensor) of a forward convolution, and the
        surface's convolution descriptor; BadParm when the shapes do not make one."""
        xd, wd, yd, cd = tensor(x), tensor(w), tensor(y), convolutions.get(conv)
        if cd is None or conv_problem(xd, wd, cd, yd) is None:
            raise _Failed(dc.BAD_PARM)
        if xd.data_type not in t.DATA_TYPE:
            raise _Failed(dc.NOT_IMPLEMENTED)
        return cu_tensor(xd), cu_filter(wd), cu_conv(cd, xd.data_type), cu_tensor(yd), cd

    def heuristics(
        query: Callable[..., int], count: int, *args: Any, tail: tuple[Any, ...] = ()
    ) -> list[Any]:
        """The successful results of an algorithm query (heuristic or timed), best first;
        `tail`: the arguments after the results (a timed search's workspace)."""
        perf = ffi.new("cudnnConvolutionAlgoPerf_t[]", count)
        returned = ffi.new("int*")
        _checked(query(*args, count, returned, perf, *tail))
        return [perf[i] for i in range(returned[0]) if perf[i].status == 0]

    def report(
        found: list[Any], families: Any, remember: dict[int, tuple[int, int]], request: int,
        returned: Any, results: Any, field: str,
    ) -> None:  # fmt: skip
        """Write cuDNN's results as MIOpen's (best first), one per family."""
        written = 0
        for perf in found:
            family = families[perf.algo]
            if family in remember:
                continue
            remember[family] = (perf.algo, perf.mathType)
            if written < request:
                setattr(results[written], field, family)
                results[written].time = perf.time
                results[written].memory = perf.memory
                written += 1
        if not written:
            raise _Failed(dc.NOT_IMPLEMENTED)
        returned[0] = written

    def chosen(
        cd: ConvDesc, key: tuple[Any, ...], algo: int, defaults: Any, data_type: int
    ) -> tuple[int, int]:
        remembered = cd.native.get(key, {}).get(algo)
        if remembered is not None:
            return remembered  # type: ignore[no-any-return]
        if algo not in defaults:
            raise _Failed(dc.BAD_PARM)
        return defaults[algo], default_math(data_type)

    def handle_of(handle: Any) -> Any:
        if is_null(handle):
            raise _Failed(dc.BAD_PARM)
        return ffi.cast("cudnnHandle_t", handle)

    @_surface
    def miopenCreate(out: Any) -> int:
        if is_null(out):
            return dc.BAD_PARM
        made = ffi.new("cudnnHandle_t*")
        _checked(cudnn.cudnnCreate(made))
        out[0] = ffi.cast("miopenHandle_t", made[0])
        return dc.SUCCESS

    @_surface
    def miopenDestroy(handle: Any) -> int:
        graphs.close(handle_of(handle))
        _checked(cudnn.cudnnDestroy(handle_of(handle)))
        return dc.SUCCESS

    @_surface
    def miopenSetStream(handle: Any, stream: Any) -> int:
        _checked(cudnn.cudnnSetStream(handle_of(handle), stream))
        return dc.SUCCESS

    @_surface
    def miopenGetStream(handle: Any, stream: Any) -> int:
        if is_null(stream):
            return dc.BAD_PARM
        _checked(cudnn.cudnnGetStream(handle_of(handle), stream))
        return dc.SUCCESS

    def sides(d: Direction, x: Any, w: Any, conv: Any, y: Any) -> tuple[Any, ...]:
        """(source, filter, conv, destination) cuDNN descriptors of direction `d` over the
        forward convolution x -> y (backward data reads y and writes x), and the surface's
        convolution descriptor."""
        xt, wf, cc, yt, cd = problem(x, w, conv, y)
        return (xt, wf, cc, yt, cd) if d.forward else (yt, wf, cc, xt, cd)

    def workspace_size(d: Direction, handle: Any, x: Any, w: Any, conv: Any, y: Any,
                       size: Any) -> int:  # fmt: skip
        if is_null(size):
            return dc.BAD_PARM
        src, wf, cc, dst, cd = sides(d, x, w, conv, y)
        query = getattr(cudnn, d.heuristic)
        h = handle_of(handle)
        found = heuristics(query, d.count, h, *d.order((src,), (wf,)), cc, dst)
        size[0] = max((p.memory for p in found[:WORKSPACE_CANDIDATES]), default=0)
        graph = graphs.get(h, d.key, (tensor(x), tensor(w), tensor(y)), cd)
        if graph is not None:  # (the plan for 16-byte aligned addresses, the usual ones)
            size[0] = max(size[0], graph.workspace((16, 16, 16), UNLIMITED) or 0)
        return dc.SUCCESS

    def find(
        d: Direction, handle: Any, x: Any, x_data: Any, w: Any, w_data: Any, conv: Any,
        y: Any, y_data: Any, request: int, returned: Any, results: Any, workspace: Any,
        workspace_size: int, exhaustive: bool,
    ) -> int:  # fmt: skip
        if request < 1 or is_null(returned) or is_null(results):
            return dc.BAD_PARM
        src, wf, cc, dst, cd = sides(d, x, w, conv, y)
        src_data, dst_data = (x_data, y_data) if d.forward else (y_data, x_data)
        h = handle_of(handle)
        if exhaustive:
            found = heuristics(
                getattr(cudnn, d.timed), d.count, h, *d.order((src, src_data), (wf, w_data)),
                cc, dst, dst_data, tail=(workspace, workspace_size),
            )  # fmt: skip
        else:
            query = getattr(cudnn, d.heuristic)
            found = heuristics(query, d.count, h, *d.order((src,), (wf,)), cc, dst)
        found = [p for p in found if p.memory <= workspace_size]
        remember: dict[int, tuple[int, int]] = {}
        report(found, d.families, remember, request, returned, results, d.field)
        tensors = (tensor(x), tensor(w), tensor(y))
        cd.native[(d.key, _key(*tensors))] = remember
        cd.native[("timed", d.key, _key(*tensors))] = exhaustive  # (timed: the legacy calls)
        graph = None if exhaustive else graphs.get(h, d.key, tensors, cd)
        need = graph.needs((x_data, w_data, y_data), workspace_size) if graph else 0
        for i in range(returned[0]):  # (at least what the graph's plan takes)
            results[i].memory = max(results[i].memory, need)
        prepared.clear()  # what each family stands for may have changed
        return dc.SUCCESS

    #: (direction, handle, x, w, conv, y, algo) -> the descriptors' objects, their generations
    #: then, and cuDNN's arguments: a repeated call (cdata compare by address) makes no lookups
    #: or shape checks, only a generation check (host time is most of a small convolution's).
    prepared: dict[tuple[Any, ...], tuple[Any, ...]] = {}

    def prepare(
        d: Direction, handle: Any, x: Any, w: Any, conv: Any, y: Any, algo: int
    ) -> tuple[Any, ...]:
        src, wf, cc, dst, cd = sides(d, x, w, conv, y)
        xd, wd, yd = tensor(x), tensor(w), tensor(y)
        key = (d.key, _key(xd, wd, yd))
        cu_algo, math = chosen(cd, key, algo, d.defaults, xd.data_type)
        cc = cu_conv(cd, xd.data_type, math)
        if len(prepared) >= PREPARED:
            prepared.clear()
        descs = (xd, wd, cd, yd)
        stamp = tuple(desc.generation for desc in descs)
        h = handle_of(handle)
        timed = cd.native.get(("timed", *key), False)
        graph = None if timed else graphs.get(h, d.key, (xd, wd, yd), cd)
        return descs, stamp, h, src, wf, cc, dst, cu_algo, graph

    def run(
        d: Direction, handle: Any, alpha: Any, x: Any, x_data: Any, w: Any, w_data: Any,
        conv: Any, algo: int, beta: Any, y: Any, y_data: Any, workspace: Any,
        workspace_size: int,
    ) -> int:  # fmt: skip
        key = (d.key, handle, x, w, conv, y, algo)
        entry = prepared.get(key)
        if entry is not None:  # (unrolled: this is most of a repeated call's host time)
            xd, wd, cd, yd = entry[0]
            if (xd.generation, wd.generation, cd.generation, yd.generation) != entry[1]:
                entry = None
        if entry is None:
            entry = prepared[key] = prepare(d, handle, x, w, conv, y, algo)
        _, _, h, src, wf, cc, dst, cu_algo, graph = entry
        if graph is not None and unscaled(alpha, beta):
            try:
                status = graph.execute(x_data, w_data, y_data, workspace, workspace_size)
            except GraphFailed as failed:
                raise _Failed(t.miopen_status(failed.status)) from None
            if status is not None:  # (None: no engine takes it: the legacy call below)
                _checked(status)
                return dc.SUCCESS
        src_data, dst_data = (x_data, y_data) if d.forward else (y_data, x_data)
        _checked(
            getattr(cudnn, d.run)(
                h, alpha, *d.order((src, src_data), (wf, w_data)), cc, cu_algo,
                workspace, workspace_size, beta, dst, dst_data,
            )
        )  # fmt: skip
        return dc.SUCCESS

    # MIOpen's argument orders -> (x, w, y) of the forward convolution, whatever the direction.
    @_surface
    def miopenConvolutionForwardGetWorkSpaceSize(
        handle: Any, w: Any, x: Any, conv: Any, y: Any, size: Any
    ) -> int:
        return workspace_size(FORWARD, handle, x, w, conv, y, size)

    @_surface
    def miopenConvolutionBackwardDataGetWorkSpaceSize(
        handle: Any, dy: Any, w: Any, conv: Any, dx: Any, size: Any
    ) -> int:
        return workspace_size(BACKWARD_DATA, handle, dx, w, conv, dy, size)

    @_surface
    def miopenFindConvolutionForwardAlgorithm(
        handle: Any, x: Any, x_data: Any, w: Any, w_data: Any, conv: Any, y: Any, y_data: Any,
        *rest: Any,
    ) -> int:  # fmt: skip
        return find(FORWARD, handle, x, x_data, w, w_data, conv, y, y_data, *rest)

    @_surface
    def miopenFindConvolutionBackwardDataAlgorithm(
        handle: Any, dy: Any, dy_data: Any, w: Any, w_data: Any, conv: Any, dx: Any,
        dx_data: Any, *rest: Any,
    ) -> int:  # fmt: skip
        return find(BACKWARD_DATA, handle, dx, dx_data, w, w_data, conv, dy, dy_data, *rest)

    @_surface
    def miopenConvolutionForward(
        handle: Any, alpha: Any, x: Any, x_data: Any, w: Any, w_data: Any, conv: Any,
        algo: int, beta: Any, y: Any, y_data: Any, workspace: Any, workspace_size: int,
    ) -> int:  # fmt: skip
        return run(FORWARD, handle, alpha, x, x_data, w, w_data, conv, algo, beta, y, y_data,
                   workspace, workspace_size)  # fmt: skip

    @_surface
    def miopenConvolutionBackwardData(
        handle: Any, alpha: Any, dy: Any, dy_data: Any, w: Any, w_data: Any, conv: Any,
        algo: int, beta: Any, dx: Any, dx_data: Any, workspace: Any, workspace_size: int,
    ) -> int:  # fmt: skip
        return run(BACKWARD_DATA, handle, alpha, dx, dx_data, w, w_data, conv, algo, beta, dy,
                   dy_data, workspace, workspace_size)  # fmt: skip

    @_surface
    def miopenPoolingGetWorkSpaceSizeV2(pool: Any, y: Any, size: Any) -> int:
        if poolings.get(pool) is None or is_null(size):
            return dc.BAD_PARM
        tensor(y)
        size[0] = 0
        return dc.SUCCESS

    @_surface
    def miopenPoolingForward(
        handle: Any, pool: Any, alpha: Any, x: Any, x_data: Any, beta: Any, y: Any,
        y_data: Any, do_backward: bool, workspace: Any, workspace_size: int,
    ) -> int:  # fmt: skip
        pd, xd, yd = poolings.get(pool), tensor(x), tensor(y)
        if pd is None or not pd.window or xd.data_type != yd.data_type:
            return dc.BAD_PARM
        if len(xd.dims) != len(pd.window) + 2 or len(yd.dims) != len(xd.dims):
            return dc.BAD_PARM
        if xd.data_type not in t.DATA_TYPE:
            return dc.NOT_IMPLEMENTED
        mode = t.POOLING_MODE[pd.mode]
        cp = own(
            pd.native, "pooling", "Pooling",
            lambda d: cudnn.cudnnSetPoolingNdDescriptor(
                d, mode, t.CUDNN_PROPAGATE_NAN, len(pd.window), _int_array(pd.window),
                _int_array(pd.pads), _int_array(pd.strides),
            ),
        )  # fmt: skip
        _checked(
            cudnn.cudnnPoolingForward(
                handle_of(handle), cp, alpha, cu_tensor(xd), x_data, beta, cu_tensor(yd), y_data
            )
        )
        return dc.SUCCESS

    functions: dict[str, Callable[..., Any]] = descriptors.functions()
    functions.update(
        {
            "miopenCreate": miopenCreate,
            "miopenDestroy": miopenDestroy,
            "miopenSetStream": miopenSetStream,
            "miopenGetStream": miopenGetStream,
            "miopenConvolutionForwardGetWorkSpaceSize": miopenConvolutionForwardGetWorkSpaceSize,
            "miopenFindConvolutionForwardAlgorithm": miopenFindConvolutionForwardAlgorithm,
            "miopenConvolutionForward": miopenConvolutionForward,
            "miopenConvolutionBackwardDataGetWorkSpaceSize": (
                miopenConvolutionBackwardDataGetWorkSpaceSize
            ),
            "miopenFindConvolutionBackwardDataAlgorithm": (
                miopenFindConvolutionBackwardDataAlgorithm
            ),
            "miopenConvolutionBackwardData": miopenConvolutionBackwardData,
            "miopenPoolingGetWorkSpaceSizeV2": miopenPoolingGetWorkSpaceSizeV2,
            "miopenPoolingForward": miopenPoolingForward,
        }
    )
    return functions

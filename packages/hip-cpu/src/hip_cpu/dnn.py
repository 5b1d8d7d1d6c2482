"""MIOpen's surface on the cpu platform: convolutions and pooling on the host, in stream order.

Handles are bound to a stream (miopenSetStream) and every operation is queued on it with the
stream engine, like hipBLAS here (blas.py): the call checks its descriptors and arguments,
reads alpha and beta (host pointers: float, or double for f64 tensors) and returns; the work
runs later, in the stream's order, over the host memory the device pointers are. The
arithmetic (dnn_math.py, numpy imported at the first operation) is float64, rounded once into
the output's type: f16, f32, bf16 or f64 in any strides (NCHW, NHWC...).

There is one algorithm per direction: Find reports miopenConvolutionFwdAlgoGEMM (backward
data: miopenConvolutionBwdDataAlgoGEMM) with no workspace, and every algorithm value runs it.
Pooling needs no index workspace (size 0; do_backward is accepted and ignored). A handle
cannot be made without numpy (miopenStatusNotInitialized).
"""

from __future__ import annotations

import importlib.util
from collections.abc import Callable
from typing import Any

from hip_cpu.stream_state import Stream
from hip_cpu.streams import ENGINE
from hip_ffi import dnn_constants as dc
from hip_ffi._ffi import ffi
from hip_ffi.constants import ERROR_CODES
from hip_ffi.dnn_descriptors import ConvProblem, Descriptors, TensorDesc, conv_problem
from hip_ffi.handles import Registry, address, is_null, takes_handle


class Handle:
    def __init__(self) -> None:
        self.stream: Stream = ENGINE.null
        self.stream_value = 0  # the hipStream_t it was given


HANDLES: Registry[Handle] = Registry("miopenHandle_t")
DESCRIPTORS = Descriptors()
on_handle = takes_handle(HANDLES.get, dc.BAD_PARM)
UNKNOWN = ERROR_CODES["hipErrorUnknown"]  # what a synchronize reports for a failed operation
_SUPPORTED = (dc.MIOPEN_HALF, dc.MIOPEN_FLOAT, dc.MIOPEN_BFLOAT16, dc.MIOPEN_DOUBLE)

globals().update(DESCRIPTORS.functions())  # the descriptor calls, under their surface names


def miopenCreate(handle: Any) -> int:
    if is_null(handle):
        return dc.BAD_PARM
    if importlib.util.find_spec("numpy") is None:
        return dc.NOT_INITIALIZED
    handle[0] = HANDLES.cdata(HANDLES.add(Handle()))
    return dc.SUCCESS


def miopenDestroy(handle: Any) -> int:
    return dc.SUCCESS if HANDLES.remove(handle) is not None else dc.BAD_PARM


@on_handle
def miopenSetStream(handle: Handle, stream: Any) -> int:
    resolved = ENGINE.resolve(stream)
    if resolved is None:
        return dc.BAD_PARM
    handle.stream, handle.stream_value = resolved, address(stream)
    return dc.SUCCESS


@on_handle
def miopenGetStream(handle: Handle, stream: Any) -> int:
    if is_null(stream):
        return dc.BAD_PARM
    stream[0] = ffi.cast("hipStream_t", handle.stream_value)
    return dc.SUCCESS


def _problem(x: Any, w: Any, conv: Any, y: Any) -> ConvProblem | int:
    """The convolution the descriptors describe, or the status that refuses them."""
    get = DESCRIPTORS.tensors.get
    xd, wd, yd, cd = get(x), get(w), get(y), DESCRIPTORS.convolutions.get(conv)
    if xd is None or wd is None or yd is None or cd is None:
        return dc.BAD_PARM
    found = conv_problem(xd, wd, cd, yd)
    if found is None:
        return dc.BAD_PARM
    if cd.mode != dc.MIOPEN_CONVOLUTION or xd.data_type not in _SUPPORTED:
        return dc.NOT_IMPLEMENTED
    return found


def _scalars(data_type: int, alpha: Any, beta: Any) -> tuple[float, float] | None:
    """alpha and beta read at the call (host pointer mode), None when one is NULL."""
    if is_null(alpha) or is_null(beta):
        return None
    kind = "double*" if data_type == dc.MIOPEN_DOUBLE else "float*"
    return float(ffi.cast(kind, alpha)[0]), float(ffi.cast(kind, beta)[0])


def _run(stream: Stream, work: Callable[[], None]) -> int:
    """Queue `work` on `stream`; a failure inside it is reported by the next synchronize."""

    def run() -> int:
        try:
            work()
        except Exception:  # a bad address or shape the checks let through: not a crash
            return UNKNOWN
        return 0

    ENGINE.submit(stream, run)
    return dc.SUCCESS


def _tensor(desc: TensorDesc, data: Any) -> tuple[int, tuple[int, ...], tuple[int, ...], int]:
    return desc.data_type, desc.dims, desc.strides, address(data)


def _size_query(check: Callable[[], ConvProblem | int], size: Any) -> int:
    found = check()
    if isinstance(found, int):
        return found
    if is_null(size):
        return dc.BAD_PARM
    size[0] = 0
    return dc.SUCCESS


def _find(found: ConvProblem | int, request: int, returned: Any, results: Any, field: str) -> int:
    if isinstance(found, int):
        return found
    if request < 1 or is_null(returned) or is_null(results):
        return dc.BAD_PARM
    setattr(results[0], field, 0)  # GEMM, the one algorithm
    results[0].time = 0.0
    results[0].memory = 0
    returned[0] = 1
    return dc.SUCCESS


@on_handle
def miopenConvolutionForwardGetWorkSpaceSize(
    handle: Handle, w: Any, x: Any, conv: Any, y: Any, size: Any
) -> int:
    return _size_query(lambda: _problem(x, w, conv, y), size)


@on_handle
def miopenFindConvolutionForwardAlgorithm(
    handle: Handle, x: Any, x_data: Any, w: Any, w_data: Any, conv: Any, y: Any, y_data: Any,
    request: int, returned: Any, results: Any, workspace: Any, workspace_size: int,
    exhaustive: bool,
) -> int:  # fmt: skip
    return _find(_problem(x, w, conv, y), request, returned, results, "fwd_algo")


def _convolve(
    handle: Handle, found: ConvProblem | int, alpha: Any, beta: Any, x_data: Any, w_data: Any,
    y_data: Any, forward: bool,
) -> int:  # fmt: skip
    """Queue y = conv(x, w) (forward), or x = its data gradient from y (backward data)."""
    if isinstance(found, int):
        return found
    scalars = _scalars(found.x.data_type, alpha, beta)
    if scalars is None:
        return dc.BAD_PARM
    xs, ws, ys = _tensor(found.x, x_data), _tensor(found.w, w_data), _tensor(found.y, y_data)
    c = found.conv
    geometry = (c.pads, c.strides, c.dilations, c.groups)
    size = (found.x.dims[2], found.x.dims[3])
    source, destination = (xs, ys) if forward else (ys, xs)

    def work() -> None:
        from hip_cpu import dnn_math as m

        if forward:
            new = m.conv_forward(m.load(*source), m.load(*ws), *geometry)
        else:
            new = m.conv_backward_data(m.load(*source), m.load(*ws), *geometry, size)
        m.store(*destination, m.blend(new, *scalars, lambda: m.load(*destination)))

    return _run(handle.stream, work)


@on_handle
def miopenConvolutionForward(
    handle: Handle, alpha: Any, x: Any, x_data: Any, w: Any, w_data: Any, conv: Any, algo: int,
    beta: Any, y: Any, y_data: Any, workspace: Any, workspace_size: int,
) -> int:  # fmt: skip
    found = _problem(x, w, conv, y)
    return _convolve(handle, found, alpha, beta, x_data, w_data, y_data, forward=True)


@on_handle
def miopenConvolutionBackwardDataGetWorkSpaceSize(
    handle: Handle, dy: Any, w: Any, conv: Any, dx: Any, size: Any
) -> int:
    return _size_query(lambda: _problem(dx, w, conv, dy), size)


@on_handle
def miopenFindConvolutionBackwardDataAlgorithm(
    handle: Handle, dy: Any, dy_data: Any, w: Any, w_data: Any, conv: Any, dx: Any,
    dx_data: Any, request: int, returned: Any, results: Any, workspace: Any,
    workspace_size: int, exhaustive: bool,
) -> int:  # fmt: skip
    return _find(_problem(dx, w, conv, dy), request, returned, results, "bwd_data_algo")


@on_handle
def miopenConvolutionBackwardData(
    handle: Handle, alpha: Any, dy: Any, dy_data: Any, w: Any, w_data: Any, conv: Any,
    algo: int, beta: Any, dx: Any, dx_data: Any, workspace: Any, workspace_size: int,
) -> int:  # fmt: skip
    found = _problem(dx, w, conv, dy)
    return _convolve(handle, found, alpha, beta, dx_data, w_data, dy_data, forward=False)


def miopenPoolingGetWorkSpaceSizeV2(pool: Any, y: Any, size: Any) -> int:
    if DESCRIPTORS.poolings.get(pool) is None or DESCRIPTORS.tensors.get(y) is None:
        return dc.BAD_PARM
    if is_null(size):
        return dc.BAD_PARM
    size[0] = 0
    return dc.SUCCESS


@on_handle
def miopenPoolingForward(
    handle: Handle, pool: Any, alpha: Any, x: Any, x_data: Any, beta: Any, y: Any, y_data: Any,
    do_backward: bool, workspace: Any, workspace_size: int,
) -> int:  # fmt: skip
    pd, xd, yd = (
        DESCRIPTORS.poolings.get(pool),
        DESCRIPTORS.tensors.get(x),
        DESCRIPTORS.tensors.get(y),
    )
    if pd is None or xd is None or yd is None or len(pd.window) != 2:
        return dc.BAD_PARM
    if len(xd.dims) != 4 or len(yd.dims) != 4 or xd.dims[:2] != yd.dims[:2]:
        return dc.BAD_PARM
    if xd.data_type != yd.data_type:
        return dc.BAD_PARM
    if xd.data_type not in _SUPPORTED:
        return dc.NOT_IMPLEMENTED
    scalars = _scalars(xd.data_type, alpha, beta)
    if scalars is None:
        return dc.BAD_PARM
    xs, ys = _tensor(xd, x_data), _tensor(yd, y_data)
    mode, window, pads, strides = pd.mode, pd.window, pd.pads, pd.strides
    out = (yd.dims[2], yd.dims[3])

    def work() -> None:
        from hip_cpu import dnn_math as m

        y_new = m.pool_forward(m.load(*xs), mode, window, pads, strides, out)
        m.store(*ys, m.blend(y_new, *scalars, lambda: m.load(*ys)))

    return _run(handle.stream, work)

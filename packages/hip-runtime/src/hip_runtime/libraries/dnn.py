"""Dnn: the platform's DNN library (MIOpen; cuDNN on nvidia; the host on cpu) on one stream.

    dnn = backend._dnn()            # None when the platform has no DNN library
    if dnn is None or not dnn.conv_forward(x, w, out, stride=(1, 1), padding=(1, 1),
                                           dilation=(1, 1), groups=1, channels_last=False):
        ...                         # the portable kernels

Every call is queued on the backend's stream and returns at once. A method answers False,
having queued nothing, when the library cannot take the case (a dtype other than f32 / f16 /
bf16, a tensor that is not contiguous in the layout named, padding it cannot express, an output
size its formula does not give, or the library itself refusing the shapes), so the caller falls
back; a real failure of the library raises DnnError (a hip_core.HipError).

Per case — (op, shapes, dtype, layout, stride, padding, dilation, groups) — the descriptors and
the algorithm (MIOpen's Find; on nvidia cuDNN's heuristics, or its timed search when
`exhaustive`) are worked out once and kept; later calls only launch. Workspace is one buffer
from the backend's memory pool, grown as cases need and reused by every launch on the stream.
Set HIP_RUNTIME_DNN=0 to make `backend._dnn()` answer None (the portable kernels everywhere).
"""

from __future__ import annotations

import os
import threading
import weakref
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from hip_core import MemoryPool, Stream
from hip_core import hip_api as hip  # the raw MIOpen entry points (hip-core wraps no DNN)
from hip_core.errors import HipError
from hip_ffi import dnn_constants as dc
from hip_runtime.libraries.library_handle import LibraryCalls, LibraryHandle
from hip_runtime.tensors.dtypes import bfloat16, float16, float32

#: The element types the DNN path takes (f32 accumulation in the libraries for all three).
DATA_TYPES: dict[np.dtype[Any], int] = {
    float32: dc.MIOPEN_FLOAT,
    float16: dc.MIOPEN_HALF,
    bfloat16: dc.MIOPEN_BFLOAT16,
}
POOL_MODES = {
    "max": dc.MIOPEN_POOLING_MAX,
    "avg_include_pad": dc.MIOPEN_POOLING_AVERAGE_INCLUSIVE,
    "avg_exclude_pad": dc.MIOPEN_POOLING_AVERAGE,
}
_STATUS_NAMES = dc.MIOPEN_STATUS_NAMES
#: Statuses of the workspace query and Find that mean "not this case" (the caller falls back)
#: rather than a failure: MIOpen answers miopenStatusUnknownError when no solver applies ("No
#: suitable algorithm was found"), miopenStatusUnsupportedOp for unsupported fusions.
_DECLINED = frozenset(
    {
        dc.BAD_PARM,
        dc.NOT_IMPLEMENTED,
        dc.INVALID_VALUE,
        dc.UNKNOWN_ERROR,
        dc.MIOPEN_STATUSES["miopenStatusUnsupportedOp"],
    }
)


class DnnError(HipError):
    """A call of the DNN library failed (code: its miopenStatus_t)."""


def check_miopen(status: int, api: str) -> None:
    """Raise DnnError for a failing miopenStatus_t."""
    if status:
        name = _STATUS_NAMES.get(status, f"miopenStatus({status})")
        raise DnnError(status, name, api, True)


@dataclass(frozen=True)
class _Plan:
    """What one case launches: the surface call, its descriptors (in the call's order), the
    algorithm and its workspace (bytes)."""

    call: str
    descriptors: tuple[Any, ...]
    algo: int
    workspace: int


def _pairs(padding: Sequence[Any]) -> tuple[int, int] | None:
    """(ph, pw) of symmetric padding: 2 ints, or 2 (before, after) pairs that are equal;
    None for padding a library cannot express."""
    if len(padding) != 2:
        return None
    pads = []
    for pad in padding:
        if isinstance(pad, Sequence):
            if len(pad) != 2 or pad[0] != pad[1]:
                return None
            pad = pad[0]
        pads.append(int(pad))
    return pads[0], pads[1]


def _layout(shape: tuple[int, ...], channels_last: bool) -> tuple[tuple[int, ...], ...]:
    """A 4-D tensor's logical [N, C, H, W] dims and strides (elements), from its shape in the
    layout named (NHWC when channels_last: the channels are the last axis)."""
    if channels_last:
        n, h, w, c = shape
        return (n, c, h, w), (h * w * c, 1, w * c, c)
    n, c, h, w = shape
    return (n, c, h, w), (c * h * w, h * w, w, 1)


def _out_size(size: int, pad: int, window: int, stride: int, dilation: int) -> int:
    return (size + 2 * pad - dilation * (window - 1) - 1) // stride + 1


def _queued(launch: Callable[[int, int, int], None] | None, a: Any, w: Any, b: Any) -> bool:
    """Queue a convolution case's launch on the addresses of its three tensors; False when
    there is none (the library declined the case)."""
    if launch is None:
        return False
    launch(a.ptr, w.ptr, b.ptr)
    return True


class Dnn(LibraryHandle):
    """A DNN library handle whose work is queued on `stream`, workspace taken from `pool`.

    `exhaustive`: time the algorithms once per case (cuDNN's Find; MIOpen's exhaustive Find)
    instead of taking the library's first choice. `close()` destroys the descriptors and the
    handle (work already queued still runs). (The handle's lifecycle:
    hip_runtime.libraries.library_handle.)"""

    calls = LibraryCalls("miopenHandle_t", "miopenCreate", "miopenSetStream", check_miopen)

    def __init__(self, stream: Stream, pool: MemoryPool, *, exhaustive: bool = False) -> None:
        self._descriptors: list[tuple[str, Any]] = []  # (destroy call, descriptor)
        self._workspace: list[Any] = []  # [DeviceBuffer, its void*] once a case needs one
        super().__init__(stream, _destroy, self._descriptors, self._workspace)
        api = self._api
        self.pool = pool
        self.exhaustive = exhaustive
        self._alpha, self._beta = api.ffi.new("float*", 1.0), api.ffi.new("float*", 0.0)
        self._cast = api.ffi.cast
        self._plans: dict[tuple[Any, ...], _Plan | None] = {}
        self._launchers: dict[tuple[Any, ...], Callable[[int, int, int], None]] = {}
        self._cached: dict[tuple[Any, ...], Any] = {}  # descriptors by what they describe
        self._lock = threading.Lock()

    # --- the three operations ----------------------------------------------------------------

    def conv_forward(
        self, x: Any, w: Any, out: Any, *, stride: Sequence[int], padding: Sequence[Any],
        dilation: Sequence[int], groups: int, channels_last: bool,
    ) -> bool:  # fmt: skip
        """Queue out = conv2d(x, w) (cross-correlation, no bias): x [N, C, H, W] (NHWC when
        channels_last), w [K, C / groups, R, S] ([K, R, S, C / groups]), out [N, K, P, Q]
        ([N, P, Q, K]), all contiguous, of one dtype. False: not queued (fall back)."""
        launch = self.conv_launcher(
            False, x, w, out, stride=stride, padding=padding, dilation=dilation, groups=groups,
            channels_last=channels_last,
        )  # fmt: skip
        return _queued(launch, x, w, out)

    def conv_backward_data(
        self, dy: Any, w: Any, dx: Any, *, stride: Sequence[int], padding: Sequence[Any],
        dilation: Sequence[int], groups: int, channels_last: bool,
    ) -> bool:  # fmt: skip
        """Queue dx = the data gradient of the forward convolution x [N, C, H, W] -> dy
        [N, K, P, Q] by w [K, C / groups, R, S] (what conv_transpose2d(dy, w) is); layouts as
        conv_forward's. dx's H, W may exceed the forward's reach (output padding). False: not
        queued."""
        launch = self.conv_launcher(
            True, dy, w, dx, stride=stride, padding=padding, dilation=dilation, groups=groups,
            channels_last=channels_last,
        )  # fmt: skip
        return _queued(launch, dy, w, dx)

    def conv_launcher(
        self, backward_data: bool, x: Any, w: Any, out: Any, *, stride: Sequence[int],
        padding: Sequence[Any], dilation: Sequence[int], groups: int, channels_last: bool,
    ) -> Callable[[int, int, int], None] | None:  # fmt: skip
        """What conv_forward (conv_backward_data when `backward_data`: x is dy, out dx) would
        queue, as a function of the three tensors' addresses, for repeated calls of the same
        case (the ops' plans keep it: a call then costs one library call); None when the
        library cannot take the case. The function checks that the Dnn is open."""
        self._check_open()
        key = ("bwd" if backward_data else "fwd", x.shape, w.shape, out.shape, x.dtype,
               channels_last, tuple(stride), tuple(padding), tuple(dilation), groups)  # fmt: skip
        plan = self._plans.get(key, _NO_PLAN)
        if plan is _NO_PLAN:
            call = "BackwardData" if backward_data else "Forward"
            forward = (out, w, x) if backward_data else (x, w, out)
            plan = self._plan_conv(key, *forward, out, x, call)
            self._launchers.pop(key, None)
        if plan is None:
            return None
        launch = self._launchers.get(key)
        if launch is None:
            launch = self._launchers[key] = self._launch(plan, out)
        return launch

    # --- plans -------------------------------------------------------------------------------

    def _launch(self, plan: _Plan, written: Any) -> Callable[[int, int, int], None]:
        """A call of `plan` on the addresses of its data input, weights and output (the
        checks and lookups made once; the workspace looked up per call: it may have grown)."""
        if not written.size:
            return _nothing
        function, name = getattr(self._api, plan.call), plan.call
        handle, alpha, beta, space = self.handle, self._alpha, self._beta, self._space
        source, filters, conv, destination = plan.descriptors  # in the call's order
        algo, nbytes, check_open, void = plan.algo, plan.workspace, self._check_open, self._void

        def launch(read: int, weights: int, written: int) -> None:
            check_open()  # (a closed Dnn's handle is gone)
            status = function(
                handle, alpha, source, void(read), filters, void(weights), conv, algo, beta,
                destination, void(written), space(nbytes), nbytes,
            )  # fmt: skip
            if status:
                check_miopen(status, name)

        return launch

    def pool_forward(
        self, x: Any, out: Any, *, mode: str, window: Sequence[int], stride: Sequence[int],
        padding: Sequence[Any], channels_last: bool,
    ) -> bool:  # fmt: skip
        """Queue out = pool2d(x): mode 'max' | 'avg_include_pad' | 'avg_exclude_pad', x
        [N, C, H, W] (NHWC when channels_last) into out [N, C, P, Q] with
        P = (H + 2 ph - kh) // sh + 1 (a ceil_mode size beyond it: False, not queued)."""
        if mode not in POOL_MODES:
            raise ValueError(
                f"pool_forward: mode must be one of {sorted(POOL_MODES)}, not {mode!r}"
            )
        self._check_open()
        key = ("pool", x.shape, out.shape, x.dtype, channels_last, mode,
               tuple(window), tuple(stride), tuple(padding))  # fmt: skip
        plan = self._plans.get(key, _NO_PLAN)
        if plan is _NO_PLAN:
            plan = self._plan_pool(key, x, out, mode, window, stride, padding, channels_last)
        if plan is None:
            return False
        if x.shape[0] and out.size:
            pool, xd, yd = plan.descriptors
            status = self._api.miopenPoolingForward(
                self.handle, pool, self._alpha, xd, self._cast(_VOID, x.ptr), self._beta, yd,
                self._cast(_VOID, out.ptr), False, self._api.ffi.NULL, 0,
            )  # fmt: skip
            check_miopen(status, "miopenPoolingForward")
        return True

    def _space(self, nbytes: int) -> Any:
        """`void*` to at least `nbytes` of workspace: one buffer from the pool, grown when a
        case needs more and reused by every launch (they are all on this one stream, so each
        finds it free; the one it replaces goes back to the pool in stream order)."""
        if not nbytes:
            return self._api.ffi.NULL
        held = self._workspace
        if not held or held[0].size < nbytes:
            buffer = self.pool.allocate(nbytes, stream=self.stream)
            held[:] = [buffer, self._cast(_VOID, buffer.ptr)]
        return held[1]

    def _plan_conv(
        self, key: tuple[Any, ...], x: Any, w: Any, y: Any, written: Any, read: Any, call: str
    ) -> _Plan | None:
        _, _, _, _, dtype, channels_last, stride, padding, dilation, groups = key
        pads = _pairs(padding)
        data_type = DATA_TYPES.get(dtype)
        plan = None
        if (
            pads is not None
            and data_type is not None
            and len(x.shape) == len(w.shape) == len(y.shape) == 4
            and x.dtype == w.dtype == y.dtype
            and x.is_contiguous and w.is_contiguous and y.is_contiguous
            and isinstance(groups, int) and groups >= 1
            and self._conv_fits(x, w, y, stride, pads, dilation, groups, channels_last)
        ):  # fmt: skip
            with self._lock:
                plan = self._find(x, w, y, written, read, call, data_type, channels_last,
                                  (pads, tuple(stride), tuple(dilation), groups))  # fmt: skip
        self._plans[key] = plan
        return plan

    @staticmethod
    def _conv_fits(
        x: Any, w: Any, y: Any, stride: Sequence[int], pads: tuple[int, int],
        dilation: Sequence[int], groups: int, channels_last: bool,
    ) -> bool:  # fmt: skip
        """Whether y's size is the one the libraries' formula gives (it differs for padding
        they cannot express, e.g. "same" with an even window), and the channels divide."""
        (n, c, h, wd), _ = _layout(x.shape, channels_last)
        (k, cg, r, s), _ = _layout(w.shape, channels_last)
        (yn, yk, p, q), _ = _layout(y.shape, channels_last)
        if len(stride) != 2 or len(dilation) != 2 or c != cg * groups or k % groups:
            return False
        return (yn, yk) == (n, k) and (p, q) == (
            _out_size(h, pads[0], r, stride[0], dilation[0]),
            _out_size(wd, pads[1], s, stride[1], dilation[1]),
        )

    def _find(
        self, x: Any, w: Any, y: Any, written: Any, read: Any, call: str, data_type: int,
        channels_last: bool, params: tuple[Any, ...],
    ) -> _Plan | None:  # fmt: skip
        api, ffi = self._api, self._api.ffi
        xd = self._tensor(data_type, *_layout(x.shape, channels_last))
        wd = self._tensor(data_type, *_layout(w.shape, channels_last))
        yd = self._tensor(data_type, *_layout(y.shape, channels_last))
        cd = self._conv(*params)
        order = (xd, wd, cd, yd) if call == "Forward" else (yd, wd, cd, xd)
        size = ffi.new("size_t*")
        perf = ffi.new("miopenConvAlgoPerf_t[1]")
        count = ffi.new("int*")
        if call == "Forward":
            status = api.miopenConvolutionForwardGetWorkSpaceSize(self.handle, wd, xd, cd, yd, size)
        else:
            status = api.miopenConvolutionBackwardDataGetWorkSpaceSize(
                self.handle, yd, wd, cd, xd, size
            )
        if status in _DECLINED:
            return None
        check_miopen(status, f"miopenConvolution{call}GetWorkSpaceSize")
        if not written.size or not read.size:  # nothing to search with; nothing to run
            return _Plan(f"miopenConvolution{call}", order, 0, 0)
        scratch = self.pool.allocate(size[0], stream=self.stream) if size[0] else None
        cast = self._cast
        space = cast(_VOID, scratch.ptr if scratch is not None else 0)
        px, pw, py = cast(_VOID, x.ptr), cast(_VOID, w.ptr), cast(_VOID, y.ptr)
        if call == "Forward":
            status = api.miopenFindConvolutionForwardAlgorithm(
                self.handle, xd, px, wd, pw, cd, yd, py, 1, count, perf, space,
                size[0], self.exhaustive,
            )  # fmt: skip
            algo = perf[0].fwd_algo
        else:
            status = api.miopenFindConvolutionBackwardDataAlgorithm(
                self.handle, yd, py, wd, pw, cd, xd, px, 1, count, perf, space,
                size[0], self.exhaustive,
            )  # fmt: skip
            algo = perf[0].bwd_data_algo
        if status in _DECLINED or (status == 0 and count[0] < 1):
            return None
        check_miopen(status, f"miopenFindConvolution{call}Algorithm")
        return _Plan(f"miopenConvolution{call}", order, algo, int(perf[0].memory))

    def _plan_pool(
        self, key: tuple[Any, ...], x: Any, out: Any, mode: str, window: Sequence[int],
        stride: Sequence[int], padding: Sequence[Any], channels_last: bool,
    ) -> _Plan | None:  # fmt: skip
        pads = _pairs(padding)
        data_type = DATA_TYPES.get(x.dtype)
        plan = None
        if (
            pads is not None and data_type is not None and len(window) == len(stride) == 2
            and len(x.shape) == len(out.shape) == 4 and x.dtype == out.dtype
            and x.is_contiguous and out.is_contiguous
        ):  # fmt: skip
            (n, c, h, w), x_strides = _layout(x.shape, channels_last)
            y_dims, y_strides = _layout(out.shape, channels_last)
            expected = (
                n, c, _out_size(h, pads[0], window[0], stride[0], 1),
                _out_size(w, pads[1], window[1], stride[1], 1),
            )  # fmt: skip
            if y_dims == expected:
                with self._lock:
                    plan = _Plan(
                        "miopenPoolingForward",
                        (
                            self._pool(POOL_MODES[mode], tuple(window), pads, tuple(stride)),
                            self._tensor(data_type, (n, c, h, w), x_strides),
                            self._tensor(data_type, y_dims, y_strides),
                        ),
                        0,
                        0,
                    )
        self._plans[key] = plan
        return plan

    # --- descriptors (kept for the handle's life) -------------------------------------------

    def _described(self, kind: str, key: tuple[Any, ...], *calls: tuple[Any, ...]) -> Any:
        """The descriptor of `kind` ("Tensor", "Convolution", "Pooling") that `calls` (each a
        surface function's name and its arguments after the descriptor) set up, made once per
        `key` and destroyed with the handle."""
        found = self._cached.get(key)
        if found is None:
            api = self._api
            out = api.ffi.new(f"miopen{kind}Descriptor_t*")
            create = f"miopenCreate{kind}Descriptor"
            check_miopen(getattr(api, create)(out), create)
            found = out[0]
            self._descriptors.append((f"miopenDestroy{kind}Descriptor", found))
            for name, *args in calls:
                check_miopen(getattr(api, name)(found, *args), name)
            self._cached[key] = found
        return found

    def _ints(self, values: tuple[int, ...]) -> Any:
        return self._api.ffi.new("int[]", values)

    def _tensor(self, data_type: int, dims: tuple[int, ...], strides: tuple[int, ...]) -> Any:
        return self._described(
            "Tensor", (data_type, dims, strides),
            ("miopenSetTensorDescriptor", data_type, len(dims), self._ints(dims),
             self._ints(strides)),
        )  # fmt: skip

    def _conv(
        self, pads: tuple[int, int], stride: tuple[int, ...], dilation: tuple[int, ...], groups: int
    ) -> Any:
        return self._described(
            "Convolution", ("conv", pads, stride, dilation, groups),
            ("miopenInitConvolutionNdDescriptor", 2, self._ints(pads), self._ints(stride),
             self._ints(dilation), dc.MIOPEN_CONVOLUTION),
            ("miopenSetConvolutionGroupCount", groups),
        )  # fmt: skip

    def _pool(
        self, mode: int, window: tuple[int, ...], pads: tuple[int, int], stride: tuple[int, ...]
    ) -> Any:
        return self._described(
            "Pooling", ("pool", mode, window, pads, stride),
            ("miopenSetNdPoolingDescriptor", mode, 2, self._ints(window), self._ints(pads),
             self._ints(stride)),
        )  # fmt: skip


_NO_PLAN: Any = object()


def _nothing(read: int, weights: int, written: int) -> None:
    """The launch of an empty output."""


_VOID = "void*"  # device addresses go to the library as void* (cffi takes no int for one)


def _destroy(
    api: Any, handle: Any, descriptors: list[tuple[str, Any]], workspace: list[Any]
) -> None:
    workspace.clear()  # back to the pool in stream order
    for destroy, descriptor in reversed(descriptors):
        getattr(api, destroy)(descriptor)
    descriptors.clear()
    check_miopen(api.miopenDestroy(handle), "miopenDestroy")


#: backend -> its Dnn (None: no DNN library, or HIP_RUNTIME_DNN=0). Weak: a Dnn holds only
#: the backend's stream and pool, so a collected backend takes its Dnn with it.
_BY_BACKEND: weakref.WeakKeyDictionary[Any, Dnn | None] = weakref.WeakKeyDictionary()


def backend_dnn(backend: Any) -> Dnn | None:
    """The backend's Dnn, made on first use; None when the platform has no DNN library (the
    reason: `hip_core.hip_api().unavailable()`), when making the handle fails, or when
    HIP_RUNTIME_DNN=0. The ops' one way to the library: `backend._dnn()`."""
    backend._check_open()
    found = _BY_BACKEND.get(backend, _NO_PLAN)
    if found is not _NO_PLAN:
        return found  # type: ignore[no-any-return]
    dnn = None
    if os.environ.get("HIP_RUNTIME_DNN", "1") != "0" and hip().has("miopenCreate"):
        try:
            dnn = Dnn(backend.stream, backend.pool)
        except DnnError:
            dnn = None
    _BY_BACKEND[backend] = dnn
    return dnn


__all__ = ["DATA_TYPES", "POOL_MODES", "Dnn", "DnnError", "backend_dnn", "check_miopen"]

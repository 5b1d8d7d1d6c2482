"""The nvidia platform's MIOpen-over-cuDNN translation, over a fake cuDNN written in Python: the
cuDNN calls each surface call makes, with which arguments and enum values, and how cuDNN's
answers come back (algorithm families, workspace, statuses). No GPU, no cuDNN."""

from __future__ import annotations

from typing import Any

import pytest

from hip_ffi import dnn_constants as dc
from hip_ffi import surface
from hip_ffi._ffi import ffi
from hip_ffi.api import Unavailable
from hip_ffi.platforms.nvidia import dnn, dnn_tables


class FakeCudnn:
    """Records every call; descriptors are counters; the algorithm queries answer `perf`."""

    def __init__(self, version: int = 92801) -> None:
        self.version = version
        self.calls: list[tuple[str, tuple[Any, ...]]] = []
        self.perf = [(1, 0, 0.5, 4096, 1), (0, 0, 0.9, 0, 1), (6, 3000, 0.0, 0, 0)]
        self.status: dict[str, int] = {}
        self._next = 0x1000

    def cudnnGetVersion(self) -> int:
        return self.version

    def __getattr__(self, name: str) -> Any:
        if not name.startswith("cudnn"):
            raise AttributeError(name)

        def call(*args: Any) -> int:
            self.calls.append((name, args))
            if name.startswith("cudnnCreate"):
                self._next += 16
                args[0][0] = ffi.cast(ffi.typeof(args[0]).item, self._next)
            if name.startswith(("cudnnGetConvolution", "cudnnFindConvolution")) and (
                "Algorithm" in name
            ):
                returned, results = args[-2], args[-1]
                if "Ex" in name:
                    returned, results = args[-4], args[-3]
                for i, (algo, status, time, memory, math) in enumerate(self.perf):
                    results[i].algo, results[i].status, results[i].time = algo, status, time
                    results[i].memory, results[i].mathType = memory, math
                returned[0] = len(self.perf)
            return self.status.get(name, 0)

        return call

    def named(self, name: str) -> list[tuple[Any, ...]]:
        return [args for called, args in self.calls if called == name]


def _ints(*values: int) -> Any:
    return ffi.new("int[]", list(values))


def _tensor(
    api: dict[str, Any], dims: tuple[int, ...], strides: tuple[int, ...], dtype: int
) -> Any:
    out = ffi.new("miopenTensorDescriptor_t*")
    assert api["miopenCreateTensorDescriptor"](out) == 0
    status = api["miopenSetTensorDescriptor"](out[0], dtype, 4, _ints(*dims), _ints(*strides))
    assert status == 0
    return out[0]


@pytest.fixture
def setup() -> Any:
    fake = FakeCudnn()
    api = dnn.bind(fake)
    handle = ffi.new("miopenHandle_t*")
    assert api["miopenCreate"](handle) == 0
    conv = ffi.new("miopenConvolutionDescriptor_t*")
    assert api["miopenCreateConvolutionDescriptor"](conv) == 0
    assert api["miopenInitConvolutionNdDescriptor"](conv[0], 2, _ints(1, 1), _ints(1, 1),
                                                   _ints(1, 1), 0) == 0  # fmt: skip
    # NHWC bf16: x [2, 8, 6, 6], w [4, 8, 3, 3], y [2, 4, 6, 6]
    x = _tensor(api, (2, 8, 6, 6), (288, 1, 48, 8), dc.MIOPEN_BFLOAT16)
    w = _tensor(api, (4, 8, 3, 3), (72, 1, 24, 8), dc.MIOPEN_BFLOAT16)
    y = _tensor(api, (2, 4, 6, 6), (144, 1, 24, 4), dc.MIOPEN_BFLOAT16)
    return fake, api, handle[0], conv[0], x, w, y


def test_descriptors_become_cudnn_ones_with_a_filter_format(setup) -> None:  # type: ignore[no-untyped-def]
    fake, api, handle, conv, x, w, y = setup
    size = ffi.new("size_t*")
    assert api["miopenConvolutionForwardGetWorkSpaceSize"](handle, w, x, conv, y, size) == 0
    assert size[0] == 4096  # the largest of cuDNN's successful choices
    (tensor_args,) = fake.named("cudnnSetTensorNdDescriptor")[:1]
    assert tensor_args[1] == 9 and tensor_args[2] == 4  # CUDNN_DATA_BFLOAT16, 4-D
    assert list(tensor_args[3][0:4]) == [2, 8, 6, 6]
    assert list(tensor_args[4][0:4]) == [288, 1, 48, 8]
    (filter_args,) = fake.named("cudnnSetFilterNdDescriptor")
    assert filter_args[1:4] == (9, dnn_tables.CUDNN_TENSOR_NHWC, 4)
    assert list(filter_args[4][0:4]) == [4, 8, 3, 3]
    (conv_args,) = fake.named("cudnnSetConvolutionNdDescriptor")
    assert conv_args[5:] == (dnn_tables.CUDNN_CROSS_CORRELATION, dnn_tables.CUDNN_DATA_FLOAT)
    assert fake.named("cudnnSetConvolutionGroupCount")[0][1] == 1
    assert fake.named("cudnnSetConvolutionMathType")[0][1] == dnn_tables.CUDNN_TENSOR_OP_MATH
    # Made once, kept: a second query creates nothing.
    before = len(fake.named("cudnnCreateTensorDescriptor"))
    assert api["miopenConvolutionForwardGetWorkSpaceSize"](handle, w, x, conv, y, size) == 0
    assert len(fake.named("cudnnCreateTensorDescriptor")) == before


def test_find_reports_families_and_forward_runs_what_was_found(setup) -> None:  # type: ignore[no-untyped-def]
    fake, api, handle, conv, x, w, y = setup
    perf, count = ffi.new("miopenConvAlgoPerf_t[4]"), ffi.new("int*")
    status = api["miopenFindConvolutionForwardAlgorithm"](
        handle, x, ffi.NULL, w, ffi.NULL, conv, y, ffi.NULL, 4, count, perf, ffi.NULL, 4096,
        False,
    )  # fmt: skip
    assert status == 0 and count[0] == 1  # precomp and implicit GEMM: one family; Winograd failed
    assert perf[0].fwd_algo == dc.CONV_FWD_ALGOS["miopenConvolutionFwdAlgoImplicitGEMM"]
    assert perf[0].memory == 4096
    assert fake.named("cudnnGetConvolutionForwardAlgorithm_v7")
    alpha, beta = ffi.new("float*", 1.0), ffi.new("float*", 0.0)
    status = api["miopenConvolutionForward"](
        handle, alpha, x, ffi.NULL, w, ffi.NULL, conv, perf[0].fwd_algo, beta, y, ffi.NULL,
        ffi.NULL, 4096,
    )  # fmt: skip
    assert status == 0
    (args,) = fake.named("cudnnConvolutionForward")
    assert args[7] == 1 and args[9] == 4096  # IMPLICIT_PRECOMP_GEMM, with its workspace
    # The perf's math type is a descriptor of its own, made once: the hot path changes none
    # (setting one again would cost cuDNN a new execution plan at the next call).
    made = len(fake.named("cudnnSetConvolutionMathType"))
    assert api["miopenConvolutionForward"](
        handle, alpha, x, ffi.NULL, w, ffi.NULL, conv, perf[0].fwd_algo, beta, y, ffi.NULL,
        ffi.NULL, 4096,
    ) == 0  # fmt: skip
    assert len(fake.named("cudnnSetConvolutionMathType")) == made
    # A workspace too small for the first choice: Find takes the next, and the same family now
    # runs that algorithm (a repeated call's prepared arguments are dropped by a new Find).
    fake.calls.clear()
    status = api["miopenFindConvolutionForwardAlgorithm"](
        handle, x, ffi.NULL, w, ffi.NULL, conv, y, ffi.NULL, 4, count, perf, ffi.NULL, 0, True
    )
    assert status == 0 and perf[0].memory == 0
    assert fake.named("cudnnFindConvolutionForwardAlgorithmEx")
    forward = (handle, alpha, x, ffi.NULL, w, ffi.NULL, conv, perf[0].fwd_algo, beta, y,
               ffi.NULL, ffi.NULL, 0)  # fmt: skip
    assert api["miopenConvolutionForward"](*forward) == 0
    assert fake.named("cudnnConvolutionForward")[-1][7] == 0  # IMPLICIT_GEMM
    # Setting a descriptor again rebuilds what was made from it, even on the fast path.
    dims, nchw = _ints(2, 8, 6, 6), _ints(288, 36, 6, 1)
    assert api["miopenSetTensorDescriptor"](x, dc.MIOPEN_BFLOAT16, 4, dims, nchw) == 0
    made = len(fake.named("cudnnSetTensorNdDescriptor"))
    assert api["miopenConvolutionForward"](*forward) == 0
    assert len(fake.named("cudnnSetTensorNdDescriptor")) == made + 1
    assert list(fake.named("cudnnSetTensorNdDescriptor")[-1][4][0:4]) == [288, 36, 6, 1]


def test_backward_data_and_pooling_translate_their_enums(setup) -> None:  # type: ignore[no-untyped-def]
    fake, api, handle, conv, x, w, y = setup
    alpha, beta = ffi.new("float*", 1.0), ffi.new("float*", 0.0)
    status = api["miopenConvolutionBackwardData"](
        handle, alpha, y, ffi.NULL, w, ffi.NULL, conv, 5, beta, x, ffi.NULL, ffi.NULL, 0
    )
    assert status == 0
    (args,) = fake.named("cudnnConvolutionBackwardData")
    assert args[7] == dnn_tables.BWD_DATA_ALGO_DEFAULT[5]  # nothing found: the family's default
    # Timed search: cuDNN's argument order (filter first), then the found algorithm runs.
    perf, count = ffi.new("miopenConvAlgoPerf_t[2]"), ffi.new("int*")
    status = api["miopenFindConvolutionBackwardDataAlgorithm"](
        handle, y, ffi.NULL, w, ffi.NULL, conv, x, ffi.NULL, 2, count, perf, ffi.NULL, 4096, True
    )
    assert status == 0 and count[0] == 2
    assert [perf[0].bwd_data_algo, perf[1].bwd_data_algo] == [5, 0]  # ALGO_1, ALGO_0's families
    (found,) = fake.named("cudnnFindConvolutionBackwardDataAlgorithmEx")
    assert ffi.typeof(found[1]) is ffi.typeof("cudnnFilterDescriptor_t")
    assert ffi.typeof(found[3]) is ffi.typeof("cudnnTensorDescriptor_t")
    assert found[-2:] == (ffi.NULL, 4096)
    status = api["miopenConvolutionBackwardData"](
        handle, alpha, y, ffi.NULL, w, ffi.NULL, conv, 5, beta, x, ffi.NULL, ffi.NULL, 4096
    )
    assert status == 0 and fake.named("cudnnConvolutionBackwardData")[-1][7] == 1
    pool = ffi.new("miopenPoolingDescriptor_t*")
    assert api["miopenCreatePoolingDescriptor"](pool) == 0
    window, pads = _ints(3, 3), _ints(1, 1)
    set_pool = api["miopenSetNdPoolingDescriptor"]
    assert set_pool(pool[0], dc.MIOPEN_POOLING_AVERAGE, 2, window, pads, pads) == 0
    status = api["miopenPoolingForward"](
        handle, pool[0], alpha, x, ffi.NULL, beta, x, ffi.NULL, False, ffi.NULL, 0
    )
    assert status == 0
    (pool_args,) = fake.named("cudnnSetPoolingNdDescriptor")
    assert pool_args[1:4] == (2, dnn_tables.CUDNN_PROPAGATE_NAN, 2)  # exclude padding
    size = ffi.new("size_t*", 7)
    assert api["miopenPoolingGetWorkSpaceSizeV2"](pool[0], y, size) == 0 and size[0] == 0


def test_refusals_and_cudnn_failures_come_back_as_miopen_statuses(setup) -> None:  # type: ignore[no-untyped-def]
    fake, api, handle, conv, x, w, y = setup
    size = ffi.new("size_t*")
    # y of the wrong size: no convolution of these shapes.
    bad_y = _tensor(api, (2, 4, 5, 6), (120, 1, 24, 4), dc.MIOPEN_BFLOAT16)
    assert api["miopenConvolutionForwardGetWorkSpaceSize"](handle, w, x, conv, bad_y, size) == 3
    # A filter neither NCHW- nor NHWC-packed.
    odd_w = _tensor(api, (4, 8, 3, 3), (1, 4, 96, 32), dc.MIOPEN_BFLOAT16)
    assert api["miopenConvolutionForwardGetWorkSpaceSize"](handle, odd_w, x, conv, y, size) == 6
    fake.status["cudnnConvolutionForward"] = 3002  # CUDNN_STATUS_NOT_SUPPORTED_SHAPE
    alpha, beta = ffi.new("float*", 1.0), ffi.new("float*", 0.0)
    status = api["miopenConvolutionForward"](
        handle, alpha, x, ffi.NULL, w, ffi.NULL, conv, 0, beta, y, ffi.NULL, ffi.NULL, 0
    )
    assert status == dc.NOT_IMPLEMENTED
    assert dnn_tables.miopen_status(4004) == dc.ALLOC_FAILED
    assert dnn_tables.miopen_status(5003) == dc.UNKNOWN_ERROR
    assert dnn_tables.miopen_status(2002) == dc.BAD_PARM
    assert dnn_tables.miopen_status(1002) == dc.MIOPEN_STATUSES["miopenStatusVersionMismatch"]
    assert ffi.string(api["miopenGetErrorString"](3)) == b"miopenStatusBadParm"
    # Destroying the surface descriptor destroys the cuDNN ones made from it.
    assert api["miopenDestroyTensorDescriptor"](x) == 0
    assert fake.named("cudnnDestroyTensorDescriptor")


def test_cudnn_older_than_9_makes_the_surface_unavailable() -> None:
    functions = dnn.bind_checked(FakeCudnn(version=8907), "/x/libcudnn.so.8")
    assert set(functions) == set(surface.MIOPEN)
    assert all(isinstance(f, Unavailable) for f in functions.values())
    assert "cuDNN >= 9" in functions["miopenCreate"].reason

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
            if name.startswith("cudnnBackend"):
                return self._backend(name, args)
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

    # The backend (graph) API: descriptors are counters whose kind is remembered; the engine
    # heuristics answer `configs` configurations, whose plans `plan_status` finalizes (first
    # to last) with `plan_workspace` bytes each.
    configs = 2
    plan_status: tuple[int, ...] = (0, 0)
    plan_workspace = 512
    kinds: dict[int, int]

    def _backend(self, name: str, args: tuple[Any, ...]) -> int:
        if name == "cudnnBackendCreateDescriptor":
            self._next += 16
            args[1][0] = ffi.cast("void*", self._next)
            self.__dict__.setdefault("kinds", {})[self._next] = args[0]
        elif name == "cudnnBackendFinalize" and self.kind(args[0]) == 5:  # an execution plan
            finalized = len([a for a in self.named(name) if self.kind(a[0]) == 5]) - 1
            return self.plan_status[finalized % len(self.plan_status)]
        elif name == "cudnnBackendGetAttribute" and args[1] == 202:  # ENGINEHEUR_RESULTS
            args[4][0] = self.configs if args[5] == ffi.NULL else min(args[3], self.configs)
        elif name == "cudnnBackendGetAttribute" and args[1] == 402:  # plan workspace
            args[5][0] = self.plan_workspace
        return self.status.get(name, 0)

    def kind(self, descriptor: Any) -> int:
        return self.kinds[int(ffi.cast("uintptr_t", descriptor))]

    def made(self, kind: int) -> int:
        """Descriptors of `kind` (cudnnBackendDescriptorType_t) made so far."""
        return sum(1 for args in self.named("cudnnBackendCreateDescriptor") if args[0] == kind)


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


def _problem(fake: Any, api: Any) -> Any:
    """A handle, a 3x3 stride-1 padding-1 convolution and its NHWC bf16 tensors x [2, 8, 6, 6],
    w [4, 8, 3, 3], y [2, 4, 6, 6], made through the surface `api` (bound over `fake`)."""
    handle, conv = ffi.new("miopenHandle_t*"), ffi.new("miopenConvolutionDescriptor_t*")
    assert api["miopenCreate"](handle) == 0 and api["miopenCreateConvolutionDescriptor"](conv) == 0
    assert api["miopenInitConvolutionNdDescriptor"](conv[0], 2, _ints(1, 1), _ints(1, 1),
                                                   _ints(1, 1), 0) == 0  # fmt: skip
    x = _tensor(api, (2, 8, 6, 6), (288, 1, 48, 8), dc.MIOPEN_BFLOAT16)
    w = _tensor(api, (4, 8, 3, 3), (72, 1, 24, 8), dc.MIOPEN_BFLOAT16)
    y = _tensor(api, (2, 4, 6, 6), (144, 1, 24, 4), dc.MIOPEN_BFLOAT16)
    return fake, api, handle[0], conv[0], x, w, y


@pytest.fixture
def setup() -> Any:
    fake = FakeCudnn()
    return _problem(fake, dnn.bind(fake))


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


def _find_and_forward(api: Any, handle: Any, conv: Any, x: Any, w: Any, y: Any,
                      exhaustive: bool = False) -> Any:  # fmt: skip
    """Find (4096 bytes of workspace) then one Forward of x at 0x1000 (w 0x2000, y 0x3000)
    with the memory Find reported; the perf record."""
    perf, count = ffi.new("miopenConvAlgoPerf_t[1]"), ffi.new("int*")
    px, pw, py = (ffi.cast("void*", a) for a in (0x1000, 0x2000, 0x3000))
    assert api["miopenFindConvolutionForwardAlgorithm"](
        handle, x, px, w, pw, conv, y, py, 1, count, perf, ffi.NULL, 4096, exhaustive
    ) == 0  # fmt: skip
    alpha, beta = ffi.new("float*", 1.0), ffi.new("float*", 0.0)
    assert api["miopenConvolutionForward"](
        handle, alpha, x, px, w, pw, conv, perf[0].fwd_algo, beta, y, py, ffi.NULL,
        perf[0].memory,
    ) == 0  # fmt: skip
    return perf


@pytest.fixture
def graph_setup(setup) -> Any:  # type: ignore[no-untyped-def]
    fake = setup[0]
    return _problem(fake, dnn.bind(fake, graph=True))


def test_16_bit_convolutions_run_one_graph_plan_per_problem(graph_setup) -> None:  # type: ignore[no-untyped-def]
    fake, api, handle, conv, x, w, y = graph_setup
    size = ffi.new("size_t*")
    assert api["miopenConvolutionForwardGetWorkSpaceSize"](handle, w, x, conv, y, size) == 0
    assert size[0] == 4096  # the legacy candidates' 4096 covers the plan's 512
    perf = _find_and_forward(api, handle, conv, x, w, y)
    assert perf[0].memory == 4096  # the heuristic's own (at least the plan's)
    assert not fake.named("cudnnConvolutionForward")  # the legacy call is not made
    (run,) = fake.named("cudnnBackendExecute")
    assert fake.kind(run[1]) == 5 and fake.kind(run[2]) == 16  # plan, variant pack
    (heuristic,) = [a for a in fake.named("cudnnBackendSetAttribute") if a[1] == 200]
    assert heuristic[4][0] == dnn_tables.HEUR_MODE_A
    dims = [list(a[4][0:4]) for a in fake.named("cudnnBackendSetAttribute") if a[1] == 902]
    assert dims[:3] == [[2, 8, 6, 6], [4, 8, 3, 3], [2, 4, 6, 6]]  # x, w, y: logical NCHW
    pointers = [a[4] for a in fake.named("cudnnBackendSetAttribute") if a[1] == 1001]
    assert [int(ffi.cast("uintptr_t", p)) for p in pointers[0][0:3]] == [0x1000, 0x2000, 0x3000]
    # A repeated call makes nothing; other addresses make a variant pack, not a plan.
    plans, packs = fake.made(5), fake.made(16)
    _find_and_forward(api, handle, conv, x, w, y)
    assert (fake.made(5), fake.made(16)) == (plans, packs)
    alpha, beta = ffi.new("float*", 1.0), ffi.new("float*", 0.0)
    moved = ffi.cast("void*", 0x5000)
    assert api["miopenConvolutionForward"](
        handle, alpha, x, moved, w, moved, conv, perf[0].fwd_algo, beta, y, moved, ffi.NULL,
        perf[0].memory,
    ) == 0  # fmt: skip
    assert (fake.made(5), fake.made(16)) == (plans, packs + 1)
    # A scaled output (beta 1) is the legacy call's.
    assert api["miopenConvolutionForward"](
        handle, alpha, x, moved, w, moved, conv, perf[0].fwd_algo, alpha, y, moved, ffi.NULL,
        perf[0].memory,
    ) == 0  # fmt: skip
    assert len(fake.named("cudnnConvolutionForward")) == 1
    # The handle's destruction destroys every backend descriptor made for it.
    assert api["miopenDestroy"](handle) == 0
    destroyed = fake.named("cudnnBackendDestroyDescriptor")
    assert len(destroyed) == len(fake.named("cudnnBackendCreateDescriptor"))


def test_graph_path_falls_back_to_the_legacy_calls(graph_setup) -> None:  # type: ignore[no-untyped-def]
    fake, api, handle, conv, x, w, y = graph_setup
    # An engine that does not finalize is skipped; one needing more workspace than the call
    # has too; none left: the legacy call runs the problem.
    fake.plan_status, fake.plan_workspace = (3000, 0), 8192
    _find_and_forward(api, handle, conv, x, w, y)
    assert fake.named("cudnnConvolutionForward") and not fake.named("cudnnBackendExecute")
    # A timed Find's algorithm runs as found (the legacy call), and so does f32.
    fake.plan_status, fake.plan_workspace = (0,), 0
    fake.calls.clear()
    _find_and_forward(api, handle, conv, x, w, y, exhaustive=True)
    assert fake.named("cudnnConvolutionForward") and not fake.named("cudnnBackendExecute")
    for desc, dims, strides in (
        (x, (2, 8, 6, 6), (288, 1, 48, 8)),
        (w, (4, 8, 3, 3), (72, 1, 24, 8)),
        (y, (2, 4, 6, 6), (144, 1, 24, 4)),
    ):
        assert api["miopenSetTensorDescriptor"](desc, dc.MIOPEN_FLOAT, 4, _ints(*dims),
                                                _ints(*strides)) == 0  # fmt: skip
    fake.calls.clear()
    _find_and_forward(api, handle, conv, x, w, y)
    assert fake.named("cudnnConvolutionForward") and not fake.made(5)
    # f16: the graph again; a failing execute is the call's status, as MIOpen's.
    for desc, dims, strides in (
        (x, (2, 8, 6, 6), (288, 1, 48, 8)),
        (w, (4, 8, 3, 3), (72, 1, 24, 8)),
        (y, (2, 4, 6, 6), (144, 1, 24, 4)),
    ):
        assert api["miopenSetTensorDescriptor"](desc, dc.MIOPEN_HALF, 4, _ints(*dims),
                                                _ints(*strides)) == 0  # fmt: skip
    fake.status["cudnnBackendExecute"] = 3002
    alpha, beta = ffi.new("float*", 1.0), ffi.new("float*", 0.0)
    px = ffi.cast("void*", 0x7000)
    forward = (handle, alpha, x, px, w, px, conv, 5, beta, y, px, ffi.NULL, 4096)
    assert api["miopenConvolutionForward"](*forward) == dc.NOT_IMPLEMENTED
    assert fake.named("cudnnBackendExecute")
    # A failing backend call while making the graph (NCHW now: another problem): no graph,
    # the legacy call, for good.
    for desc, dims in ((x, (2, 8, 6, 6)), (w, (4, 8, 3, 3)), (y, (2, 4, 6, 6))):
        nchw = (dims[1] * dims[2] * dims[3], dims[2] * dims[3], dims[3], 1)
        assert api["miopenSetTensorDescriptor"](desc, dc.MIOPEN_HALF, 4, _ints(*dims),
                                                _ints(*nchw)) == 0  # fmt: skip
    fake.status = {"cudnnBackendFinalize": 2000}
    fake.calls.clear()
    assert api["miopenConvolutionForward"](*forward) == 0
    fake.status.clear()
    assert api["miopenConvolutionForward"](*forward) == 0
    assert len(fake.named("cudnnConvolutionForward")) == 2
    assert not fake.named("cudnnBackendExecute")

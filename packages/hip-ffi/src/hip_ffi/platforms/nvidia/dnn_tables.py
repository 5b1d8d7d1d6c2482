"""MIOpen's enum values and statuses -> cuDNN 9's, as data (platforms/nvidia/dnn.py uses them).

cuDNN values from nvidia-cudnn-cu13 9.28's cudnn_graph.h / cudnn_ops.h (cuDNN 9 renumbered the
statuses: 1xxx not initialized / versions, 2xxx bad parameters, 3xxx not supported, 4xxx
internal, 5xxx execution; cuDNN 8's small codes are not read, only cuDNN >= 9 is loaded).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from types import MappingProxyType
from typing import Any

from hip_ffi import dnn_constants as dc

#: The oldest cuDNN whose numbering these tables follow (cudnnGetVersion: 90000 = 9.0.0).
MIN_CUDNN_VERSION = 90000

#: miopenDataType_t -> cudnnDataType_t
DATA_TYPE = MappingProxyType(
    {
        dc.MIOPEN_FLOAT: 0,  # CUDNN_DATA_FLOAT
        dc.MIOPEN_DOUBLE: 1,  # CUDNN_DATA_DOUBLE
        dc.MIOPEN_HALF: 2,  # CUDNN_DATA_HALF
        dc.MIOPEN_INT8: 3,  # CUDNN_DATA_INT8
        dc.MIOPEN_INT32: 4,  # CUDNN_DATA_INT32
        dc.MIOPEN_BFLOAT16: 9,  # CUDNN_DATA_BFLOAT16
        dc.MIOPEN_INT64: 10,  # CUDNN_DATA_INT64
    }
)
CUDNN_DATA_FLOAT = 0
CUDNN_DATA_DOUBLE = 1

#: cudnnTensorFormat_t of a filter
CUDNN_TENSOR_NCHW = 0
CUDNN_TENSOR_NHWC = 1
#: cudnnConvolutionMode_t: MIOpen's miopenConvolution is a cross-correlation.
CUDNN_CROSS_CORRELATION = 1
#: cudnnMathType_t: tensor cores for 16-bit inputs; FMA only for f32 (no TF32 rounding of the
#: inputs: MIOpen's f32 convolutions compute in f32, so the surface does on both).
CUDNN_DEFAULT_MATH = 0
CUDNN_TENSOR_OP_MATH = 1
CUDNN_FMA_MATH = 3
#: cudnnNanPropagation_t: max pooling passes NaN through (as torch does).
CUDNN_PROPAGATE_NAN = 1

#: miopenPoolingMode_t -> cudnnPoolingMode_t
POOLING_MODE = MappingProxyType(
    {
        dc.MIOPEN_POOLING_MAX: 0,  # CUDNN_POOLING_MAX
        dc.MIOPEN_POOLING_AVERAGE: 2,  # CUDNN_POOLING_AVERAGE_COUNT_EXCLUDE_PADDING
        dc.MIOPEN_POOLING_AVERAGE_INCLUSIVE: 1,  # CUDNN_POOLING_AVERAGE_COUNT_INCLUDE_PADDING
    }
)

#: cudnnConvolutionFwdAlgo_t -> the miopenConvFwdAlgorithm_t of its family (what Find reports).
FWD_ALGO_FAMILY = MappingProxyType(
    {
        0: 5,  # IMPLICIT_GEMM -> ImplicitGEMM
        1: 5,  # IMPLICIT_PRECOMP_GEMM -> ImplicitGEMM
        2: 0,  # GEMM -> GEMM
        3: 1,  # DIRECT -> Direct
        4: 2,  # FFT -> FFT
        5: 2,  # FFT_TILING -> FFT
        6: 3,  # WINOGRAD -> Winograd
        7: 3,  # WINOGRAD_NONFUSED -> Winograd
    }
)
#: miopenConvFwdAlgorithm_t -> the cuDNN algorithm run when Find did not name one for it.
FWD_ALGO_DEFAULT = MappingProxyType({5: 0, 0: 2, 1: 3, 2: 4, 3: 6})
FWD_ALGO_COUNT = 8

#: cudnnConvolutionBwdDataAlgo_t -> miopenConvBwdDataAlgorithm_t of its family.
BWD_DATA_ALGO_FAMILY = MappingProxyType(
    {
        0: 0,  # ALGO_0 (sums of matrix products) -> GEMM
        1: 5,  # ALGO_1 (implicit GEMM) -> ImplicitGEMM
        2: 2,  # FFT -> FFT
        3: 2,  # FFT_TILING -> FFT
        4: 3,  # WINOGRAD -> Winograd
        5: 3,  # WINOGRAD_NONFUSED -> Winograd
    }
)
BWD_DATA_ALGO_DEFAULT = MappingProxyType({0: 0, 1: 1, 2: 2, 3: 4, 4: 0, 5: 1})
BWD_DATA_ALGO_COUNT = 6


@dataclass(frozen=True)
class Direction:
    """What differs between forward and backward-data convolution in cuDNN's calls: the
    functions, the algorithm tables, and whether the filter comes before the data input."""

    key: str
    heuristic: str
    timed: str
    run: str
    count: int
    families: Mapping[int, int]
    defaults: Mapping[int, int]
    field: str  # of miopenConvAlgoPerf_t
    forward: bool

    def order(self, source: tuple[Any, ...], filter_: tuple[Any, ...]) -> tuple[Any, ...]:
        """The data input's and the filter's arguments in this direction's order."""
        return (*source, *filter_) if self.forward else (*filter_, *source)


FORWARD = Direction(
    "fwd", "cudnnGetConvolutionForwardAlgorithm_v7", "cudnnFindConvolutionForwardAlgorithmEx",
    "cudnnConvolutionForward", FWD_ALGO_COUNT, FWD_ALGO_FAMILY, FWD_ALGO_DEFAULT,
    "fwd_algo", forward=True,
)  # fmt: skip
BACKWARD_DATA = Direction(
    "bwd", "cudnnGetConvolutionBackwardDataAlgorithm_v7",
    "cudnnFindConvolutionBackwardDataAlgorithmEx", "cudnnConvolutionBackwardData",
    BWD_DATA_ALGO_COUNT, BWD_DATA_ALGO_FAMILY, BWD_DATA_ALGO_DEFAULT, "bwd_data_algo",
    forward=False,
)  # fmt: skip


#: cudnnStatus_t rows: (code, cuDNN name, miopenStatus_t name). Codes not listed are mapped by
#: their thousand (CATEGORY).
CUDNN_STATUSES = (
    (0, "CUDNN_STATUS_SUCCESS", "miopenStatusSuccess"),
    (1001, "CUDNN_STATUS_NOT_INITIALIZED", "miopenStatusNotInitialized"),
    (1002, "CUDNN_STATUS_SUBLIBRARY_VERSION_MISMATCH", "miopenStatusVersionMismatch"),
    (1003, "CUDNN_STATUS_SERIALIZATION_VERSION_MISMATCH", "miopenStatusVersionMismatch"),
    (1008, "CUDNN_STATUS_SUBLIBRARY_LOADING_FAILED", "miopenStatusNotInitialized"),
    (2000, "CUDNN_STATUS_BAD_PARAM", "miopenStatusBadParm"),
    (2001, "CUDNN_STATUS_INVALID_VALUE", "miopenStatusInvalidValue"),
    (3000, "CUDNN_STATUS_NOT_SUPPORTED", "miopenStatusNotImplemented"),
    (4000, "CUDNN_STATUS_INTERNAL_ERROR", "miopenStatusInternalError"),
    (4003, "CUDNN_STATUS_INTERNAL_ERROR_HOST_ALLOCATION_FAILED", "miopenStatusAllocFailed"),
    (4004, "CUDNN_STATUS_INTERNAL_ERROR_DEVICE_ALLOCATION_FAILED", "miopenStatusAllocFailed"),
    (5000, "CUDNN_STATUS_EXECUTION_FAILED", "miopenStatusUnknownError"),
)
#: cudnnStatus_t // 1000 -> miopenStatus_t name, for codes without a row.
CATEGORY = MappingProxyType(
    {
        1: "miopenStatusNotInitialized",
        2: "miopenStatusBadParm",
        3: "miopenStatusNotImplemented",
        4: "miopenStatusInternalError",
        5: "miopenStatusUnknownError",
    }
)
_ROWS = {code: dc.MIOPEN_STATUSES[name] for code, _, name in CUDNN_STATUSES}


def miopen_status(cudnn_status: int) -> int:
    """The miopenStatus_t of a cudnnStatus_t."""
    found = _ROWS.get(cudnn_status)
    if found is not None:
        return found
    return dc.MIOPEN_STATUSES[CATEGORY.get(cudnn_status // 1000, "miopenStatusUnknownError")]


#: cuDNN's backend (graph) API, as dnn_graph.py uses it (cudnn_graph.h of cuDNN 9.28; the values
#: are those of 9.0). cudnnBackendDescriptorType_t:
BACKEND_CONVOLUTION = 1
BACKEND_ENGINECFG = 3
BACKEND_ENGINEHEUR = 4
BACKEND_EXECUTION_PLAN = 5
BACKEND_OPERATIONGRAPH = 15
BACKEND_VARIANT_PACK = 16
BACKEND_TENSOR = 17
#: cudnnBackendAttributeType_t
TYPE_HANDLE = 0
TYPE_DATA_TYPE = 1
TYPE_INT64 = 3
TYPE_FLOAT = 4
TYPE_VOID_PTR = 6
TYPE_CONVOLUTION_MODE = 7
TYPE_HEUR_MODE = 8
TYPE_BACKEND_DESCRIPTOR = 15
#: cudnnBackendAttributeName_t
ATTR_CONVOLUTION_COMP_TYPE = 100
ATTR_CONVOLUTION_CONV_MODE = 101
ATTR_CONVOLUTION_DILATIONS = 102
ATTR_CONVOLUTION_FILTER_STRIDES = 103
ATTR_CONVOLUTION_POST_PADDINGS = 104
ATTR_CONVOLUTION_PRE_PADDINGS = 105
ATTR_CONVOLUTION_SPATIAL_DIMS = 106
ATTR_ENGINEHEUR_MODE = 200
ATTR_ENGINEHEUR_OPERATION_GRAPH = 201
ATTR_ENGINEHEUR_RESULTS = 202
ATTR_EXECUTION_PLAN_HANDLE = 400
ATTR_EXECUTION_PLAN_ENGINE_CONFIG = 401
ATTR_EXECUTION_PLAN_WORKSPACE_SIZE = 402
ATTR_OPERATIONGRAPH_HANDLE = 800
ATTR_OPERATIONGRAPH_OPS = 801
ATTR_TENSOR_BYTE_ALIGNMENT = 900
ATTR_TENSOR_DATA_TYPE = 901
ATTR_TENSOR_DIMENSIONS = 902
ATTR_TENSOR_STRIDES = 903
ATTR_TENSOR_UNIQUE_ID = 906
ATTR_VARIANT_PACK_UNIQUE_IDS = 1000
ATTR_VARIANT_PACK_DATA_POINTERS = 1001
ATTR_VARIANT_PACK_WORKSPACE = 1003
#: cudnnBackendHeurMode_t: the decision-tree heuristics (cudnn-frontend's default).
HEUR_MODE_A = 3


@dataclass(frozen=True)
class GraphOperation:
    """A convolution direction as a backend operation: its descriptor type and the attribute
    names of alpha, beta, the convolution and the forward convolution's x, w and y (backward
    data writes x from y)."""

    descriptor: int
    alpha: int
    beta: int
    conv: int
    x: int
    w: int
    y: int


#: Direction.key -> its operation (CUDNN_BACKEND_OPERATION_CONVOLUTION_FORWARD_DESCRIPTOR and
#: _BACKWARD_DATA_DESCRIPTOR).
GRAPH_OPERATIONS = MappingProxyType(
    {
        "fwd": GraphOperation(10, 700, 701, 702, x=704, w=703, y=705),
        "bwd": GraphOperation(12, 706, 707, 708, x=710, w=709, y=711),
    }
)

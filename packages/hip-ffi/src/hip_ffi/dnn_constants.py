"""The values of the DNN surface's enums (MIOpen's numbering on every platform).

From miopen.h of libmiopen-dev 6.4.3 and 7.2.4 (identical for these). The nvidia platform
maps them to cuDNN's (platforms/nvidia/dnn_tables.py); the cpu platform reads them as is.
"""

from __future__ import annotations

from types import MappingProxyType

#: miopenStatus_t
MIOPEN_STATUSES = MappingProxyType(
    {
        "miopenStatusSuccess": 0,
        "miopenStatusNotInitialized": 1,
        "miopenStatusInvalidValue": 2,
        "miopenStatusBadParm": 3,
        "miopenStatusAllocFailed": 4,
        "miopenStatusInternalError": 5,
        "miopenStatusNotImplemented": 6,
        "miopenStatusUnknownError": 7,
        "miopenStatusUnsupportedOp": 8,
        "miopenStatusGpuOperationsSkipped": 9,
        "miopenStatusVersionMismatch": 10,
    }
)
#: code -> name: what MIOpen's own miopenGetErrorString answers for each code.
MIOPEN_STATUS_NAMES = MappingProxyType({code: name for name, code in MIOPEN_STATUSES.items()})
#: What miopenGetErrorString answers for a code it does not know.
MIOPEN_UNKNOWN_STATUS_TEXT = "Unknown error status"

SUCCESS = 0
NOT_INITIALIZED = 1
INVALID_VALUE = 2
BAD_PARM = 3
ALLOC_FAILED = 4
INTERNAL_ERROR = 5
NOT_IMPLEMENTED = 6
UNKNOWN_ERROR = 7

#: miopenDataType_t
MIOPEN_HALF = 0
MIOPEN_FLOAT = 1
MIOPEN_INT32 = 2
MIOPEN_INT8 = 3
MIOPEN_BFLOAT16 = 5
MIOPEN_DOUBLE = 6
MIOPEN_INT64 = 9
#: Bytes per element of each data type.
MIOPEN_TYPE_SIZES = MappingProxyType(
    {
        MIOPEN_HALF: 2,
        MIOPEN_FLOAT: 4,
        MIOPEN_INT32: 4,
        MIOPEN_INT8: 1,
        MIOPEN_BFLOAT16: 2,
        MIOPEN_DOUBLE: 8,
        MIOPEN_INT64: 8,
    }
)

#: miopenConvolutionMode_t (miopenConvolution is a cross-correlation, as in every framework)
MIOPEN_CONVOLUTION = 0
MIOPEN_TRANSPOSE = 1

#: miopenConvFwdAlgorithm_t
CONV_FWD_ALGOS = MappingProxyType(
    {
        "miopenConvolutionFwdAlgoGEMM": 0,
        "miopenConvolutionFwdAlgoDirect": 1,
        "miopenConvolutionFwdAlgoFFT": 2,
        "miopenConvolutionFwdAlgoWinograd": 3,
        "miopenConvolutionFwdAlgoImplicitGEMM": 5,
    }
)
#: miopenConvBwdDataAlgorithm_t
CONV_BWD_DATA_ALGOS = MappingProxyType(
    {
        "miopenConvolutionBwdDataAlgoGEMM": 0,
        "miopenConvolutionBwdDataAlgoDirect": 1,
        "miopenConvolutionBwdDataAlgoFFT": 2,
        "miopenConvolutionBwdDataAlgoWinograd": 3,
        "miopenTransposeBwdDataAlgoGEMM": 4,
        "miopenConvolutionBwdDataAlgoImplicitGEMM": 5,
    }
)

#: miopenPoolingMode_t: miopenPoolingAverage divides by the window's positions inside the
#: input (padding excluded); miopenPoolingAverageInclusive by the whole window.
MIOPEN_POOLING_MAX = 0
MIOPEN_POOLING_AVERAGE = 1
MIOPEN_POOLING_AVERAGE_INCLUSIVE = 2

#: miopenIndexType_t (of max pooling's index workspace)
MIOPEN_INDEX_UINT8 = 0
MIOPEN_INDEX_UINT16 = 1
MIOPEN_INDEX_UINT32 = 2
MIOPEN_INDEX_UINT64 = 3
#: miopenPoolingWorkspaceIndexMode_t
MIOPEN_POOLING_WORKSPACE_INDEX_MASK = 0
MIOPEN_POOLING_WORKSPACE_INDEX_IMAGE = 1

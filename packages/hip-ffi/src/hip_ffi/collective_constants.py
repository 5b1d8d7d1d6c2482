"""RCCL / NCCL numbering: ncclResult_t, ncclDataType_t, ncclRedOp_t (the same on every platform).

NCCL's nccl.h (2.10 and later: bfloat16 = 9, ncclAvg = 4) and RCCL's rccl.h number these
alike, so no platform translates them. The 8-bit float types (10, 11) are not part of hip-ffi's
surface: RCCL and NCCL spell them differently and the cpu platform does not reduce them.
"""

from __future__ import annotations

#: ncclResult_t.
RESULTS = {
    "ncclSuccess": 0,
    "ncclUnhandledCudaError": 1,
    "ncclSystemError": 2,
    "ncclInternalError": 3,
    "ncclInvalidArgument": 4,
    "ncclInvalidUsage": 5,
    "ncclRemoteError": 6,
    "ncclInProgress": 7,
}
RESULT_NAMES = {code: name for name, code in RESULTS.items()}
SUCCESS = RESULTS["ncclSuccess"]
SYSTEM_ERROR = RESULTS["ncclSystemError"]
INTERNAL_ERROR = RESULTS["ncclInternalError"]
INVALID_ARGUMENT = RESULTS["ncclInvalidArgument"]
INVALID_USAGE = RESULTS["ncclInvalidUsage"]
REMOTE_ERROR = RESULTS["ncclRemoteError"]

#: What ncclGetErrorString answers (NCCL's wording), for the cpu platform's own.
MESSAGES = {
    0: "no error",
    1: "unhandled cuda error (run with NCCL_DEBUG=INFO for details)",
    2: "unhandled system error (run with NCCL_DEBUG=INFO for details)",
    3: "internal error - please report this issue to the NCCL developers",
    4: "invalid argument (run with NCCL_DEBUG=WARN for details)",
    5: "invalid usage (run with NCCL_DEBUG=WARN for details)",
    6: "remote process exited or there was a network error",
    7: "NCCL operation in progress",
}

#: ncclDataType_t by the numpy name of the type (bfloat16: ml_dtypes' name).
DATA_TYPES = {
    "int8": 0,
    "uint8": 1,
    "int32": 2,
    "uint32": 3,
    "int64": 4,
    "uint64": 5,
    "float16": 6,
    "float32": 7,
    "float64": 8,
    "bfloat16": 9,
}
DATA_TYPE_NAMES = {value: name for name, value in DATA_TYPES.items()}
#: Bytes per element of each ncclDataType_t.
ELEMENT_BYTES = {0: 1, 1: 1, 2: 4, 3: 4, 4: 8, 5: 8, 6: 2, 7: 4, 8: 8, 9: 2}

#: ncclRedOp_t (the built-in ones).
REDUCTION_OPS = {"sum": 0, "prod": 1, "max": 2, "min": 3, "avg": 4}
REDUCTION_OP_NAMES = {value: name for name, value in REDUCTION_OPS.items()}


def pack_version(major: int, minor: int, patch: int) -> int:
    """ncclGetVersion's packing (NCCL 2.9 and later): major*10000 + minor*100 + patch."""
    return major * 10_000 + minor * 100 + patch


def unpack_version(code: int) -> tuple[int, int, int]:
    """ncclGetVersion's value as (major, minor, patch); the old packing (major*1000 +
    minor*100 + patch, before 2.9) is told apart by its size."""
    if code < 10_000:
        return code // 1000, code % 1000 // 100, code % 100
    return code // 10_000, code % 10_000 // 100, code % 100

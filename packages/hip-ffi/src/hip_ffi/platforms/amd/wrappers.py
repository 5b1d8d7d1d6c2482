"""What the amd platform wraps where a ROCm or hipBLAS release differs from the surface.

Each wrapper costs one Python call on top of the cffi call; releases whose ABI already matches
bind the cffi function itself (loader.py), so only older releases pay it.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

from hip_ffi import constants
from hip_ffi._ffi import ffi

#: hipDataType -> hipblasDatatype_t, for the gemm-ex ABI of hipBLAS 0 and 1.
_HIPBLAS_V1_DATATYPE = {
    constants.HIP_R_16F: 150,
    constants.HIP_R_32F: 151,
    constants.HIP_R_64F: 152,
    constants.HIP_R_16BF: 168,
}
#: hipblasComputeType_t -> the hipblasDatatype_t that ABI takes as compute type.
_HIPBLAS_V1_COMPUTE = {
    constants.HIPBLAS_COMPUTE_32F: 151,
    constants.HIPBLAS_COMPUTE_32F_FAST_TF32: 151,
    constants.HIPBLAS_COMPUTE_64F: 152,  # HIPBLAS_R_64F: f64 gemm-ex (rocBLAS's dgemm)
}


def hipblas_major(path: str, rocm_major: int) -> int:
    """hipBLAS's major version from its soname (libhipblas.so.N), else from the ROCm release."""
    match = re.search(r"libhipblas\.so\.(\d+)", path)
    if match:
        return int(match.group(1))
    return {5: 1, 6: 2}.get(rocm_major, 3)


def bind_gemm(functions: dict[str, Callable[..., Any]], blas: Any, major: int) -> None:
    """gemm-ex with hipDataType / hipblasComputeType_t arguments, whatever the hipBLAS release.

    hipBLAS 3 takes them under the plain names; hipBLAS 2 exports them as `*_v2` (its plain
    names keep the hipblasDatatype_t ABI); hipBLAS 0 and 1 only have the older ABI, so their
    arguments are translated. `major` is hipBLAS's major version (`hipblas_major`).
    """
    for name, datatype_args, compute_arg in (
        ("hipblasGemmEx", (8, 11, 15), 17),
        ("hipblasGemmStridedBatchedEx", (8, 12, 17), 21),
    ):
        if major >= 3:
            continue  # already bound under the plain name
        try:
            functions[name] = getattr(blas, name + "_v2")
        except (AttributeError, ffi.error):
            functions[name] = _hipblas_v1_gemm(getattr(blas, name), datatype_args, compute_arg)


def rocm5_pointer_attributes(native: Callable[..., int]) -> Callable[..., int]:
    """hipPointerGetAttributes of ROCm 5, answering hipMemoryType in ROCm 6's numbering."""
    renumber = {
        old: constants.MEMORY_TYPES[name] for old, name in constants.MEMORY_TYPES_ROCM5.items()
    }

    def hipPointerGetAttributes(attributes: Any, pointer: Any) -> int:
        status = native(attributes, pointer)
        if status == 0:
            attributes.type = renumber.get(attributes.type, attributes.type)
        return status

    return hipPointerGetAttributes


def _hipblas_v1_gemm(
    native: Callable[..., int], datatype_args: tuple[int, ...], compute_arg: int
) -> Callable[..., int]:
    """Wrap a hipblasDatatype_t-ABI gemm-ex so it takes hipDataType / hipblasComputeType_t."""

    def gemm(*args: Any) -> int:
        converted = list(args)
        try:
            for index in datatype_args:
                converted[index] = _HIPBLAS_V1_DATATYPE[args[index]]
            converted[compute_arg] = _HIPBLAS_V1_COMPUTE[args[compute_arg]]
        except KeyError:
            return constants.HIPBLAS_STATUSES["HIPBLAS_STATUS_INVALID_ENUM"]
        return native(*converted)

    return gemm

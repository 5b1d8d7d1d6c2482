"""The nvidia platform's translation tables: consistent with HIP's constants and complete."""

from __future__ import annotations

import pytest

from hip_ffi import constants
from hip_ffi._ffi import ffi
from hip_ffi.platforms.nvidia import error_codes as errors
from hip_ffi.platforms.nvidia import tables

ERROR_TABLES = {
    "cudaError_t": (errors.CUDART_ERRORS, "cudaError", constants.ERROR_CODES),
    "CUresult": (errors.CURESULT_ERRORS, "CUDA_", constants.ERROR_CODES),
    "nvrtcResult": (errors.NVRTC_RESULTS, "NVRTC_", constants.HIPRTC_RESULTS),
    "cublasStatus_t": (errors.CUBLAS_STATUSES, "CUBLAS_STATUS_", constants.HIPBLAS_STATUSES),
}


@pytest.mark.parametrize("table", ERROR_TABLES)
def test_error_rows_are_unique_and_name_real_hip_codes(table: str) -> None:
    rows, prefix, hip_codes = ERROR_TABLES[table]
    codes = [code for code, _, _ in rows]
    names = [name for _, name, _ in rows]
    assert len(set(codes)) == len(codes), "a CUDA code listed twice"
    assert len(set(names)) == len(names), "a CUDA name listed twice"
    assert codes == sorted(codes), "rows follow the header's order"
    assert all(name.startswith(prefix) or name == "cudaSuccess" for name in names)
    assert [hip for _, _, hip in rows if hip not in hip_codes] == []
    assert rows[0][0] == 0 and hip_codes[rows[0][2]] == 0, "success maps to success"


def test_codes_of_the_same_name_keep_their_number() -> None:
    # HIP numbered hipError_t after cudaError_t: a row pairing two names of the same suffix
    # pairs the same number, except for the texture codes HIP renumbered (911, 912).
    renumbered = {"InvalidTexture", "InvalidChannelDescriptor"}
    same_name = [
        (code, hip)
        for code, name, hip in errors.CUDART_ERRORS
        if name[len("cudaError") :] == hip[len("hipError") :] and hip[8:] not in renumbered
    ]
    assert len(same_name) > 50
    assert [(c, h) for c, h in same_name if constants.ERROR_CODES[h] != c] == []


def test_cuda_numbers_that_hip_reused_are_not_passed_through() -> None:
    # 911/912 are hipErrorInvalidChannelDescriptor/InvalidTexture in HIP, other errors in CUDA.
    assert errors.CUDART_TO_HIP[911] == constants.ERROR_CODES["hipErrorLaunchFailure"]
    assert errors.CUDART_TO_HIP[912] == constants.ERROR_CODES["hipErrorInvalidConfiguration"]
    assert errors.CUDART_TO_HIP[18] == constants.ERROR_CODES["hipErrorInvalidTexture"]
    assert errors.CURESULT_TO_HIP[201] == constants.ERROR_CODES["hipErrorInvalidContext"]
    assert errors.CUDART_TO_HIP[2] == constants.ERROR_CODES["hipErrorOutOfMemory"]


def test_reverse_error_tables_round_trip() -> None:
    for hip, cuda in errors.HIP_TO_CUDART.items():
        assert errors.CUDART_TO_HIP[cuda] == hip
    for hip, nvrtc in errors.HIPRTC_TO_NVRTC.items():
        assert errors.NVRTC_TO_HIPRTC[nvrtc] == hip
    assert errors.HIP_TO_CUDART[constants.ERROR_CODES["hipErrorInvalidTexture"]] == 18
    assert constants.HIPRTC_RESULTS["HIPRTC_ERROR_LINKING"] not in errors.HIPRTC_TO_NVRTC


def test_every_hip_device_attribute_is_classified_exactly_once() -> None:
    groups = [
        set(tables.ATTRIBUTE_TO_CUDA),
        set(tables.ATTRIBUTE_TO_DRIVER),
        set(tables.ATTRIBUTE_CONSTANTS),
        set(tables.ATTRIBUTE_COMPUTED),
        set(tables.ATTRIBUTE_UNSUPPORTED),
    ]
    everything = set().union(*groups)
    assert everything == set(constants.DEVICE_ATTRIBUTES), "classified == HIP's attributes"
    assert sum(len(g) for g in groups) == len(everything), "no attribute in two groups"


def test_attribute_values_are_real_cuda_attributes() -> None:
    assert all(1 <= v <= 160 for v in tables.ATTRIBUTE_TO_CUDA.values())
    assert tables.ATTRIBUTE_TO_CUDA["WarpSize"] == 10  # cudaDevAttrWarpSize
    assert tables.ATTRIBUTE_TO_CUDA["MultiprocessorCount"] == 16
    assert tables.ATTRIBUTE_TO_CUDA["ComputeCapabilityMajor"] == 75
    assert tables.ATTRIBUTE_TO_CUDA["PciDomainID"] == tables.ATTRIBUTE_TO_CUDA["PciDomainId"]


def test_property_fields_exist_in_the_declared_structs() -> None:
    fields = set(dict(ffi.typeof("hipDeviceProp_tR0600").fields))
    fields |= set(dict(ffi.typeof("hipDeviceProp_tR0000").fields))
    assert [name for name in tables.PROPERTY_ATTRIBUTES if name not in fields] == []
    for name, source in tables.PROPERTY_ATTRIBUTES.items():
        if isinstance(source, tuple):  # one attribute per array element
            for struct in ("hipDeviceProp_tR0600", "hipDeviceProp_tR0000"):
                field = dict(ffi.typeof(struct).fields).get(name)
                if field is not None:
                    assert field.type.length == len(source), (struct, name)


def test_blas_enums() -> None:
    assert dict(tables.BLAS_OPERATION) == {111: 0, 112: 1, 113: 2}
    assert tables.BLAS_COMPUTE_TYPE[constants.HIPBLAS_COMPUTE_32F] == 68  # CUBLAS_COMPUTE_32F
    assert tables.BLAS_COMPUTE_TYPE[constants.HIPBLAS_COMPUTE_32F_FAST_TF32] == 77
    assert len(set(tables.BLAS_COMPUTE_TYPE.values())) == len(tables.BLAS_COMPUTE_TYPE)
    assert tables.BLAS_GEMM_ALGO[constants.HIPBLAS_GEMM_DEFAULT] == -1  # CUBLAS_GEMM_DEFAULT
    # hipDataType needs no table because its values are cudaDataType's:
    assert (constants.HIP_R_32F, constants.HIP_R_16F, constants.HIP_R_16BF) == (0, 2, 14)


def test_launch_params_differ_only_in_the_terminator() -> None:
    assert tables.LAUNCH_PARAM[constants.LAUNCH_PARAM_END] == 0
    assert tables.LAUNCH_PARAM[constants.LAUNCH_PARAM_BUFFER_POINTER] == 1
    assert tables.LAUNCH_PARAM[constants.LAUNCH_PARAM_BUFFER_SIZE] == 2


def test_flag_masks_keep_the_flags_cuda_shares() -> None:
    shared_host = (
        constants.HOST_MALLOC_PORTABLE
        | constants.HOST_MALLOC_MAPPED
        | constants.HOST_MALLOC_WRITE_COMBINED
    )
    assert tables.HOST_MALLOC_AMD_ONLY & shared_host == 0
    shared_event = (
        constants.EVENT_BLOCKING_SYNC
        | constants.EVENT_DISABLE_TIMING
        | constants.EVENT_INTERPROCESS
    )
    assert tables.EVENT_AMD_ONLY & shared_event == 0


def test_struct_layouts_shared_with_cuda() -> None:
    # CUlaunchConfig: 7 uint, a stream, an attribute pointer and a uint (56 bytes on LP64);
    # cudaMemPoolProps: 88 bytes; cudaPointerAttributes as of CUDA 13: 88 bytes.
    assert ffi.sizeof("HIP_LAUNCH_CONFIG") == 56
    assert ffi.offsetof("HIP_LAUNCH_CONFIG", "hStream") == 32
    assert ffi.sizeof("hipMemPoolProps") == 88
    assert ffi.sizeof("cudaPointerAttributes") == 88
    # CUdeviceptr (unsigned long long) is declared as a pointer: same size on LP64.
    assert ffi.sizeof("void*") == ffi.sizeof("unsigned long long") == 8

"""Device queries, hiprtc over NVRTC and hipBLAS over cuBLAS, driven by fake CUDA libraries."""

from __future__ import annotations

import ctypes
import signal
from typing import Any

import pytest

from hip_ffi import constants
from hip_ffi._ffi import ffi
from hip_ffi.platforms.nvidia import blas as nvidia_blas
from hip_ffi.platforms.nvidia import device as nvidia_device
from hip_ffi.platforms.nvidia import rtc as nvidia_rtc
from hip_ffi.platforms.nvidia import wrappers

E = constants.ERROR_CODES
A = constants.DEVICE_ATTRIBUTES
RTC = constants.HIPRTC_RESULTS
BLAS = constants.HIPBLAS_STATUSES
#: cudaDeviceAttr -> value of a fake sm_90 device with 132 multiprocessors.
FAKE_ATTRIBUTES = {1: 1024, 2: 1024, 3: 1024, 4: 64, 10: 32, 16: 132, 75: 9, 76: 0, 81: 233472}
FAKE_ATTRIBUTES[139] = (0x2335 << 16) | 0x10DE  # cudaDevAttrGpuPciDeviceId
TOTAL = 150_000_000_000  # bytes, more than INT_MAX


def fake_get_attribute(value: Any, attr: int, device: int) -> int:
    if device != 0:
        return 101  # cudaErrorInvalidDevice
    if attr not in FAKE_ATTRIBUTES:
        return 1  # cudaErrorInvalidValue, as for an attribute this release does not know
    value[0] = FAKE_ATTRIBUTES[attr]
    return 0


def fake_total_mem(size: Any, device: int) -> int:
    size[0] = TOTAL
    return 0


def fake_name(buffer: Any, length: int, device: int) -> int:
    ffi.memmove(buffer, b"Fake H200\0", 10)
    return 0


@pytest.fixture
def state() -> wrappers.DriverState:
    return wrappers.DriverState(lambda _: 0, lambda _: 0)


def attribute(call: Any, name: str, device: int = 0) -> tuple[int, int]:
    value = ffi.new("int*", -1)
    return call(value, A[name], device), int(value[0])


def test_device_attributes(state: wrappers.DriverState) -> None:
    def driver(value: Any, attr: int, device: int) -> int:  # answers with the attribute's number
        value[0] = attr
        return 0

    call = nvidia_device.device_attribute(fake_get_attribute, driver, fake_total_mem, state)
    assert attribute(call, "WarpSize") == (0, 32)
    assert attribute(call, "MultiprocessorCount") == (0, 132)
    assert attribute(call, "PhysicalMultiProcessorCount") == (0, 132)
    assert attribute(call, "MaxSharedMemoryPerMultiprocessor") == (0, 233472)
    assert attribute(call, "TotalGlobalMem") == (0, 2**31 - 1)  # clamped, as ROCm does
    assert attribute(call, "PciChipId") == (0, 0x2335)
    assert attribute(call, "ImageSupport") == (0, 1)
    assert attribute(call, "VirtualMemoryManagementSupported") == (0, 102)  # the driver's
    assert attribute(call, "WarpSize", device=3) == (E["hipErrorInvalidDevice"], -1)
    assert attribute(call, "IsLargeBar") == (E["hipErrorInvalidValue"], -1)
    assert attribute(call, "MaxThreadsDim") == (E["hipErrorInvalidValue"], -1)
    assert state.take_last() == E["hipErrorInvalidValue"]


@pytest.mark.parametrize("prop_type", ["hipDeviceProp_tR0600", "hipDeviceProp_tR0000"])
def test_device_properties(prop_type: str) -> None:
    uuids: list[Any] = []

    def fake_uuid(uuid: Any, device: int) -> int:
        uuids.append(uuid)
        uuid.bytes = b"0123456789abcdef"
        return 0

    def checked(value: Any, attr: int, device: int) -> int:  # HIP codes, as wrapped
        return E["hipErrorInvalidDevice"] if fake_get_attribute(value, attr, device) else 0

    call = nvidia_device.device_properties(
        checked, fake_get_attribute, fake_name, fake_total_mem, fake_uuid, prop_type
    )
    props = ffi.new(prop_type + "*")
    props.warpSize = -7  # poison: every field must be written or zeroed
    assert call(props, 0) == 0
    assert ffi.string(props.name) == b"Fake H200"
    assert ffi.string(props.gcnArchName) == b"sm_90"
    assert props.totalGlobalMem == TOTAL
    assert (props.major, props.minor, props.warpSize) == (9, 0, 32)
    assert props.multiProcessorCount == 132
    assert list(props.maxThreadsDim) == [1024, 1024, 64]
    assert props.maxSharedMemoryPerMultiProcessor == 233472
    assert props.l2CacheSize == 0, "an attribute this release does not know stays zero"
    assert props.arch.hasDoubles == 1 and props.arch.hasWarpShuffle == 1
    if prop_type == "hipDeviceProp_tR0600":
        assert ffi.unpack(props.uuid.bytes, 16) == b"0123456789abcdef"
    else:
        assert props.gcnArch == 90 and uuids == []
    assert call(ffi.new(prop_type + "*"), 5) == E["hipErrorInvalidDevice"]


def test_device_prop_type_is_the_newest_declared() -> None:
    assert nvidia_device.device_prop_type() == "hipDeviceProp_tR0600"


def test_pointer_attributes() -> None:
    host = ffi.new("char[16]")

    def fake(native: Any, pointer: Any) -> int:
        native.type, native.device = constants.MEMORY_TYPES["Host"], 0
        native.devicePointer = native.hostPointer = ffi.cast("void*", host)
        return 0

    def fake_flags(flags: Any, pointer: Any) -> int:
        flags[0] = constants.HOST_MALLOC_MAPPED
        return 0

    call = nvidia_device.pointer_attributes(fake, fake_flags)
    attributes = ffi.new("hipPointerAttribute_t*")
    assert call(attributes, host) == 0
    assert attributes.type == constants.MEMORY_TYPES["Host"]
    assert attributes.allocationFlags == constants.HOST_MALLOC_MAPPED
    assert attributes.isManaged == 0
    failing = nvidia_device.pointer_attributes(lambda a, p: 1, fake_flags)
    assert failing(attributes, host) == E["hipErrorInvalidValue"]


def test_rtc_options() -> None:
    translate = nvidia_rtc.translate_options
    assert translate(["--offload-arch=sm_90", "-O3", "-DX=1"], "sm_80") == [
        "-arch=sm_90",
        "-DX=1",
    ]
    assert translate(["-ffast-math", "-std=c++17"], "sm_90") == [
        "--use_fast_math",
        "-std=c++17",
        "-arch=sm_90",
    ]
    assert translate(["--gpu-architecture=compute_90"], "sm_90") == [
        "--gpu-architecture=compute_90"
    ]
    assert translate([], None) == []


class FakeNvrtc:
    """Answers like libnvrtc for a program compiled for a real (cubin) or virtual arch."""

    def __init__(self, cubin: bytes = b"", ptx: bytes = b"// ptx\0") -> None:
        self.cubin, self.ptx = cubin, ptx
        self.created: dict[str, str] = {}
        self.options: list[str] = []

    def nvrtcCreateProgram(
        self, prog: Any, src: Any, name: Any, n: int, heads: Any, incs: Any
    ) -> int:
        self.created = {
            ffi.string(incs[i]).decode(): ffi.string(heads[i]).decode() for i in range(n)
        }
        return 0

    def nvrtcCompileProgram(self, prog: Any, n: int, options: Any) -> int:
        self.options = [ffi.string(options[i]).decode() for i in range(n)]
        return 6 if "-DBROKEN" in self.options else 0  # NVRTC_ERROR_COMPILATION

    def nvrtcGetCUBINSize(self, prog: Any, size: Any) -> int:
        size[0] = len(self.cubin)
        return 0

    def nvrtcGetCUBIN(self, prog: Any, out: Any) -> int:
        ffi.memmove(out, self.cubin, len(self.cubin))
        return 0

    def nvrtcGetPTXSize(self, prog: Any, size: Any) -> int:
        size[0] = len(self.ptx)
        return 0

    def nvrtcGetPTX(self, prog: Any, out: Any) -> int:
        ffi.memmove(out, self.ptx, len(self.ptx))
        return 0

    def nvrtcGetErrorString(self, code: int) -> Any:
        return ffi.NULL

    nvrtcVersion = nvrtcDestroyProgram = nvrtcGetProgramLogSize = nvrtcGetProgramLog = staticmethod(
        lambda *args: 0
    )
    nvrtcAddNameExpression = nvrtcGetLoweredName = nvrtcVersion


def _code(rtc: dict[str, Any]) -> bytes:
    size = ffi.new("size_t*")
    assert rtc["hiprtcGetCodeSize"](ffi.NULL, size) == 0
    code = ffi.new("char[]", size[0])
    assert rtc["hiprtcGetCode"](ffi.NULL, code) == 0
    return ffi.buffer(code, size[0])[:]


def test_rtc_program_gets_hip_headers_translated_options_and_cubin() -> None:
    nvrtc = FakeNvrtc(cubin=b"\x7fELF-cubin")
    rtc = nvidia_rtc.bind(nvrtc, lambda: "sm_90", "/opt/cuda/include")
    program = ffi.new("hiprtcProgram*")
    assert rtc["hiprtcCreateProgram"](program, b"src", b"k.hip", 0, ffi.NULL, ffi.NULL) == 0
    assert "__HIP_PLATFORM_NVIDIA__" in nvrtc.created["hip/hip_runtime.h"]
    assert "<cuda_fp16.h>" in nvrtc.created["hip/hip_fp16.h"]
    assert "__nv_bfloat16 __hip_bfloat16" in nvrtc.created["hip/hip_bf16.h"]
    options = [ffi.new("char[]", b"--offload-arch=sm_90a")]
    assert rtc["hiprtcCompileProgram"](program[0], 1, ffi.new("const char*[]", options)) == 0
    assert nvrtc.options == [
        "-arch=sm_90a", "-I/opt/cuda/include", "--pre-include=hip/hip_runtime.h"
    ]  # fmt: skip
    assert _code(rtc) == b"\x7fELF-cubin"


def test_rtc_callers_header_wins_and_virtual_arch_gives_ptx() -> None:
    nvrtc = FakeNvrtc()
    rtc = nvidia_rtc.bind(nvrtc, lambda: None)
    mine = [ffi.new("char[]", b"// mine")], [ffi.new("char[]", b"hip/hip_runtime.h")]
    headers, names = (ffi.new("const char*[]", x) for x in mine)
    assert rtc["hiprtcCreateProgram"](ffi.new("hiprtcProgram*"), b"s", b"n", 1, headers, names) == 0
    assert nvrtc.created["hip/hip_runtime.h"] == "// mine"
    stand_ins = {"hip/hip_runtime.h", "hip/hip_fp16.h", "hip/hip_bf16.h"}
    assert set(nvrtc.created) == stand_ins | {"hip/hip_cooperative_groups.h"}
    assert rtc["hiprtcCompileProgram"](ffi.NULL, 0, ffi.NULL) == 0
    assert nvrtc.options == ["--pre-include=hip/hip_runtime.h"]  # as hiprtc pre-includes
    assert _code(rtc) == b"// ptx\0"
    broken = ffi.new("const char*[]", [ffi.new("char[]", b"-DBROKEN")])
    assert rtc["hiprtcCompileProgram"](ffi.NULL, 1, broken) == RTC["HIPRTC_ERROR_COMPILATION"]
    linking = RTC["HIPRTC_ERROR_LINKING"]
    assert ffi.string(rtc["hiprtcGetErrorString"](linking)) == b"HIPRTC_ERROR_LINKING"


class _SigAction(ctypes.Structure):
    # struct sigaction as glibc lays it out on Linux (x86-64 and aarch64).
    _fields_ = (
        ("handler", ctypes.c_void_p),
        ("mask", ctypes.c_ulong * 16),
        ("flags", ctypes.c_int),
        ("restorer", ctypes.c_void_p),
    )


def _sigint_flags() -> int:
    action = _SigAction()
    libc = ctypes.CDLL(None, use_errno=True)
    assert libc.sigaction(signal.SIGINT, None, ctypes.byref(action)) == 0
    return int(action.flags)


def test_rtc_compile_gives_sigint_back_python_flags() -> None:
    # NVRTC leaves Python's SIGINT handler re-installed with SA_RESTART (CUDA 13), after which
    # blocking waits never return to run KeyboardInterrupt. The fake does the same.
    sa_restart = 0x10000000  # <signal.h> on Linux

    class RestartingNvrtc(FakeNvrtc):
        def nvrtcCompileProgram(self, prog: Any, n: int, options: Any) -> int:
            signal.siginterrupt(signal.SIGINT, False)
            assert _sigint_flags() & sa_restart
            return super().nvrtcCompileProgram(prog, n, options)

    handler = signal.getsignal(signal.SIGINT)
    rtc = nvidia_rtc.bind(RestartingNvrtc(), lambda: "sm_90")
    try:
        assert rtc["hiprtcCompileProgram"](ffi.NULL, 0, ffi.NULL) == 0
        assert not _sigint_flags() & sa_restart
        assert signal.getsignal(signal.SIGINT) is handler
    finally:
        signal.signal(signal.SIGINT, handler)


class FakeCublas:
    def __init__(self) -> None:
        self.calls: list[tuple[Any, ...]] = []

    def cublasGemmEx(self, *args: Any) -> int:
        self.calls.append(args)
        return 0

    def cublasGemmStridedBatchedEx(self, *args: Any) -> int:
        self.calls.append(args)
        return 13  # CUBLAS_STATUS_EXECUTION_FAILED

    def cublasSgemm_v2(self, *args: Any) -> int:
        self.calls.append(("Sgemm", *args))
        return 0

    cublasCreate_v2 = cublasDestroy_v2 = cublasSetStream_v2 = cublasGetStream_v2 = staticmethod(
        lambda *args: 3  # CUBLAS_STATUS_ALLOC_FAILED
    )
    cublasSetWorkspace_v2 = cublasDgemm_v2 = cublasCreate_v2


def test_blas_translates_enums_and_statuses() -> None:
    cublas = FakeCublas()
    blas = nvidia_blas.bind(cublas)
    a, b, c = constants.HIP_R_16BF, constants.HIP_R_16BF, constants.HIP_R_32F
    args = (1, 2, 3, "alpha", "A", a, 1, "B", b, 3, "beta", "C", c, 1)
    status = blas["hipblasGemmEx"](
        "h", constants.HIPBLAS_OP_N, constants.HIPBLAS_OP_T, *args,
        constants.HIPBLAS_COMPUTE_32F, constants.HIPBLAS_GEMM_DEFAULT,
    )  # fmt: skip
    assert status == 0
    assert cublas.calls[-1] == ("h", 0, 1, *args, 68, -1)
    bad = blas["hipblasGemmEx"]("h", 0, 0, *args, constants.HIPBLAS_COMPUTE_32F, 160)
    assert bad == BLAS["HIPBLAS_STATUS_INVALID_ENUM"] and len(cublas.calls) == 1
    batched = blas["hipblasGemmStridedBatchedEx"](
        "h", constants.HIPBLAS_OP_C, constants.HIPBLAS_OP_N, 1, 2, 3,
        "alpha", "A", a, 1, 10, "B", b, 3, 20, "beta", "C", c, 1, 30, 4,
        constants.HIPBLAS_COMPUTE_32F_FAST_TF32, constants.HIPBLAS_GEMM_DEFAULT,
    )  # fmt: skip
    assert batched == BLAS["HIPBLAS_STATUS_EXECUTION_FAILED"]
    assert cublas.calls[-1][1:3] == (2, 0) and cublas.calls[-1][-2:] == (77, -1)
    assert blas["hipblasCreate"](ffi.new("hipblasHandle_t*")) == BLAS["HIPBLAS_STATUS_ALLOC_FAILED"]


def test_blas_sends_f32_products_computed_in_f32_to_the_typed_entry() -> None:
    """hipblasGemmEx of f32 operands, compute 32F, the default algorithm: cublasSgemm_v2 (the
    same product, fewer arguments and less of cuBLAS's own host work); f32 with TF32 compute,
    or mixed types, stay cublasGemmEx."""
    cublas = FakeCublas()
    blas = nvidia_blas.bind(cublas)
    f32 = constants.HIP_R_32F
    args = (1, 2, 3, "alpha", "A", f32, 1, "B", f32, 3, "beta", "C", f32, 1)
    op_n, op_t = constants.HIPBLAS_OP_N, constants.HIPBLAS_OP_T
    algo = constants.HIPBLAS_GEMM_DEFAULT
    assert blas["hipblasGemmEx"]("h", op_t, op_n, *args, constants.HIPBLAS_COMPUTE_32F, algo) == 0
    typed = ("Sgemm", "h", 1, 0, 1, 2, 3, "alpha", "A", 1, "B", 3, "beta", "C", 1)
    assert cublas.calls[-1] == typed
    tf32 = constants.HIPBLAS_COMPUTE_32F_FAST_TF32
    assert blas["hipblasGemmEx"]("h", op_n, op_n, *args, tf32, algo) == 0
    assert cublas.calls[-1] == ("h", 0, 0, *args, 77, -1)
    mixed = (*args[:5], constants.HIP_R_16BF, *args[6:])
    assert blas["hipblasGemmEx"]("h", op_n, op_n, *mixed, constants.HIPBLAS_COMPUTE_32F, algo) == 0
    assert cublas.calls[-1] == ("h", 0, 0, *mixed, 68, -1)

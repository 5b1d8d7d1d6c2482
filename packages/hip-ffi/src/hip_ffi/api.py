"""HipApi: the one object through which the layers above call HIP, whatever the platform."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from hip_ffi import surface
from hip_ffi.code_objects import Image
from hip_ffi.errors import FunctionUnavailableError


class Unavailable:
    """Stands in for a function a platform cannot provide; calling it says why."""

    __slots__ = ("name", "reason")

    def __init__(self, name: str, reason: str) -> None:
        self.name = name
        self.reason = reason

    def __call__(self, *args: Any) -> Any:
        raise FunctionUnavailableError(f"{self.name} is unavailable: {self.reason}")

    def __repr__(self) -> str:
        return f"<unavailable {self.name}: {self.reason}>"


@dataclass(frozen=True)
class PlatformTraits:
    """What the layers above need to know of a platform without naming it.

    Attributes:
        dlpack_device_type: the DLDeviceType of its device memory (dlpack.h): kDLROCM (10) on
            amd, kDLCUDA (2) on nvidia, kDLCPU (1) on cpu, where device memory is host memory.
        default_stream_handle: the integer a stream-taking protocol (DLPack's `stream=`, the CUDA
            Array Interface's `stream`) uses for the default stream: CUDA's legacy stream is 1
            (0 is ambiguous there); ROCm's and the cpu platform's is 0.
        cuda_array_interface: whether `__cuda_array_interface__` applies (CUDA consumers such as
            CuPy and Numba can take the memory): nvidia only.
        host_memory_is_device_memory: device pointers are host addresses (the cpu platform), so
            a consumer reads them on the host after synchronizing, with no stream to order.
        blas_chooses_on_host: each BLAS call picks a device kernel on the host and launches it
            (cuBLAS; rocBLAS or hipBLASLt under hipBLAS), which costs host time well beyond
            a launch: a 64³ cublasSgemm about 9 µs on the H200's host, a launch 2-3 µs
            (rocBLAS's cost is not measured here: no AMD GPU). False on cpu, whose GEMM is
            the runtime library's own loop on the stream.
    """

    dlpack_device_type: int
    default_stream_handle: int
    cuda_array_interface: bool
    host_memory_is_device_memory: bool
    blas_chooses_on_host: bool


#: One row per platform; `HipApi.traits` is its platform's row.
PLATFORM_TRAITS = {
    "amd": PlatformTraits(
        10, 0, cuda_array_interface=False, host_memory_is_device_memory=False,
        blas_chooses_on_host=True,
    ),
    "nvidia": PlatformTraits(
        2, 1, cuda_array_interface=True, host_memory_is_device_memory=False,
        blas_chooses_on_host=True,
    ),
    "cpu": PlatformTraits(
        1, 0, cuda_array_interface=False, host_memory_is_device_memory=True,
        blas_chooses_on_host=False,
    ),
}  # fmt: skip


class HipApi:
    """The HIP runtime, hiprtc and hipBLAS functions of one platform, under their HIP names.

    Every name in `hip_ffi.surface.ALL` is an attribute holding a callable that takes the C
    arguments declared in `cdef/` (cffi objects from `self.ffi`, Python ints and bytes) and
    returns the C result: a hipError_t / hiprtcResult / hipblasStatus_t integer in HIP's own
    numbering (`hip_ffi.constants`), or a `const char*` cdata for the error-string functions.
    On the amd platform most attributes *are* the cffi function objects, so a call costs
    exactly one cffi call.

    Attributes besides the functions:
        platform: "amd", "nvidia" or "cpu".
        ffi: the cffi FFI that declares every type (use it for `new`, `cast`, `string`...).
        runtime_version: what hipRuntimeGetVersion reports (ROCm: major*10_000_000 +
            minor*100_000 + patch; nvidia: CUDA's runtime version, e.g. 13000).
        platform_version: a human-readable release string ("ROCm 5.2.21153", "CUDA 13.0").
        libraries: role ("hip runtime", "hiprtc", "hipblas", ...) -> path that was loaded.
        device_prop_type: the struct `hipGetDeviceProperties` fills on this platform
            ("hipDeviceProp_tR0600" or "hipDeviceProp_tR0000").
        traits: the platform's `PlatformTraits` (DLPack device type, default stream handle,
            CUDA Array Interface), so that no layer above hip-ffi has to name a platform.

    Besides the C functions, two platform facts are methods: `check_code_object(image)` (is
    this a whole code object for this platform, before hipModuleLoadData reads it) and
    `error_detail(code)` (what the platform knows about the last asynchronous failure).
    """

    platform: str
    ffi: Any
    runtime_version: int
    platform_version: str
    libraries: dict[str, str]
    device_prop_type: str
    traits: PlatformTraits

    def __init__(
        self,
        *,
        platform: str,
        ffi: Any,
        functions: Mapping[str, Callable[..., Any]],
        runtime_version: int,
        platform_version: str,
        libraries: Mapping[str, str],
        device_prop_type: str,
        code_object_check: Callable[[Image], tuple[int, str]],
        keep_alive: tuple[Any, ...] = (),
        natives: Mapping[str, Callable[..., Any]] | None = None,
        error_detail: Callable[[int], str] | None = None,
    ) -> None:
        missing = [name for name in surface.ALL if name not in functions]
        if missing:
            raise TypeError(f"platform {platform!r} does not define {', '.join(missing)}")
        self.platform = platform
        self.ffi = ffi
        self.runtime_version = runtime_version
        self.platform_version = platform_version
        self.libraries = dict(libraries)
        self.device_prop_type = device_prop_type
        self.traits = PLATFORM_TRAITS[platform]
        # The opened libraries: in cffi's ABI mode a bound function does not keep its library
        # open, and a library object that is collected is dlclose()d under its functions.
        self._keep_alive = keep_alive
        self._natives = dict(natives or {})
        self._code_object_check = code_object_check
        self._error_detail = error_detail
        # Plain instance attributes: `hip.hipMalloc` is one dict lookup, no indirection.
        self.__dict__.update(functions)

    def fast(self, name: str) -> Callable[..., Any]:
        """The cheapest callable for a hot path: the native entry point where the surface one
        wraps it (nvidia's launch), else the surface function itself.

        A native entry returns 0 on success like the surface one, but a failure status is the
        platform's own and nothing else is done (no context recovery). So call it, and on a
        non-zero status call the surface function with the same arguments for HIP's status:
        that is only safe for calls where a failure has no effect, such as a launch.
        """
        return self._natives.get(name) or getattr(self, name)

    def check_code_object(self, image: Image) -> tuple[int, str]:
        """Whether `image` is a whole code object this platform loads: (0, "") or
        (hipErrorInvalidImage / hipErrorNoBinaryForGpu, why), reading only inside `image`.

        hipModuleLoadData takes no size (the loader reads it from the image), so call this on
        the bytes first: a truncated or corrupt image would make the loader read past them.
        What each platform accepts is in `hip_ffi.code_objects`.
        """
        return self._code_object_check(image)

    def error_detail(self, code: int) -> str:
        """What the platform knows of the last failure `code` that a synchronize returned on
        this thread (the cpu platform: the kernel, block, thread and address of a bad access),
        or "" when it knows nothing more than the code."""
        return self._error_detail(code) if self._error_detail is not None else ""

    def has(self, name: str) -> bool:
        """True when `name` is provided here (not an `Unavailable` stand-in)."""
        return not isinstance(getattr(self, name, None), Unavailable)

    def unavailable(self) -> dict[str, str]:
        """Every surface function this platform lacks, with the reason."""
        return {
            name: fn.reason
            for name in surface.ALL
            if isinstance(fn := getattr(self, name), Unavailable)
        }

    def __getattr__(self, name: str) -> Any:
        # Only reached for names that are not set: give a pointed message, not a bare KeyError.
        raise AttributeError(f"{name!r} is not part of the hip_ffi surface (see hip_ffi.surface)")

    def __repr__(self) -> str:
        return f"<HipApi {self.platform} {self.platform_version}>"

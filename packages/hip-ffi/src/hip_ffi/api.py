"""HipApi: the one object through which the layers above call HIP, whatever the platform."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from hip_ffi import surface
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
    """

    platform: str
    ffi: Any
    runtime_version: int
    platform_version: str
    libraries: dict[str, str]
    device_prop_type: str

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
        keep_alive: tuple[Any, ...] = (),
        natives: Mapping[str, Callable[..., Any]] | None = None,
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
        # The opened libraries: in cffi's ABI mode a bound function does not keep its library
        # open, and a library object that is collected is dlclose()d under its functions.
        self._keep_alive = keep_alive
        self._natives = dict(natives or {})
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

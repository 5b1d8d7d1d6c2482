"""Why a platform, a library or a function could not be provided.

These are load-time failures of hip_ffi itself. Errors *returned* by HIP calls are plain
hipError_t integers at this layer; hip-core turns them into its HipError hierarchy. The one
exception is HipStatusError, raised by hip_ffi's own helpers that make calls for you
(`hip_ffi.device_properties`).
"""

from __future__ import annotations

from collections.abc import Sequence


class HipFfiError(RuntimeError):
    """Base class of everything hip_ffi raises."""


class LibraryNotFoundError(HipFfiError, OSError):
    """No candidate file of a library could be opened; `tried` lists each with its reason."""

    def __init__(self, role: str, tried: Sequence[tuple[str, str]], hint: str = "") -> None:
        self.role = role
        self.tried = list(tried)
        lines = [f"could not load the {role}; tried:"]
        lines += [f"  {path}: {reason}" for path, reason in self.tried]
        if hint:
            lines.append(hint)
        super().__init__("\n".join(lines))


class PlatformUnavailableError(HipFfiError):
    """The requested platform cannot be used, or detection found none; says why for each."""

    def __init__(self, reasons: dict[str, str]) -> None:
        self.reasons = dict(reasons)
        lines = ["no HIP platform is available:"]
        lines += [f"  {name}: {why}" for name, why in self.reasons.items()]
        super().__init__("\n".join(lines))


class PlatformNotInstalledError(HipFfiError, ImportError):
    """A platform that is a distribution of its own (cpu: hip-cpu) is not installed.

    hip-ffi holds the bindings; a platform that is a whole runtime ships separately and is found
    through the `hip_ffi.platforms` entry point group (hip_ffi.selection).
    """

    def __init__(self, platform: str, distribution: str) -> None:
        self.platform = platform
        self.distribution = distribution
        super().__init__(
            f"the {platform} platform is the {distribution} distribution, which is not "
            f"installed: pip install {distribution}"
        )


class FunctionUnavailableError(HipFfiError):
    """A function of the surface that this platform or library release does not provide."""


class HipStatusError(HipFfiError):
    """A HIP call made by a hip_ffi helper failed.

    Attributes: `code` (the hipError_t, HIP's numbering), `call` (the failing call, e.g.
    "hipGetDeviceProperties"), `name` (the code's name, e.g. "hipErrorInvalidDevice").
    """

    def __init__(self, code: int, call: str) -> None:
        from hip_ffi.constants import ERROR_NAMES

        self.code = code
        self.call = call
        self.name = ERROR_NAMES.get(code, f"hipError {code}")
        super().__init__(f"{call} failed: {self.name} ({code})")

"""One HipError hierarchy for every failing HIP, hiprtc and hipBLAS call, built from one table.

    try:
        buffer = device.allocate(1 << 50)
    except HipOutOfMemoryError as error:
        error.code, error.name, error.api   # 2, 'hipErrorOutOfMemory', 'hipMalloc'
        error.recoverable                   # True: the process can go on

`check(status, api)` is the one checker every module uses: it returns at once on success and
raises the class the table assigns to the code otherwise (`check_done` for queries, where "not
ready" is an answer).
"""

from __future__ import annotations

from hip_core import _hip
from hip_ffi import constants


class HipError(RuntimeError):
    """A HIP call failed.

    Attributes:
        code: the status the call returned (hipError_t, hiprtcResult or hipblasStatus_t).
        name: its symbolic name ("hipErrorOutOfMemory").
        api: the call that failed ("hipMalloc").
        recoverable: False for errors that leave the device context unusable (illegal address,
            launch failure, assert): HIP reports them again on every later call.
    """

    def __init__(self, code: int, name: str, api: str, recoverable: bool, detail: str = "") -> None:
        self.code = code
        self.name = name
        self.api = api
        self.recoverable = recoverable
        message = f"{api} failed: {name} ({code})"
        if detail:
            message += f": {detail}"
        super().__init__(message)


class HipOutOfMemoryError(HipError, MemoryError):
    """Device (or pinned host) memory is exhausted."""


class HipInvalidValueError(HipError, ValueError):
    """An argument the runtime rejected."""


class HipNotReadyError(HipError):
    """Work is still pending (a query, not a failure, when polling)."""


class HipNoDeviceError(HipError, ValueError):
    """No device is visible to the runtime. Also a ValueError, as `Device(i)` raised for a
    missing device before, so `except ValueError` keeps catching it."""


class HipLaunchError(HipError):
    """A kernel could not be launched or failed while running."""


class HipCompileError(HipError):
    """Run-time compilation failed; `log` holds the compiler's full output."""

    def __init__(self, code: int, name: str, api: str, recoverable: bool, log: str = "") -> None:
        self.log = log
        super().__init__(code, name, api, recoverable, f"\n{log}" if log else "")


class HipblasError(HipError):
    """A hipBLAS call failed."""


#: The table: (status name, class, recoverable). Names not listed are plain, recoverable HipError.
_ERROR_TABLE: tuple[tuple[str, type[HipError], bool], ...] = (
    ("hipErrorOutOfMemory", HipOutOfMemoryError, True),
    ("hipErrorInvalidValue", HipInvalidValueError, True),
    ("hipErrorInvalidDevicePointer", HipInvalidValueError, True),
    ("hipErrorInvalidMemcpyDirection", HipInvalidValueError, True),
    ("hipErrorInvalidHandle", HipInvalidValueError, True),
    ("hipErrorInvalidDevice", HipInvalidValueError, True),
    ("hipErrorNotReady", HipNotReadyError, True),
    ("hipErrorNoDevice", HipNoDeviceError, True),
    ("hipErrorInvalidConfiguration", HipLaunchError, True),
    ("hipErrorLaunchOutOfResources", HipLaunchError, True),
    ("hipErrorInvalidDeviceFunction", HipLaunchError, True),
    ("hipErrorCooperativeLaunchTooLarge", HipLaunchError, True),
    # Sticky errors: the context is corrupted and every later call reports them again.
    ("hipErrorLaunchFailure", HipLaunchError, False),
    ("hipErrorIllegalAddress", HipLaunchError, False),
    ("hipErrorLaunchTimeOut", HipLaunchError, False),
    ("hipErrorAssert", HipLaunchError, False),
    ("hipErrorECCNotCorrectable", HipError, False),
    ("hipErrorContextIsDestroyed", HipError, False),
)
_BY_CODE: dict[int, tuple[type[HipError], bool]] = {
    constants.ERROR_CODES[name]: (cls, recoverable) for name, cls, recoverable in _ERROR_TABLE
}
_NOT_READY = constants.ERROR_CODES["hipErrorNotReady"]
_HIPRTC_NAMES = {code: name for name, code in constants.HIPRTC_RESULTS.items()}
_HIPBLAS_NAMES = {code: name for name, code in constants.HIPBLAS_STATUSES.items()}


def error_for(status: int, api: str, detail: str = "") -> HipError:
    """The HipError subclass instance for a failing hipError_t `status` of call `api`.

    Without a `detail`, what the platform knows about the failure is added (the cpu platform
    names the kernel, block and thread of a bad access); on an error path only, so it costs a
    successful call nothing."""
    cls, recoverable = _BY_CODE.get(status, (HipError, True))
    name = constants.ERROR_NAMES.get(status, f"hipError({status})")
    if not detail and _hip._api is not None:
        detail = _hip._api.error_detail(status)
    return cls(status, name, api, recoverable, detail)


def check(status: int, api: str) -> None:
    """Raise the HipError for `status` unless it is hipSuccess (0)."""
    if status:
        raise error_for(status, api)


def check_done(status: int, api: str) -> bool:
    """For queries that answer "not yet" (hipStreamQuery, hipEventQuery): True on success,
    False on hipErrorNotReady, and the HipError for any other status."""
    if status == _NOT_READY:
        return False
    check(status, api)
    return True


def check_hiprtc(status: int, api: str, log: str = "") -> None:
    """Raise HipCompileError for a failing hiprtcResult, with the compile log if there is one."""
    if status:
        name = _HIPRTC_NAMES.get(status, f"hiprtcResult({status})")
        raise HipCompileError(status, name, api, True, log)


def check_hipblas(status: int, api: str) -> None:
    """Raise HipblasError for a failing hipblasStatus_t."""
    if status:
        name = _HIPBLAS_NAMES.get(status, f"hipblasStatus({status})")
        raise HipblasError(status, name, api, True)

"""hipError_t values, their names and messages, and the per-thread last error (cpu platform).

hipGetLastError returns the last error of any runtime call made by the calling host thread and
resets it, as HIP (ROCm 5 and 6) does; `track_errors` wraps each runtime function to record it.

Asynchronous failures carry a detail (which kernel, block, thread, address): the operation
notes it on the thread that ran it (`note_failure`), the stream keeps it with its error, and
the synchronize that returns the error hands it to its caller's thread (`publish`), where
`error_detail(code)` (HipApi.error_detail) reads it.
"""

from __future__ import annotations

import functools
import threading
from collections.abc import Callable
from typing import Any

from hip_ffi._ffi import ffi
from hip_ffi.constants import ERROR_CODES, ERROR_NAMES, HIPRTC_RESULTS

SUCCESS = 0
INVALID_VALUE = ERROR_CODES["hipErrorInvalidValue"]
OUT_OF_MEMORY = ERROR_CODES["hipErrorOutOfMemory"]
NOT_INITIALIZED = ERROR_CODES["hipErrorNotInitialized"]
INVALID_CONFIGURATION = ERROR_CODES["hipErrorInvalidConfiguration"]
INVALID_SYMBOL = ERROR_CODES["hipErrorInvalidSymbol"]
INVALID_DEVICE_POINTER = ERROR_CODES["hipErrorInvalidDevicePointer"]
INVALID_MEMCPY_DIRECTION = ERROR_CODES["hipErrorInvalidMemcpyDirection"]
INVALID_DEVICE_FUNCTION = ERROR_CODES["hipErrorInvalidDeviceFunction"]
INVALID_DEVICE = ERROR_CODES["hipErrorInvalidDevice"]
INVALID_IMAGE = ERROR_CODES["hipErrorInvalidImage"]
NO_BINARY_FOR_GPU = ERROR_CODES["hipErrorNoBinaryForGpu"]
FILE_NOT_FOUND = ERROR_CODES["hipErrorFileNotFound"]
SHARED_OBJECT_INIT_FAILED = ERROR_CODES["hipErrorSharedObjectInitFailed"]
INVALID_HANDLE = ERROR_CODES["hipErrorInvalidHandle"]
ILLEGAL_STATE = ERROR_CODES["hipErrorIllegalState"]
ILLEGAL_ADDRESS = ERROR_CODES["hipErrorIllegalAddress"]
NOT_FOUND = ERROR_CODES["hipErrorNotFound"]
NOT_READY = ERROR_CODES["hipErrorNotReady"]
LAUNCH_FAILURE = ERROR_CODES["hipErrorLaunchFailure"]
PEER_ACCESS_UNSUPPORTED = ERROR_CODES["hipErrorPeerAccessUnsupported"]
HOST_MEMORY_ALREADY_REGISTERED = ERROR_CODES["hipErrorHostMemoryAlreadyRegistered"]
HOST_MEMORY_NOT_REGISTERED = ERROR_CODES["hipErrorHostMemoryNotRegistered"]
NOT_SUPPORTED = ERROR_CODES["hipErrorNotSupported"]
CAPTURE_UNSUPPORTED = ERROR_CODES["hipErrorStreamCaptureUnsupported"]
CAPTURE_UNMATCHED = ERROR_CODES["hipErrorStreamCaptureUnmatched"]

#: hipGetErrorString texts (HIP's wording) for the codes this platform returns.
_MESSAGES = {
    "hipSuccess": "no error",
    "hipErrorInvalidValue": "invalid argument",
    "hipErrorOutOfMemory": "out of memory",
    "hipErrorNotInitialized": "initialization error",
    "hipErrorInvalidConfiguration": "invalid configuration argument",
    "hipErrorInvalidSymbol": "invalid device symbol",
    "hipErrorInvalidDevicePointer": "invalid device pointer",
    "hipErrorInvalidMemcpyDirection": "invalid copy direction for memcpy",
    "hipErrorInvalidDeviceFunction": "invalid device function",
    "hipErrorNoDevice": "no ROCm-capable device is detected",
    "hipErrorInvalidDevice": "invalid device ordinal",
    "hipErrorInvalidImage": "device kernel image is invalid",
    "hipErrorNoBinaryForGpu": "no kernel image is available for execution on the device",
    "hipErrorFileNotFound": "file not found",
    "hipErrorSharedObjectInitFailed": "shared object initialization failed",
    "hipErrorInvalidHandle": "invalid resource handle",
    "hipErrorIllegalState": "the operation cannot be performed in the present state",
    "hipErrorNotFound": "named symbol not found",
    "hipErrorNotReady": "device not ready",
    "hipErrorLaunchFailure": "unspecified launch failure",
    "hipErrorIllegalAddress": "an illegal memory access was encountered",
    "hipErrorAssert": "device-side assert triggered",
    "hipErrorPeerAccessUnsupported": "peer access is not supported between these two devices",
    "hipErrorHostMemoryAlreadyRegistered": "part or all of the requested memory range is "
    "already mapped",
    "hipErrorHostMemoryNotRegistered": "pointer does not correspond to a registered memory region",
    "hipErrorNotSupported": "operation not supported",
    "hipErrorStreamCaptureUnsupported": "operation not permitted when stream is capturing",
    "hipErrorStreamCaptureUnmatched": "the capture was not initiated in this stream",
    "hipErrorUnknown": "unknown error",
}

_strings: dict[tuple[str, int], Any] = {}
_strings_lock = threading.RLock()  # a finalizer may ask for a name mid-call


def _cached(kind: str, code: int, text: str) -> Any:
    # The cdata must outlive every caller that holds the `const char*`: keep them all.
    with _strings_lock:
        if (kind, code) not in _strings:
            _strings[kind, code] = ffi.new("char[]", text.encode())
        return _strings[kind, code]


def hipGetErrorName(code: int) -> Any:
    """`const char*`: the enumerator name ("hipErrorInvalidValue"), "hipErrorUnknown" if none."""
    return _cached("name", code, ERROR_NAMES.get(code, "hipErrorUnknown"))


def hipGetErrorString(code: int) -> Any:
    """`const char*`: a short description of the error."""
    name = ERROR_NAMES.get(code, "hipErrorUnknown")
    return _cached("string", code, _MESSAGES.get(name, name))


_HIPRTC_NAMES = {value: name for name, value in HIPRTC_RESULTS.items()}


def hiprtcGetErrorString(result: int) -> Any:
    """`const char*`: the hiprtcResult's name, as hiprtc reports it."""
    return _cached("hiprtc", result, _HIPRTC_NAMES.get(result, "HIPRTC_ERROR_INVALID_INPUT"))


class _LastError(threading.local):
    code = SUCCESS
    noted = ""  # the detail of a failure of the operation this thread is running
    reported = (SUCCESS, "")  # the last failure a synchronize returned here, with its detail


_last = _LastError()


def note_failure(detail: str) -> None:
    """Called by an asynchronous operation that fails, on the thread that runs it (the first
    note of an operation wins: a graph's first failing node)."""
    if not _last.noted:
        _last.noted = detail


def take_note() -> str:
    """The note of the operation that just ran on this thread, cleared."""
    detail, _last.noted = _last.noted, ""
    return detail


def publish(code: int, detail: str) -> None:
    """A synchronize returns `code` to this thread: keep its detail for error_detail()."""
    if code:
        _last.reported = (code, detail)


def error_detail(code: int) -> str:
    """HipApi.error_detail: the detail of the last failure `code` a synchronize returned on
    this thread, "" if the last one was another code or had none."""
    reported, detail = _last.reported
    return detail if reported == code else ""


def hipGetLastError() -> int:
    """The last error of a runtime call on this host thread; resets it to hipSuccess."""
    code, _last.code = _last.code, SUCCESS
    return code


def hipPeekAtLastError() -> int:
    """The last error of a runtime call on this host thread, without resetting it."""
    return _last.code


def track_errors(function: Callable[..., int]) -> Callable[..., int]:
    """`function`, recording a non-success result as this thread's last error."""

    @functools.wraps(function)
    def tracked(*args: Any) -> int:
        code = function(*args)
        if code:
            _last.code = code
        return code

    return tracked

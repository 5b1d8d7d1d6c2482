"""One HipError hierarchy from one table, and one checker."""

from __future__ import annotations

import pytest

from hip_core import errors
from hip_ffi.constants import ERROR_CODES


@pytest.mark.parametrize(
    ("name", "cls", "recoverable"),
    [
        ("hipErrorOutOfMemory", errors.HipOutOfMemoryError, True),
        ("hipErrorInvalidValue", errors.HipInvalidValueError, True),
        ("hipErrorNotReady", errors.HipNotReadyError, True),
        ("hipErrorNoDevice", errors.HipNoDeviceError, True),
        ("hipErrorLaunchFailure", errors.HipLaunchError, False),
        ("hipErrorIllegalAddress", errors.HipLaunchError, False),
        ("hipErrorInvalidConfiguration", errors.HipLaunchError, True),
        ("hipErrorFileNotFound", errors.HipError, True),
    ],
)
def test_codes_map_to_classes(name: str, cls: type, recoverable: bool) -> None:
    with pytest.raises(cls) as caught:
        errors.check(ERROR_CODES[name], "hipSomething")
    error = caught.value
    assert type(error) is cls
    assert (error.code, error.name, error.api, error.recoverable) == (
        ERROR_CODES[name],
        name,
        "hipSomething",
        recoverable,
    )
    assert f"hipSomething failed: {name}" in str(error)


def test_success_is_silent_and_python_bases_hold() -> None:
    assert errors.check(0, "hipMalloc") is None
    assert issubclass(errors.HipOutOfMemoryError, MemoryError)
    assert issubclass(errors.HipInvalidValueError, ValueError)


def test_unknown_code_still_raises_with_its_number() -> None:
    with pytest.raises(errors.HipError, match=r"hipError\(4242\)"):
        errors.check(4242, "hipFoo")


def test_compile_error_carries_the_log() -> None:
    with pytest.raises(errors.HipCompileError) as caught:
        errors.check_hiprtc(6, "hiprtcCompileProgram", "x.hip:1: error: nope")
    assert caught.value.name == "HIPRTC_ERROR_COMPILATION"
    assert caught.value.log == "x.hip:1: error: nope"
    assert "error: nope" in str(caught.value)


def test_check_done_answers_queries() -> None:
    assert errors.check_done(0, "hipStreamQuery") is True
    assert errors.check_done(ERROR_CODES["hipErrorNotReady"], "hipStreamQuery") is False
    with pytest.raises(errors.HipInvalidValueError, match="hipEventQuery"):
        errors.check_done(ERROR_CODES["hipErrorInvalidHandle"], "hipEventQuery")

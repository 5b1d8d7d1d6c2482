"""The library-handle lifecycle Blas and Dnn share (hip_runtime.libraries.library_handle): made
and bound to the stream given, destroyed exactly once (close, twice harmless; or the finalizer,
which never raises), ClosedError after; a handle whose stream cannot be bound is destroyed at
once and the binding's error raised. Each library's calls are counted through a stand-in of
the platform's API."""

from __future__ import annotations

import gc
from collections import Counter
from collections.abc import Callable
from typing import Any

import pytest

from hip_core import ClosedError, Device, HipError, MemoryPool, Stream, hip_api
from hip_runtime.libraries import library_handle
from hip_runtime.libraries.blas import Blas
from hip_runtime.libraries.dnn import Dnn, DnnError

#: kind -> (make(stream, pool), set-stream, get-stream, destroy call, the error of a failure)
KINDS: dict[str, tuple[Callable[[Stream, MemoryPool], Any], str, str, str, type]] = {
    "Blas": (lambda s, p: Blas(s), "hipblasSetStream", "hipblasGetStream", "hipblasDestroy",
             HipError),
    "Dnn": (lambda s, p: Dnn(s, p), "miopenSetStream", "miopenGetStream", "miopenDestroy",
            DnnError),
}  # fmt: skip


class Counted:
    """The platform's API with every call counted; `failing` answers status 3 (a bad
    parameter in both libraries) instead of calling through."""

    def __init__(self, api: Any, failing: str | None = None) -> None:
        self._api, self._failing, self.calls = api, failing, Counter[str]()

    def __getattr__(self, name: str) -> Any:
        found = getattr(self._api, name)
        if not name.startswith(("hipblas", "miopen")):
            return found

        def call(*args: Any) -> Any:
            self.calls[name] += 1
            return 3 if name == self._failing else found(*args)

        return call


@pytest.fixture
def counted(device: Device, monkeypatch: pytest.MonkeyPatch) -> Callable[[str | None], Counted]:
    def install(failing: str | None = None) -> Counted:
        api = Counted(hip_api(), failing)
        monkeypatch.setattr(library_handle, "hip", lambda: api)
        return api

    return install


@pytest.mark.parametrize("kind", KINDS)
def test_bound_to_the_stream_and_destroyed_once(
    device: Device, counted: Callable[[str | None], Counted], kind: str
) -> None:
    make, set_stream, get_stream, destroy, _ = KINDS[kind]
    api = counted(None)
    stream = device.create_stream()
    made = make(stream, MemoryPool(device))
    assert made.stream is stream and api.calls[set_stream] == 1
    bound = api.ffi.new("hipStream_t*")
    assert getattr(api, get_stream)(made.handle, bound) == 0
    assert int(api.ffi.cast("uintptr_t", bound[0])) == int(api.ffi.cast("uintptr_t", stream.handle))
    made.close()
    made.close()  # twice is harmless
    assert api.calls[destroy] == 1
    with pytest.raises(ClosedError, match=f"^{kind} is closed$"):
        made._check_open()


@pytest.mark.parametrize("kind", KINDS)
def test_a_collected_handle_is_destroyed_once_by_the_finalizer(
    device: Device, counted: Callable[[str | None], Counted], kind: str
) -> None:
    make, _, _, destroy, _ = KINDS[kind]
    api = counted(None)
    made = make(device.create_stream(), MemoryPool(device))
    del made
    gc.collect()
    assert api.calls[destroy] == 1


@pytest.mark.parametrize("kind", KINDS)
def test_a_finalizer_whose_destroy_fails_does_not_raise(
    device: Device, counted: Callable[[str | None], Counted], kind: str
) -> None:
    make, _, _, destroy, _ = KINDS[kind]
    api = counted(destroy)  # the destroy answers a failing status
    made = make(device.create_stream(), MemoryPool(device))
    made.__del__()  # (as the collection would: a failing release is swallowed there)
    assert api.calls[destroy] == 1 and made.closed


@pytest.mark.parametrize("kind", KINDS)
def test_a_stream_that_cannot_be_bound_raises_and_leaves_no_handle(
    device: Device, counted: Callable[[str | None], Counted], kind: str
) -> None:
    make, set_stream, _, destroy, error = KINDS[kind]
    api = counted(set_stream)
    with pytest.raises(error, match=set_stream):
        make(device.create_stream(), MemoryPool(device))
    assert api.calls[set_stream] == 1 and api.calls[destroy] == 1  # at once
    gc.collect()
    assert api.calls[destroy] == 1  # and never again

"""The library-handle lifecycle Blas and Dnn share (hip_runtime.libraries.library_handle): made
and bound to the stream given, destroyed exactly once (close, twice harmless; or the finalizer,
which never raises), ClosedError after; a handle whose stream cannot be bound is destroyed at
once and the binding's error raised. Each library's calls are counted through a stand-in of
the platform's API."""

from __future__ import annotations

import gc
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import pytest

from hip_core import ClosedError, Device, HipError, MemoryPool, Stream, hip_api
from hip_runtime.libraries import library_handle
from hip_runtime.libraries.blas import Blas
from hip_runtime.libraries.dnn import Dnn, DnnError


@dataclass
class Library:
    """One library's handle class, the names of its calls and the error of a failing one;
    `make(failing)` makes a handle on a new stream through a `Counted` API."""

    kind: str
    make_handle: Callable[[Stream, MemoryPool], Any]
    set_stream: str
    get_stream: str
    destroy: str
    error: type[Exception]
    device: Device
    monkeypatch: pytest.MonkeyPatch
    api: Any = None  # the last `install`'s Counted

    def install(self, failing: str | None = None) -> Counted:
        """Make handles through a new Counted API from now on."""
        api = self.api = Counted(hip_api(), failing)
        self.monkeypatch.setattr(library_handle, "hip", lambda: api)
        return api

    def make(self, failing: str | None = None) -> tuple[Any, Counted]:
        api = self.install(failing)
        return self.make_handle(self.device.create_stream(), MemoryPool(self.device)), api


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


KINDS: dict[str, tuple[Any, ...]] = {
    "Blas": (lambda s, p: Blas(s), "hipblasSetStream", "hipblasGetStream", "hipblasDestroy",
             HipError),
    "Dnn": (lambda s, p: Dnn(s, p), "miopenSetStream", "miopenGetStream", "miopenDestroy",
            DnnError),
}  # fmt: skip


@pytest.fixture(params=KINDS)
def library(
    request: pytest.FixtureRequest, device: Device, monkeypatch: pytest.MonkeyPatch
) -> Library:
    return Library(request.param, *KINDS[request.param], device, monkeypatch)


def test_bound_to_the_stream_and_destroyed_once(library: Library, device: Device) -> None:
    api = library.install()
    stream = device.create_stream()
    made = library.make_handle(stream, MemoryPool(device))
    assert made.stream is stream and api.calls[library.set_stream] == 1
    bound = api.ffi.new("hipStream_t*")
    assert getattr(api, library.get_stream)(made.handle, bound) == 0
    assert int(api.ffi.cast("uintptr_t", bound[0])) == int(api.ffi.cast("uintptr_t", stream.handle))
    made.close()
    made.close()  # twice is harmless
    assert api.calls[library.destroy] == 1
    with pytest.raises(ClosedError, match=f"^{library.kind} is closed$"):
        made._check_open()


def test_a_collected_handle_is_destroyed_once_by_the_finalizer(library: Library) -> None:
    made, api = library.make()
    del made
    gc.collect()
    assert api.calls[library.destroy] == 1


def test_a_finalizer_whose_destroy_fails_does_not_raise(library: Library) -> None:
    made, api = library.make(library.destroy)  # the destroy answers a failing status
    made.__del__()  # (as the collection would: a failing release is swallowed there)
    assert api.calls[library.destroy] == 1 and made.closed


def test_a_stream_that_cannot_be_bound_raises_and_leaves_no_handle(library: Library) -> None:
    with pytest.raises(library.error, match=library.set_stream):
        library.make(library.set_stream)
    api = library.api  # (the one the failed make went through)
    assert api.calls[library.set_stream] == 1 and api.calls[library.destroy] == 1  # at once
    gc.collect()
    assert api.calls[library.destroy] == 1  # and never again

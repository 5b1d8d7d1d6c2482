"""A library opened at the first call of one of its functions, not at `load()`.

For libraries that most programs never use and that cost to open (RCCL, NCCL: hundreds of
megabytes of device code): `hip_ffi.load()` stays fast and works without them, and a missing
library is an error only when one of its functions is called (FunctionUnavailableError with
every path tried and the variable that picks one), never at import or load.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterable
from typing import Any

from hip_ffi.errors import FunctionUnavailableError, LibraryNotFoundError
from hip_ffi.libraries import LibrarySpec, open_library

#: Binds the functions of an opened library: (library, its path) -> name -> callable.
Binder = Callable[[Any, str], dict[str, Callable[..., Any]]]


class LazyLibrary:
    """The library that `spec()` describes, opened once by whichever function is called first.

    `spec` is a factory, so the search (which reads the environment and the process's mapped
    files) also happens at the first call: a library that torch loaded after `hip_ffi.load()`
    is found then. `path` is None until opened.
    """

    def __init__(self, ffi: Any, what: str, spec: Callable[[], LibrarySpec], bind: Binder) -> None:
        self._ffi = ffi
        self.what = what
        self._spec = spec
        self._bind = bind
        self._lock = threading.Lock()
        self._functions: dict[str, Callable[..., Any]] | None = None
        self._failure = ""  # why it did not open: every later call says the same at once
        self._library: Any = None  # kept open: cffi's functions do not keep their library
        self.path: str | None = None

    def function(self, name: str) -> Callable[..., Any]:
        """The callable of `name` in the opened library (opening it first)."""
        functions = self._functions if self._functions is not None else self._open()
        return functions[name]

    def _open(self) -> dict[str, Callable[..., Any]]:
        with self._lock:
            if self._functions is not None:
                return self._functions
            if self._failure:
                raise FunctionUnavailableError(self._failure)
            spec = self._spec()
            try:
                library, path = open_library(self._ffi, spec)
            except LibraryNotFoundError as error:
                tried = _tried(error.tried)
                self._failure = f"no {self.what} library (tried {tried}; {spec.env} picks one)"
                raise FunctionUnavailableError(self._failure) from error
            self._library, self.path = library, path
            self._functions = self._bind(library, path)
            return self._functions

    def functions(self, names: Iterable[str]) -> dict[str, Callable[..., Any]]:
        """Stand-ins for `names` that open the library at their first call, then call it."""
        return {name: _LazyFunction(name, self) for name in names}


def _tried(tried: list[tuple[str, str]]) -> str:
    """What each candidate did: the ones that are not there in one list, the others (a missing
    dependency, an old glibc) with their reasons."""
    absent = [path for path, why in tried if "No such file" in why]
    failed = [f"{path}: {why}" for path, why in tried if "No such file" not in why]
    return "; ".join([*failed, *([f"not found: {', '.join(absent)}"] if absent else [])]) or (
        "nothing"
    )


class _LazyFunction:
    """One function of a LazyLibrary: an extra Python call per use (nothing next to the work a
    collective queues)."""

    __slots__ = ("_library", "_target", "name")

    def __init__(self, name: str, library: LazyLibrary) -> None:
        self.name = name
        self._library = library
        self._target: Callable[..., Any] | None = None

    def __call__(self, *args: Any) -> Any:
        target = self._target
        if target is None:
            target = self._target = self._library.function(self.name)
        return target(*args)

    def __repr__(self) -> str:
        state = self._library.path or "not opened yet"
        return f"<{self.name} of {self._library.what} ({state})>"


def bind_symbols(ffi: Any, names: Iterable[str], release: Callable[[Any, str], str]) -> Binder:
    """A Binder taking each of `names` from the library as it is; a symbol the library lacks
    becomes a function raising FunctionUnavailableError (`release(library, path)` names the
    library in the message)."""
    from hip_ffi.api import Unavailable

    def bind(library: Any, path: str) -> dict[str, Callable[..., Any]]:
        functions: dict[str, Callable[..., Any]] = {}
        for name in names:
            try:
                functions[name] = getattr(library, name)
            except (AttributeError, ffi.error):  # cffi raises ffi.error for a missing symbol
                functions[name] = Unavailable(name, f"not in {release(library, path)}")
        return functions

    return bind


def lazy_collectives(ffi: Any, what: str, spec: Callable[[], LibrarySpec]) -> dict[str, Any]:
    """The collective surface (hip_ffi.surface.COLLECTIVES) over RCCL or NCCL (`what`), whose
    functions are the library's own (the names, arguments and enums are the surface's), opened
    by the first call."""
    from hip_ffi import surface
    from hip_ffi.collective_constants import unpack_version

    def release(library: Any, path: str) -> str:
        version = ffi.new("int*")
        if library.ncclGetVersion(version) != 0:
            return path
        return "{} {}.{}.{} ({})".format(what, *unpack_version(int(version[0])), path)

    names = surface.COLLECTIVES
    return LazyLibrary(ffi, what, spec, bind_symbols(ffi, names, release)).functions(names)

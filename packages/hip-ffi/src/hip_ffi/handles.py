"""Opaque handles (hipStream_t, hipEvent_t, hipModule_t...) for the platforms that hand out
their own: the cpu platform (hip-cpu) for everything, the DNN descriptors (dnn_descriptors.py)
wherever MIOpen is absent. It lives here, not in hip-cpu, because hip-ffi uses it itself.

A handle is a pointer value that the platform hands out and maps back to a Python object. The
values come from one counter shared by every kind of handle, so a handle of one kind passed
where another kind is expected is simply not found (the caller gets hipErrorInvalidHandle or
the matching error, never a crash). They are multiples of 16 from 0x10000 up: never NULL, never
a value that HIP reserves (0x1 hipStreamLegacy, 0x2 hipStreamPerThread), and they point at no
memory, so dereferencing one faults instead of reading garbage.
"""

from __future__ import annotations

import functools
import itertools
from collections.abc import Callable
from typing import Any, Concatenate, Generic, ParamSpec, TypeVar

from hip_ffi._ffi import ffi

T = TypeVar("T")
P = ParamSpec("P")

_values = itertools.count(0x10000, 16)
_CData = ffi.CData


def address(pointer: Any) -> int:
    """The integer value of a pointer argument: a cdata pointer or array, an int, None, or
    the bytes/bytearray that cffi also accepts for a pointer parameter (its address is valid
    while the caller holds the object, i.e. for the call)."""
    if isinstance(pointer, _CData):  # the common case first: every launch calls this
        return int(ffi.cast("uintptr_t", pointer))
    if pointer is None:
        return 0
    if isinstance(pointer, int):
        return pointer
    if isinstance(pointer, bytes | bytearray | memoryview):
        return int(ffi.cast("uintptr_t", ffi.from_buffer(pointer)))
    return int(ffi.cast("uintptr_t", pointer))


def c_string(value: Any) -> str | None:
    """A `const char*` argument as str (None for NULL): cdata, or the bytes that cffi also
    accepts for a char* parameter."""
    if value is None or isinstance(value, int):
        return None if not value else ffi.string(ffi.cast("char*", value)).decode()
    if isinstance(value, bytes | bytearray):
        return bytes(value).split(b"\0", 1)[0].decode()
    if isinstance(value, str):
        return value
    return None if value == ffi.NULL else ffi.string(value).decode(errors="replace")


def items(array: Any, count: int) -> list[Any]:
    """The first `count` elements of a C array argument: cdata, or the list/tuple that cffi
    also accepts for a `T**` parameter."""
    if isinstance(array, list | tuple):
        return list(array[:count])
    return [array[i] for i in range(count)]


def is_null(value: Any) -> bool:
    """True for NULL, None and 0 (cdata or Python)."""
    if isinstance(value, _CData):
        return bool(value == ffi.NULL)
    if value is None or isinstance(value, int):
        return not value
    if isinstance(value, bytes | bytearray | str | list | tuple):
        return False
    return bool(value == ffi.NULL)


def takes_handle(
    lookup: Callable[[Any], T | None], missing: int
) -> Callable[[Callable[Concatenate[T, P], int]], Callable[Concatenate[Any, P], int]]:
    """Decorator for a HIP call whose first argument is a handle: the function is written for
    the object behind it (`lookup(handle)`), and the call answers `missing` without running it
    when the handle names nothing (NULL where that is not a valid handle, unknown, destroyed).

    So each call spells its argument checks once, and the handle check is written here only.
    """

    def decorate(function: Callable[Concatenate[T, P], int]) -> Callable[Concatenate[Any, P], int]:
        @functools.wraps(function)
        def call(handle: Any, /, *args: P.args, **kwargs: P.kwargs) -> int:
            found = lookup(handle)
            if found is None:
                return missing
            return function(found, *args, **kwargs)

        return call

    return decorate


class Registry(Generic[T]):
    """Handle value -> object, for one kind of handle. Thread-safe without a lock: each
    operation is one dict operation, atomic under the GIL, so a finalizer that runs in the
    middle of another registry call (garbage collection) can never deadlock on it."""

    def __init__(self, ctype: str) -> None:
        self.ctype = ctype  # the C type of the handle, e.g. "hipStream_t"
        self._objects: dict[int, T] = {}

    def add(self, obj: T) -> int:
        value = next(_values)  # itertools.count: atomic under the GIL
        self._objects[value] = obj
        return value

    def get(self, handle: Any) -> T | None:
        """The object behind `handle`, or None for NULL and for unknown values."""
        return self._objects.get(address(handle))

    def remove(self, handle: Any) -> T | None:
        return self._objects.pop(address(handle), None)

    def cdata(self, value: int) -> Any:
        """`value` as a cdata of this registry's handle type (what the C API writes out)."""
        return ffi.cast(self.ctype, value)

    def values(self) -> list[T]:
        return list(self._objects.values())

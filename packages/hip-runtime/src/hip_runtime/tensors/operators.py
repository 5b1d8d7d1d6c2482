"""Python operators on DeviceTensor: `+ - * / ** @`, their reflected and in-place forms, unary
`-`, `abs()` and the comparisons, each one op of the HipBackend that made the tensor.

A tensor belongs to the backend whose stream it carries: every tensor a HipBackend makes (its
factories, its ops' outputs, views of those) carries `backend.stream`, and each backend
registers its stream here when it is made (weakly: the registry keeps no backend alive). An
operator runs that backend's op, so it is queued on that stream, asynchronously, with the op's
rules (shared dtypes, numpy broadcasting, Python scalars taking the tensor's dtype; see
hip_runtime.ops.pointwise). With two tensors of different backends, the left one's backend
runs the op (the right one must be ready in its stream's order, as for any op). A closed
backend's tensors raise hip_core.ClosedError from the op. A tensor that no live backend made
(`DeviceTensor.from_numpy` without a backend's stream, DLPack imports on another stream)
raises TypeError from every operator, saying how to get one from a backend; so does one whose
backend was collected.

`==` and the other comparisons return bool tensors, as numpy; so a DeviceTensor is hashed by
identity (`__hash__`: sets and dicts of tensors work), and `bool()` of one raises unless it
has exactly one element (then it waits for the stream and reads it). Comparisons with anything
but a tensor or a number return NotImplemented (Python then compares identities, so `tensor ==
None` is False). As with numpy arrays, `x in list_of_tensors` and `list.remove(x)` find x
itself, but compare it elementwise with the other tensors they pass (ValueError from `bool`).
"""

from __future__ import annotations

import numbers
import weakref
from typing import TYPE_CHECKING, Any

import numpy as np

if TYPE_CHECKING:
    from hip_core import Stream
    from hip_runtime.backend import HipBackend
    from hip_runtime.tensors.tensor import DeviceTensor

#: id(stream) -> (the stream, the backend that owns it), both weakly.
_owners: dict[int, tuple[weakref.ref[Any], weakref.ref[Any]]] = {}


def register(stream: Stream, backend: Any) -> None:
    """Make `backend` the owner of tensors on `stream` (HipBackend does, when made)."""
    key = id(stream)

    def forget(_: Any) -> None:
        found = _owners.get(key)
        if found is not None and (found[0]() is None or found[1]() is None):
            del _owners[key]

    _owners[key] = (weakref.ref(stream, forget), weakref.ref(backend, forget))


def backend_of(tensor: DeviceTensor) -> HipBackend:
    """The HipBackend whose stream `tensor` carries; TypeError when there is none."""
    found = _owners.get(id(tensor.stream))
    backend = None
    if found is not None and found[0]() is tensor.stream:
        backend = found[1]()
    if backend is None:
        raise TypeError(
            "this DeviceTensor was not made by a HipBackend that is still alive (its stream "
            "belongs to none), so Python operators cannot run on it: make it with "
            "backend.from_numpy(), backend.empty() or another op of a HipBackend you keep, or "
            "call the backend's ops directly (backend.add(a, b))"
        )
    return backend  # type: ignore[no-any-return]


def _operand(value: Any) -> bool:
    from hip_runtime.tensors.tensor import DeviceTensor

    return isinstance(value, (DeviceTensor, numbers.Number, np.bool_))


class TensorOperators:
    """Mixed into DeviceTensor: the operators (no state; see the module doc)."""

    __slots__ = ()
    __array_ufunc__ = None  # numpy arrays defer to these operators (which refuse them)
    __hash__ = object.__hash__  # by identity: `==` is elementwise

    def _op(self, name: str, *args: Any) -> Any:
        if not all(_operand(a) for a in args):
            return NotImplemented
        return getattr(backend_of(self), name)(*args)  # type: ignore[arg-type]

    def _in_place(self, name: str, other: Any) -> Any:
        if not _operand(other):
            return NotImplemented
        return getattr(backend_of(self), name)(self, other, out=self)  # type: ignore[arg-type]

    def __add__(self, other: Any) -> Any:
        return self._op("add", self, other)

    def __radd__(self, other: Any) -> Any:
        return self._op("add", other, self)

    def __iadd__(self, other: Any) -> Any:
        return self._in_place("add", other)

    def __sub__(self, other: Any) -> Any:
        return self._op("sub", self, other)

    def __rsub__(self, other: Any) -> Any:
        return self._op("sub", other, self)

    def __isub__(self, other: Any) -> Any:
        return self._in_place("sub", other)

    def __mul__(self, other: Any) -> Any:
        return self._op("mul", self, other)

    def __rmul__(self, other: Any) -> Any:
        return self._op("mul", other, self)

    def __imul__(self, other: Any) -> Any:
        return self._in_place("mul", other)

    def __truediv__(self, other: Any) -> Any:
        return self._op("div", self, other)

    def __rtruediv__(self, other: Any) -> Any:
        return self._op("div", other, self)

    def __itruediv__(self, other: Any) -> Any:
        return self._in_place("div", other)

    def __pow__(self, other: Any) -> Any:
        return self._op("pow", self, other)

    def __rpow__(self, other: Any) -> Any:
        return self._op("pow", other, self)

    def __matmul__(self, other: Any) -> Any:
        from hip_runtime.tensors.tensor import DeviceTensor

        if not isinstance(other, DeviceTensor):
            return NotImplemented
        return backend_of(self).matmul(self, other)  # type: ignore[arg-type]

    def __neg__(self) -> Any:
        return backend_of(self).neg(self)  # type: ignore[arg-type]

    def __abs__(self) -> Any:
        return backend_of(self).abs(self)  # type: ignore[arg-type]

    def __eq__(self, other: object) -> Any:
        return self._op("eq", self, other)

    def __ne__(self, other: object) -> Any:
        return self._op("ne", self, other)

    def __lt__(self, other: Any) -> Any:
        return self._op("lt", self, other)

    def __le__(self, other: Any) -> Any:
        return self._op("le", self, other)

    def __gt__(self, other: Any) -> Any:
        return self._op("gt", self, other)

    def __ge__(self, other: Any) -> Any:
        return self._op("ge", self, other)

    def __bool__(self) -> bool:
        """The truth of a one-element tensor (waits for its stream); ValueError otherwise,
        as numpy: `if a == b` of whole tensors is ambiguous (use a reduction)."""
        size = self.size  # type: ignore[attr-defined]
        if size != 1:
            raise ValueError(
                f"the truth value of a DeviceTensor of {size} elements is ambiguous; compare "
                "one element, or reduce (e.g. backend.min(a == b))"
            )
        return bool(self.to_numpy().reshape(-1)[0])  # type: ignore[attr-defined]


__all__ = ["TensorOperators", "backend_of", "register"]

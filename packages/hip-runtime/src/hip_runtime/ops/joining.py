"""Joining and splitting along an axis: cat, stack, pad (copies), split and chunk (views).

cat, stack and pad write each input into a narrowed view of their output through
`DeviceTensor.copy_` (hip_runtime.tensors.strided_copy: one memcpy or one strided-copy launch per
input, any input layout); pad fills the output first (CreationOps.full). split and chunk return
views that share x's memory and copy nothing. Queued on the backend's stream.
"""

from __future__ import annotations

import operator
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from hip_runtime.ops.base import OpsBase
from hip_runtime.tensors import strides as layout
from hip_runtime.tensors.tensor import DeviceTensor


class JoiningOps(OpsBase):
    def cat(
        self, tensors: Sequence[DeviceTensor], axis: int = 0, *, out: DeviceTensor | None = None
    ) -> DeviceTensor:
        """numpy's concatenate: tensors of one dtype and rank (>= 1), equal on every axis but
        `axis`, joined along it into a C-contiguous tensor (or `out`, which must not overlap
        them). One copy per non-empty input."""
        parts = self._joining_parts(tensors, "cat")
        first = parts[0]
        if first.ndim == 0:
            raise ValueError("cat: zero-dimensional tensors cannot be concatenated (use stack)")
        a = _axis(axis, first.ndim, "cat")
        for i, t in enumerate(parts):
            if (
                t.ndim != first.ndim
                or t.shape[:a] + t.shape[a + 1 :] != first.shape[:a] + first.shape[a + 1 :]
            ):
                raise ValueError(f"cat: tensors[{i}] is {t.shape}; tensors[0] is {first.shape} "
                                 f"(only axis {a} may differ)")  # fmt: skip
        total = sum(t.shape[a] for t in parts)
        shape = (*first.shape[:a], total, *first.shape[a + 1 :])
        y = self._output(out, shape, first.dtype, distinct_from=parts)
        at = 0
        for t in parts:
            length = t.shape[a]
            if length:
                y.narrow(a, at, length).copy_(t)
            at += length
        return y

    def stack(
        self, tensors: Sequence[DeviceTensor], axis: int = 0, *, out: DeviceTensor | None = None
    ) -> DeviceTensor:
        """numpy's stack: tensors of one shape and dtype joined along a new axis `axis` (in
        [-ndim - 1, ndim]). One copy per input."""
        parts = self._joining_parts(tensors, "stack")
        first = parts[0]
        for i, t in enumerate(parts):
            if t.shape != first.shape:
                raise ValueError(f"stack: tensors[{i}] is {t.shape}; tensors[0] is {first.shape}")
        a = _axis(axis, first.ndim + 1, "stack")
        return self.cat([t.unsqueeze(a) for t in parts], a, out=out)

    def split(
        self, x: DeviceTensor, sizes_or_n: int | Sequence[int], axis: int = 0
    ) -> list[DeviceTensor]:
        """Views of x along `axis` (no copy). An int n: n equal parts (numpy's split; a
        ValueError when the axis does not divide). A sequence: parts of those lengths
        (torch's split with a list), which must sum to the axis's length."""
        x = self._operand(x, "x")
        a = _axis(axis, x.ndim, "split")
        length = x.shape[a]
        if isinstance(sizes_or_n, Sequence):
            sizes = [_count(s, "split", "a size") for s in sizes_or_n]
            if sum(sizes) != length:
                raise ValueError(f"split: sizes {sizes} do not sum to axis {a}'s {length}")
        else:
            n = _count(sizes_or_n, "split", "the number of parts")
            if n == 0 or length % n:
                raise ValueError(f"split: axis {a} of length {length} does not split into "
                                 f"{n} equal parts")  # fmt: skip
            sizes = [length // n] * n
        return _views(x, a, sizes)

    def chunk(self, x: DeviceTensor, n: int, axis: int = 0) -> list[DeviceTensor]:
        """torch's chunk: views of x along `axis` of ceil(length / n) elements each, the last
        one shorter; fewer than n when the length runs out (a length of 0 gives one empty
        view). No copy."""
        x = self._operand(x, "x")
        a = _axis(axis, x.ndim, "chunk")
        parts = _count(n, "chunk", "n")
        if parts == 0:
            raise ValueError("chunk: n must be at least 1")
        length = x.shape[a]
        step = max(-(-length // parts), 1)
        sizes = [min(step, length - at) for at in range(0, length, step)] or [0]
        return _views(x, a, sizes)

    def pad(
        self,
        x: DeviceTensor,
        pads: int | Sequence[int] | Sequence[Sequence[int]],
        value: Any = 0,
        *,
        out: DeviceTensor | None = None,
    ) -> DeviceTensor:
        """numpy's pad in "constant" mode: `pads` is ((before, after), ...) per axis, one
        (before, after) pair for every axis, or one int for every side; the border holds
        `value` (converted to x's dtype as `full` converts it). A new C-contiguous tensor (or
        `out`): one fill and one copy."""
        x = self._operand(x, "x")
        widths = _pad_widths(pads, x.ndim)
        shape = tuple(d + lo + hi for d, (lo, hi) in zip(x.shape, widths, strict=True))
        y = self._output(out, shape, x.dtype, distinct_from=(x,))
        self.fill_(y, value)  # (CreationOps; validates value before anything is queued)
        if x.size:
            inner = y
            for a, (d, (lo, _)) in enumerate(zip(x.shape, widths, strict=True)):
                inner = inner.narrow(a, lo, d)
            inner.copy_(x)
        return y

    if TYPE_CHECKING:  # CreationOps provides it (HipBackend mixes both in)

        def fill_(self, tensor: DeviceTensor, value: Any) -> DeviceTensor: ...

    def _joining_parts(self, tensors: Any, op: str) -> list[DeviceTensor]:
        if isinstance(tensors, DeviceTensor) or not isinstance(tensors, Sequence):
            raise ValueError(f"{op} takes a sequence of tensors")
        if not tensors:
            raise ValueError(f"{op} needs at least one tensor")
        parts = [self._operand(t, f"tensors[{i}]") for i, t in enumerate(tensors)]
        for i, t in enumerate(parts):
            if t.dtype != parts[0].dtype:
                raise ValueError(f"{op}: tensors[{i}] has dtype {t.dtype}; tensors[0] has "
                                 f"{parts[0].dtype} (cast first)")  # fmt: skip
        return parts


def _axis(axis: Any, ndim: int, op: str) -> int:
    try:
        return layout.normalize_axis(axis, ndim)
    except (IndexError, TypeError) as error:
        raise ValueError(f"{op}: {error}") from None


def _count(value: Any, op: str, what: str) -> int:
    try:
        n = operator.index(value)
    except TypeError:
        raise ValueError(f"{op}: {what} must be an int, not {value!r}") from None
    if n < 0:
        raise ValueError(f"{op}: {what} must not be negative, not {n}")
    return n


def _views(x: DeviceTensor, a: int, sizes: list[int]) -> list[DeviceTensor]:
    views, at = [], 0
    for size in sizes:
        views.append(x.narrow(a, at, size))
        at += size
    return views


def _pad_widths(pads: Any, ndim: int) -> list[tuple[int, int]]:
    """numpy's pad_width forms as one (before, after) per axis, each >= 0; ValueError else."""
    try:
        if isinstance(pads, Sequence) and pads and isinstance(pads[0], Sequence):
            pairs = [tuple(operator.index(v) for v in pair) for pair in pads]
        elif isinstance(pads, Sequence):
            pairs = [tuple(operator.index(v) for v in pads)] * ndim
        else:
            pairs = [(operator.index(pads),) * 2] * ndim
    except TypeError:
        raise ValueError(f"pad: pads must hold ints, not {pads!r}") from None
    if len(pairs) != ndim or any(len(p) != 2 for p in pairs):
        raise ValueError(f"pad: pads {pads!r} do not give (before, after) for {ndim} axes")
    if any(v < 0 for p in pairs for v in p):
        raise ValueError(f"pad: widths must not be negative, not {pads!r}")
    return [(p[0], p[1]) for p in pairs]


__all__ = ["JoiningOps"]

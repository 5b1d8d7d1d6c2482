"""A plan's new output is reused by its next call only when nothing else holds it (issue 15,
ops/base.py `PlanOutput`): a held output, a view of it, a weak reference, an output passed back
as an operand, a closed one or a capture each get a new output from the pool, and the data of
what is held is never overwritten.

On the cpu platform in CI; the same tests run on nvidia (marked gpu) through the device fixture.
"""

from __future__ import annotations

import weakref
from collections.abc import Iterator
from typing import Any

import numpy as np
import pytest

from hip_core import Device
from hip_runtime import HipBackend
from hip_runtime.ops import base

F32 = np.float32


@pytest.fixture
def backend(device: Device) -> Iterator[HipBackend]:
    with HipBackend(device) as backend:
        yield backend


class Counted:
    """The backend's pool, counting its allocations."""

    def __init__(self, pool: Any) -> None:
        self.pool, self.calls = pool, 0

    def allocate(self, size: int, *, stream: Any) -> Any:
        self.calls += 1
        return self.pool.allocate(size, stream=stream)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.pool, name)


def operands(backend: HipBackend) -> tuple[Any, Any, np.ndarray, np.ndarray]:
    rng = np.random.default_rng(15)
    a, b = rng.standard_normal((8, 8)).astype(F32), rng.standard_normal((8, 8)).astype(F32)
    return backend.from_numpy(a), backend.from_numpy(b), a, b


def counting(backend: HipBackend) -> Counted:
    counted = Counted(backend.pool)
    object.__setattr__(backend, "pool", counted)
    return counted


def test_a_dropped_output_is_reused(backend: HipBackend) -> None:
    x, y, a, b = operands(backend)
    backend.add(x, y)  # makes the plan
    backend.add(x, y)  # the plan's first output, kept
    counted = counting(backend)
    for _ in range(3):
        backend.add(x, y)  # each dropped at once: the next call takes it back
    backend.softmax(x)
    backend.softmax(x)
    before = counted.calls
    for _ in range(3):
        backend.softmax(x)
    assert counted.calls == before
    np.testing.assert_allclose(backend.add(x, y).to_numpy(), a + b, rtol=1e-6)


def test_held_outputs_are_never_overwritten(backend: HipBackend) -> None:
    x, y, a, b = operands(backend)
    backend.mul(x, y)
    counted = counting(backend)
    held = [backend.mul(x, y) for _ in range(3)]  # each call: the last is held, so a new one
    assert counted.calls == 3
    assert len({t.ptr for t in held}) == 3
    backend.mul(x, x)  # another plan: not these
    for t in held:
        np.testing.assert_allclose(t.to_numpy(), a * b, rtol=1e-6)


@pytest.mark.parametrize("holder", ["view", "weakref", "operand", "closed"])
def test_what_holds_an_output_keeps_it(backend: HipBackend, holder: str) -> None:
    x, y, a, b = operands(backend)
    backend.add(x, y)
    first = backend.add(x, y)  # kept by the plan
    ptr = first.ptr
    kept: Any = None
    if holder == "view":
        kept = first[2:]
    elif holder == "weakref":
        kept = weakref.ref(first)
    elif holder == "closed":
        first.buffer.close()
    if holder == "operand":  # passed back in: the output must not be the operand's memory
        second = backend.add(first, y)
        assert second.ptr != ptr
        np.testing.assert_allclose(second.to_numpy(), a + b + b, rtol=1e-6)
        return
    del first
    counted = counting(backend)
    second = backend.mul(x, x)  # another plan: a block of the pool, never the held one
    third = backend.add(x, y)
    assert counted.calls == 2
    assert third.ptr != ptr or holder == "closed"
    np.testing.assert_allclose(third.to_numpy(), a + b, rtol=1e-6)
    np.testing.assert_allclose(second.to_numpy(), a * a, rtol=1e-6)
    if holder == "view":
        np.testing.assert_allclose(kept.to_numpy(), (a + b)[2:], rtol=1e-6)


def test_budget_and_size_limit(backend: HipBackend, monkeypatch: pytest.MonkeyPatch) -> None:
    x, y, _, _ = operands(backend)
    monkeypatch.setattr(base, "RECYCLE_BUDGET", x.nbytes)  # room for one kept output
    backend.add(x, y)
    backend.add(x, y)  # kept: the budget is spent
    backend.mul(x, y)
    backend.mul(x, y)  # over the budget: not kept
    counted = counting(backend)
    backend.add(x, y)
    assert counted.calls == 0
    backend.mul(x, y)
    assert counted.calls == 1
    assert backend._recycled_bytes == x.nbytes
    monkeypatch.setattr(base, "RECYCLE_BYTES", x.nbytes - 1)
    backend.sub(x, y)
    backend.sub(x, y)  # larger than RECYCLE_BYTES: never kept
    assert backend._recycled_bytes == x.nbytes


def test_close_gives_kept_outputs_back(device: Device) -> None:
    backend = HipBackend(device)
    x, y, _, _ = operands(backend)
    backend.add(x, y)
    backend.add(x, y)
    pool = backend.pool
    in_use = pool.stats().in_use
    backend.close()
    backend.stream.sync()
    assert pool.stats().in_use == in_use - x.nbytes

"""Launches with every bad argument, on the slow path and on the fast path.

The fast path reuses the last launch's packing and configuration when the arguments compare
equal; it must refuse exactly what the slow path refuses. Each case is tried on a fresh kernel
(slow path) and right after a good launch whose value in that slot compares equal to the bad
one where such a value exists (4 and 4.0, 1 and True...), then again (a refused launch must
not leave a half-set state that the next one reuses), and the device's block counter proves
that nothing was launched by a refused call.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import pytest

from hip_core import (
    ClosedError,
    Device,
    DeviceBuffer,
    DevicePointer,
    Kernel,
    Module,
    Program,
    Stream,
)

SOURCE = """
extern "C" __global__ void count(int* hits, int n, float x, bool flag) {
    if (threadIdx.x == 0 && threadIdx.y == 0 && threadIdx.z == 0) atomicAdd(hits, 1);
}
"""
SIGNATURE = ["int*", "int", "float", "bool"]


@pytest.fixture(scope="module")
def module(device: Device) -> Module:
    return Program(SOURCE, name="launch_arguments.hip").load(device)


class Launcher:
    """A fresh kernel, a block counter and the good arguments a case starts from."""

    def __init__(self, device: Device, module: Module) -> None:
        self.device = device
        self.kernel: Kernel = module.get_kernel("count", signature=SIGNATURE)  # never reused
        self.hits = device.allocate(4)
        self.hits.fill(0)
        self.stream = device.create_stream()
        self.expected = 0  # blocks launched by the good launches

    def good(self, grid: Any = 4, **changes: Any) -> None:
        call = {"grid": grid, "block": 32, "shared_mem": 0, "stream": self.stream}
        call.update(changes)
        args = call.pop("args", (self.hits, 4, 1.0, True))
        self.kernel.launch(call.pop("grid"), call.pop("block"), *args, **call)
        blocks = np.prod(np.atleast_1d(np.asarray(grid, dtype=np.int64)))
        self.expected += int(blocks)

    def bad(self, grid: Any = 4, block: Any = 32, args: Any = None, **kw: Any) -> None:
        kw.setdefault("stream", self.stream)
        args = (self.hits, 4, 1.0, True) if args is None else args
        self.kernel.launch(grid, block, *args, **kw)

    def launched(self) -> int:
        self.device.synchronize()
        out = np.zeros(1, dtype=np.int32)
        self.hits.copy_to(out)
        return int(out[0])


def _args(**slot: Any) -> Callable[[Launcher], dict[str, Any]]:
    """A bad call: the good arguments with one slot replaced (hits, n, x, flag by name)."""

    def make(t: Launcher) -> dict[str, Any]:
        values = {"hits": t.hits, "n": 4, "x": 1.0, "flag": True}
        values.update({k: (v(t) if callable(v) else v) for k, v in slot.items()})
        return {"args": tuple(values.values())}

    return make


def _closed(make: Callable[[Launcher], Any]) -> Callable[[Launcher], Any]:
    def closed(t: Launcher) -> Any:
        thing = make(t)
        thing.close()
        return thing

    return closed


def _closed_view(t: Launcher) -> DeviceBuffer:
    view = t.hits.view(0)
    t.good(args=(view, 4, 1.0, True))  # cached with the view: the fast path sees it again
    view.close()
    return view


def _closed_stream(t: Launcher) -> Stream:
    stream = t.device.create_stream()
    t.good(stream=stream)
    stream.close()
    return stream


def _closed_null_stream(t: Launcher) -> Stream:
    stream = Stream.null(t.device)
    t.good(stream=stream)
    stream.close()
    return stream


#: id -> (the bad call's keyword arguments, exception, the good launch's changes that make the
#: fast path see a value equal to the bad one).
CASES: dict[str, tuple[Any, type[Exception], dict[str, Any]]] = {
    "grid 0": ({"grid": 0}, ValueError, {}),
    "grid -1": ({"grid": -1}, ValueError, {}),
    "grid 2**31": ({"grid": 2**31}, ValueError, {}),
    "grid None": ({"grid": None}, TypeError, {}),
    "grid 4.0": ({"grid": 4.0}, TypeError, {}),
    "grid True": ({"grid": True}, TypeError, {"grid": 1}),
    "grid np.float64": ({"grid": np.float64(4)}, TypeError, {}),
    "grid '4'": ({"grid": "4"}, TypeError, {}),
    "grid (4.0, 1)": ({"grid": (4.0, 1)}, TypeError, {"grid": (4, 1)}),
    "grid 4 dims": ({"grid": (1, 1, 1, 1)}, TypeError, {}),
    "grid ()": ({"grid": ()}, TypeError, {}),
    "grid [0]": ({"grid": [0]}, ValueError, {}),
    "block 0": ({"block": 0}, ValueError, {}),
    "block 32.0": ({"block": 32.0}, TypeError, {}),
    "block True": ({"block": True}, TypeError, {}),
    "block 4096": ({"block": 4096}, ValueError, {}),
    "block (64, 64)": ({"block": (64, 64)}, ValueError, {}),
    "shared_mem -1": ({"shared_mem": -1}, ValueError, {}),
    "shared_mem 0.0": ({"shared_mem": 0.0}, TypeError, {}),
    "shared_mem False": ({"shared_mem": False}, TypeError, {}),
    "shared_mem None": ({"shared_mem": None}, TypeError, {}),
    "stream 0": ({"stream": 0}, TypeError, {}),
    "stream 'default'": ({"stream": "default"}, TypeError, {}),
    "stream closed": (lambda t: {"stream": _closed_stream(t)}, ClosedError, {}),
    "stream closed null": (lambda t: {"stream": _closed_null_stream(t)}, ClosedError, {}),
    "too few": (lambda t: {"args": (t.hits, 4, 1.0)}, TypeError, {}),
    "too many": (lambda t: {"args": (t.hits, 4, 1.0, True, 0)}, TypeError, {}),
    "n 4.0": (_args(n=4.0), TypeError, {}),
    "n True": (_args(n=True), TypeError, {"args": "n=1"}),
    "n np.float32": (_args(n=np.float32(4)), TypeError, {}),
    "n np.bool_": (_args(n=np.bool_(True)), TypeError, {"args": "n=1"}),
    "n complex": (_args(n=4 + 0j), TypeError, {}),
    "n 2**31": (_args(n=2**31), TypeError, {}),
    "n '4'": (_args(n="4"), TypeError, {}),
    "x True": (_args(x=True), TypeError, {"args": "x=1.0"}),
    "x complex": (_args(x=1 + 0j), TypeError, {}),
    "x '1'": (_args(x="1"), TypeError, {}),
    "x None": (_args(x=None), TypeError, {}),
    "flag 1.0": (_args(flag=1.0), TypeError, {}),
    "flag np.bool_": (_args(flag=np.bool_(True)), TypeError, {}),
    "flag 2": (_args(flag=2), TypeError, {}),
    "hits int": (_args(hits=lambda t: t.hits.ptr), TypeError, {}),
    "hits bytes": (_args(hits=b"host"), TypeError, {}),
    "hits numpy": (_args(hits=np.zeros(1, np.int32)), TypeError, {}),
    "hits closed": (_args(hits=_closed(lambda t: t.device.allocate(4))), TypeError, {}),
    "hits closed view": (_args(hits=_closed_view), TypeError, {}),
    "hits closed wrap": (
        _args(hits=_closed(lambda t: DeviceBuffer.wrap(t.hits.ptr, 4, t.device))),
        TypeError,
        {},
    ),
    "hits closed pointer": (_args(hits=DevicePointer(1, closed=True)), TypeError, {}),
}
_EQUAL_VALUES = {"n=1": (1, 1.0, True), "x=1.0": (4, 1.0, True)}


def _good_changes(t: Launcher, changes: dict[str, Any]) -> dict[str, Any]:
    if "args" in changes:  # a good value equal to the bad one in that slot
        n, x, flag = _EQUAL_VALUES[changes["args"]]
        return {"args": (t.hits, n, x, flag)}
    return changes


@pytest.mark.parametrize("path", ["slow", "fast"])
@pytest.mark.parametrize("case", list(CASES))
def test_bad_launches_are_refused_on_both_paths(
    device: Device, module: Module, case: str, path: str
) -> None:
    t = Launcher(device, module)
    call, error, changes = CASES[case]
    if path == "fast":
        t.good(**_good_changes(t, changes))
        t.good(**_good_changes(t, changes))  # the second is the cached launch
    bad = call(t) if callable(call) else call
    for _ in range(2):  # refused twice: a failure leaves nothing half-set to reuse
        with pytest.raises(error):
            t.bad(**bad)
    assert t.launched() == t.expected  # nothing ran for the refused calls
    t.good()  # and the kernel still launches
    assert t.launched() == t.expected


def test_a_failed_grid_is_not_replaced_by_the_previous_one(device: Device, module: Module) -> None:
    """The issue's case: launch(4), a failing launch(0), then launch(None) must raise."""
    t = Launcher(device, module)
    t.good(grid=4)
    with pytest.raises(ValueError):
        t.bad(grid=0)
    with pytest.raises(TypeError):
        t.bad(grid=None)
    assert t.launched() == 4


@pytest.mark.parametrize(
    "grid", [np.int64(4), np.int32(4), np.uint8(4), [4], (2, 2), [2, np.int16(2)], (4, 1, 1)]
)
def test_integral_grids_of_any_integer_type_are_accepted(
    device: Device, module: Module, grid: Any
) -> None:
    t = Launcher(device, module)
    for _ in range(2):
        t.good(grid=grid)
    t.good(grid=4)
    t.good(grid=grid)
    assert t.launched() == t.expected == 16


def test_a_mutated_grid_list_is_read_again(device: Device, module: Module) -> None:
    t = Launcher(device, module)
    grid = [4]
    t.good(grid=grid)
    grid[0] = 2
    t.kernel.launch(grid, 32, t.hits, 4, 1.0, True, stream=t.stream)
    assert t.launched() == 6


def test_equal_values_of_legal_types_give_the_same_launch(device: Device, module: Module) -> None:
    t = Launcher(device, module)
    for n, x, flag in ((4, 1.0, True), (np.int64(4), 1, 1), (4, np.float32(1.0), True)):
        t.good(args=(t.hits, n, x, flag))
    assert t.launched() == t.expected == 12

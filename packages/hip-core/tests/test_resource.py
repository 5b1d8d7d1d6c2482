"""The one closable base: every resource class derives from Resource, closes once, and every
method of a closed object raises ClosedError (a ValueError) before touching HIP."""

from __future__ import annotations

import inspect
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from hip_core import (
    ClosedError,
    Device,
    DeviceBuffer,
    Event,
    Graph,
    GraphExec,
    MemoryPool,
    Module,
    PinnedBuffer,
    Program,
    Resource,
    Stream,
    capture,
)

SOURCE = """
extern "C" __global__ void touch(float* x) { x[0] = 1.0f; }
__device__ float value;
"""


class Tools:
    """What the factories and calls below need besides the object under test."""

    def __init__(self, device: Device) -> None:
        self.device = device
        self.stream = device.create_stream()
        self.event = device.create_event()
        self.buffer = device.allocate(64)
        self.host = bytearray(64)


def _graph(tools: Tools) -> Graph:
    with capture(tools.stream) as captured:
        tools.buffer.fill(1, stream=tools.stream)
    assert captured.graph is not None
    return captured.graph


def _module(tools: Tools) -> Module:
    return Program(SOURCE).load(tools.device)


Factory = Callable[[Tools], Resource]
Call = Callable[[Any, Tools], object]

#: class -> (make an open instance, {public method or property: a call of it}). Every public
#: method and property of each class must be listed (the completeness test checks), so one
#: added later cannot skip the closed check unnoticed.
CASES: dict[type[Resource], tuple[Factory, dict[str, Call]]] = {
    Stream: (
        lambda t: t.device.create_stream(),
        {
            "sync": lambda s, t: s.sync(),
            "done": lambda s, t: s.done,
            "wait": lambda s, t: s.wait(t.event),
            "record": lambda s, t: s.record(),
            "launch_host_func": lambda s, t: s.launch_host_func(lambda: None),
            "keep_until_sync": lambda s, t: s.keep_until_sync(t.host),
            "copy_from_host": lambda s, t: s.copy_from_host(t.buffer.ptr, 0, 0),
            "address": lambda s, t: s.address,
            "is_capturing": lambda s, t: s.is_capturing,
        },
    ),
    Event: (
        lambda t: t.device.create_event(),
        {
            "record": lambda e, t: e.record(t.stream),
            "sync": lambda e, t: e.sync(),
            "done": lambda e, t: e.done,
            "elapsed_ms": lambda e, t: e.elapsed_ms(t.event),
            "ipc_handle": lambda e, t: e.ipc_handle(),
        },
    ),
    DeviceBuffer: (
        lambda t: t.device.allocate(64),
        {
            "view": lambda b, t: b.view(0),
            "copy_from": lambda b, t: b.copy_from(t.host),
            "copy_to": lambda b, t: b.copy_to(t.host),
            "fill": lambda b, t: b.fill(0, stream=t.stream),
            "ipc_handle": lambda b, t: b.ipc_handle(),
            "allocation": lambda b, t: b.allocation(),
        },
    ),
    PinnedBuffer: (
        lambda t: t.device.allocate_pinned(64),
        {
            "view": lambda b, t: b.view(0),
            "memoryview": lambda b, t: b.memoryview(),
            "numpy": lambda b, t: b.numpy(),
        },
    ),
    MemoryPool: (
        lambda t: MemoryPool(t.device),
        {
            "allocate": lambda p, t: p.allocate(16, stream=t.stream),
            "stats": lambda p, t: p.stats(),
            "trim": lambda p, t: p.trim(),
            "enable_peer_access": lambda p, t: p.enable_peer_access(t.device),
            "disable_peer_access": lambda p, t: p.disable_peer_access(t.device),
            "peer_access": lambda p, t: p.peer_access(t.device),
        },
    ),
    Module: (
        _module,
        {
            "get_kernel": lambda m, t: m.get_kernel("touch"),
            "get_global": lambda m, t: m.get_global("value"),
        },
    ),
    Graph: (_graph, {"instantiate": lambda g, t: g.instantiate()}),
    GraphExec: (
        lambda t: _graph(t).instantiate(),
        {"launch": lambda g, t: g.launch(t.stream)},
    ),
}
#: Public names that touch no HIP handle, so they still answer on a closed object.
HARMLESS = {"close", "closed", "backend", "is_view"}


def _public_members(cls: type) -> set[str]:
    """Public instance methods and properties (static and class methods make no use of an
    instance's handle)."""
    found = set()
    for name in dir(cls):
        attr = inspect.getattr_static(cls, name)
        if name.startswith("_") or isinstance(attr, (staticmethod, classmethod)):
            continue
        if inspect.isfunction(attr) or isinstance(attr, property):
            found.add(name)
    return found - HARMLESS


@pytest.fixture
def tools(device: Device, cache_dir: Path) -> Tools:
    return Tools(device)


@pytest.mark.parametrize("cls", list(CASES), ids=lambda c: c.__name__)
def test_every_public_method_is_listed(cls: type[Resource]) -> None:
    assert issubclass(cls, Resource)
    assert _public_members(cls) == set(CASES[cls][1])


@pytest.mark.parametrize("cls", list(CASES), ids=lambda c: c.__name__)
def test_closed_objects_refuse_every_method(cls: type[Resource], tools: Tools) -> None:
    make, calls = CASES[cls]
    resource = make(tools)
    with resource as entered:
        assert entered is resource and not resource.closed
    assert resource.closed  # the `with` block closed it
    resource.close()  # twice is harmless
    for call in calls.values():
        with pytest.raises(ClosedError, match=f"{cls.__name__} is closed"):
            call(resource, tools)
    assert issubclass(ClosedError, ValueError)  # what callers caught before still catches it


def test_closed_arguments_are_refused(tools: Tools) -> None:
    """A closed stream or event handed to an open object is refused as well."""
    closed_stream, closed_event = tools.device.create_stream(), tools.device.create_event()
    closed_stream.close()
    closed_event.close()
    with pytest.raises(ClosedError):
        tools.event.record(closed_stream)
    with pytest.raises(ClosedError):
        tools.stream.wait(closed_event)
    with pytest.raises(ClosedError):
        tools.buffer.fill(0, stream=closed_stream)


def test_a_kernel_of_a_closed_module_is_refused(tools: Tools) -> None:
    module = _module(tools)
    kernel = module.get_kernel("touch")
    kernel.launch(1, 1, tools.buffer)
    tools.device.synchronize()
    module.close()
    for call in (
        lambda: kernel.launch(1, 1, tools.buffer),
        lambda: kernel.attribute("NUM_REGS"),
        lambda: kernel.max_active_blocks(64),
    ):
        with pytest.raises(ClosedError):
            call()


def test_only_resources_a_launch_can_name_invalidate_launch_caches(device: Device) -> None:
    """Closing an event, a pool or a graph, or collecting anything, leaves every kernel's
    cached packing valid; closing a buffer or a stream does not."""
    from hip_core import MemoryPool, _resource

    before = _resource.generation
    device.create_event().close()
    MemoryPool(device).close()
    buffer = device.allocate(64)
    del buffer  # collected: a cache would still hold it, so nothing it names is gone
    assert _resource.generation == before
    device.allocate(64).close()
    assert _resource.generation > before

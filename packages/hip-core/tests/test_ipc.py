"""Buffers and events shared with another, real process (multiprocessing, spawn start method):
the child writes into the parent's buffer and the parent sees it; an event crosses both ways;
and every refusal, checked before anything reaches the device.
"""

from __future__ import annotations

import dataclasses
import importlib
import multiprocessing
import os
import pickle
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType
from typing import Any

import numpy as np
import pytest

from hip_core import (
    ClosedError,
    Device,
    DeviceBuffer,
    HipError,
    IpcEventHandle,
    IpcHandle,
    MemoryPool,
)
from hip_ffi.constants import ERROR_CODES

SPAWN = multiprocessing.get_context("spawn")
HERE = str(Path(__file__).resolve().parent)
EXAMPLE = Path(__file__).resolve().parents[3] / "docs" / "examples" / "share_memory.py"


@pytest.fixture(scope="module")
def children() -> Iterator[ModuleType]:
    """hip_core_ipc_children, importable by name here and in spawned children (which start
    with this process's sys.path)."""
    sys.path.insert(0, HERE)
    try:
        yield importlib.import_module("hip_core_ipc_children")
    finally:
        sys.path.remove(HERE)


def run(target: Any, platform: str, *args: Any) -> tuple[Any, ...]:
    """Run `target(platform, *args, results)` in a spawned process; what it reported."""
    results = SPAWN.Queue()
    child = SPAWN.Process(target=target, args=(platform, *args, results))
    child.start()
    try:
        answer: tuple[Any, ...] = results.get(timeout=240)
    finally:
        child.join(60)
    assert child.exitcode == 0, f"the child exited with {child.exitcode}"
    return answer


def test_a_child_writes_into_this_process_buffer(
    device: Device, platform: str, children: ModuleType
) -> None:
    buffer = device.allocate(1 << 20)
    buffer.fill(1)
    handle = buffer.view(4096, 8192).ipc_handle()  # a view: the handle carries its range
    assert isinstance(handle, IpcHandle) and (handle.offset, handle.size) == (4096, 8192)
    assert pickle.loads(pickle.dumps(handle)) == handle
    payload = np.arange(1024, dtype=np.int32).tobytes()
    answer = run(children.write_then_read, platform, handle, payload)
    assert answer == ("ok", payload + b"\x01" * (8192 - len(payload))), answer
    out = bytearray(1 << 20)
    buffer.copy_to(out)  # zero-copy: the child wrote into this buffer's memory
    assert out == b"\x01" * 4096 + payload + b"\x01" * ((1 << 20) - 4096 - len(payload))
    buffer.close()


def test_an_event_crosses_both_ways(device: Device, platform: str, children: ModuleType) -> None:
    buffer = device.allocate(4096)
    buffer.fill(0)
    event = device.create_event(timing=False, interprocess=True)
    handle = event.ipc_handle()
    assert isinstance(handle, IpcEventHandle) and pickle.loads(pickle.dumps(handle)) == handle
    stream = device.create_stream()
    gate = SPAWN.Queue()  # the child's `go`; released once it saw the event pending
    released = []
    stream.launch_host_func(lambda: released.append(gate.get(timeout=180)))
    buffer.fill(7, stream=stream)
    event.record(stream)
    results = SPAWN.Queue()
    child = SPAWN.Process(
        target=children.wait_then_answer,
        args=(platform, handle, buffer.ipc_handle(), gate, results),
    )
    child.start()
    released_gate = False
    try:
        opened = results.get(timeout=120)
        assert opened == ("opened", False), opened  # the parent's stream is held: pending
        gate.put("go")  # releases this process's stream...
        gate.put("go")  # ...and the child's wait
        released_gate = True
        answer = results.get(timeout=120)
    finally:
        if not released_gate:  # a failure above must not leave the stream held for minutes
            gate.put("go")
            gate.put("go")
        child.join(60)
    assert answer[0] == "ok", answer
    assert answer[1] == b"\x07" * 4096  # the child waited for this process's fill
    event.sync()  # the child recorded it after its own fill
    out = bytearray(4096)
    buffer.copy_to(out)
    assert out == b"\x09" * 4096
    stream.sync()
    event.close()
    buffer.close()


def test_handles_are_checked_before_reaching_the_device(device: Device, platform: str) -> None:
    buffer = device.allocate(4096)
    handle = buffer.ipc_handle()
    with pytest.raises(HipError) as raised:  # HIP refuses its own process's handle
        handle.open()
    assert raised.value.code == ERROR_CODES["hipErrorInvalidContext"]
    altered = bytes([handle.data[0] ^ 1]) + handle.data[1:]
    for corrupt in (
        dataclasses.replace(handle, data=altered),
        dataclasses.replace(handle, size=handle.size + 1),
        dataclasses.replace(handle, data=handle.data[:32]),
        dataclasses.replace(handle, pid=handle.pid + 1),  # (its digest would not match)
    ):
        with pytest.raises(ValueError, match="corrupt IpcHandle"):
            corrupt.open()
        with pytest.raises(ValueError, match="corrupt IpcHandle"):
            DeviceBuffer.from_ipc(corrupt)
    elsewhere = dataclasses.replace(handle, platform="amd")._sealed()
    with pytest.raises(ValueError, match="cannot open on"):
        elsewhere.open()
    buffer.close()
    with pytest.raises(ClosedError):
        buffer.ipc_handle()


def test_a_child_writes_into_a_caching_pool_buffer(
    device: Device, platform: str, children: ModuleType
) -> None:
    with MemoryPool(device, backend="caching") as pool:
        first = pool.allocate(4096, stream=None)  # (a block that a second one follows)
        buffer = pool.allocate(1 << 16, stream=None)
        buffer.fill(1)
        handle = buffer.view(512, 4096).ipc_handle()  # a view of a pool block
        assert (handle.offset, handle.size) == (512, 4096)
        payload = np.arange(256, dtype=np.int32).tobytes()
        answer = run(children.write_then_read, platform, handle, payload)
        assert answer == ("ok", payload + b"\x01" * (4096 - len(payload))), answer
        out = bytearray(1 << 16)
        buffer.copy_to(out)  # the child wrote into the pool's block
        assert out == b"\x01" * 512 + payload + b"\x01" * ((1 << 16) - 512 - len(payload))
        buffer.close()
        first.close()


def test_only_plain_buffers_and_interprocess_events_export(device: Device) -> None:
    with MemoryPool(device) as pool:
        pooled = pool.allocate(4096, stream=None)
        if pool.backend == "hip":  # stream-ordered memory: no IPC without shareable pools
            with pytest.raises(ValueError, match="backend='caching'"):
                pooled.view(0, 64).ipc_handle()
        pooled.close()
    owned = device.allocate(64)
    wrapped = DeviceBuffer.wrap(owned.ptr, 64, device)
    with pytest.raises(ValueError, match=r"Device\.allocate"):
        wrapped.ipc_handle()
    with pytest.raises(ValueError, match="interprocess=True"):
        device.create_event(timing=False).ipc_handle()
    with pytest.raises(ValueError, match="cannot time"):
        device.create_event(interprocess=True)


def test_a_handle_of_a_closed_buffer_no_longer_opens(
    device: Device, platform: str, children: ModuleType
) -> None:
    if platform != "cpu":
        pytest.skip("opening a freed allocation's handle is undefined on HIP and CUDA")
    buffer = device.allocate(4096)
    handle = buffer.ipc_handle()
    buffer.close()
    answer = run(children.open_handle, platform, handle)
    assert answer[0] == "error" and answer[1] == "HipInvalidValueError", answer
    assert "hipErrorInvalidHandle" in answer[2]


def test_the_documented_example_runs(platform: str) -> None:
    """docs/multi-gpu.md's example, as a script (the cpu platform with two devices)."""
    env = {**os.environ, "HIP_PLATFORM": platform, "HIP_FFI_CPU_DEVICES": "2"}
    done = subprocess.run([sys.executable, str(EXAMPLE)], env=env, capture_output=True,
                          text=True, timeout=600)  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    assert "doubled the buffer" in done.stdout

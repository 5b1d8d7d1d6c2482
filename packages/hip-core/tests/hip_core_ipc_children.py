"""What test_ipc.py runs in other processes (multiprocessing with the spawn start method).

A spawned child imports its target by module name, which a test module under pytest's
importlib mode does not have; test_ipc.py puts this folder on sys.path for its children. Every
function runs on the platform the parent names and puts ("ok", result) or ("error", class
name, message) on `results`, so a failure in the child fails the test with its reason.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from hip_core import Device, IpcEventHandle, IpcHandle, use_platform


def _report(results: Any, platform: str, work: Callable[[], object]) -> None:
    try:
        with use_platform(platform):
            results.put(("ok", work()))
    except BaseException as error:  # the parent reports it
        results.put(("error", type(error).__name__, str(error)))


def write_then_read(platform: str, handle: IpcHandle, payload: bytes, results: Any) -> None:
    """Open `handle`, write `payload` at its start, read all of it back, close it."""

    def work() -> bytes:
        buffer = handle.open()
        buffer.copy_from(payload)
        seen = bytearray(buffer.size)
        buffer.copy_to(seen)
        twice = handle.open()  # a second open of one handle (reference-counted by HIP)
        twice.close()
        buffer.close()
        return bytes(seen)

    _report(results, platform, work)


def open_handle(platform: str, handle: IpcHandle, results: Any) -> None:
    def work() -> int:
        buffer = handle.open()
        buffer.close()
        return buffer.size

    _report(results, platform, work)


def wait_then_answer(
    platform: str,
    event_handle: IpcEventHandle,
    handle: IpcHandle,
    go: Any,
    results: Any,
) -> None:
    """Open the event and say whether it is done; wait for `go`, then for the event (the
    parent's fill), read the buffer, write 9s over it and record the event after that."""

    def work() -> bytes:
        event, buffer = event_handle.open(), handle.open()
        results.put(("opened", event.done))
        go.get(timeout=120)
        event.sync()
        seen = bytearray(buffer.size)
        buffer.copy_to(seen)
        stream = Device.current().create_stream()
        buffer.fill(9, stream=stream)
        event.record(stream)
        stream.sync()
        buffer.close()
        event.close()
        return bytes(seen)

    _report(results, platform, work)

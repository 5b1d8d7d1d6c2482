"""Event creation and close (issue 15 times create + close against cuda.core), and the
recycling of closed events' native handles."""

from __future__ import annotations

import threading

import pytest

from hip_core import ClosedError, Device
from hip_core import event as event_module


def test_event_close_twice_and_while_held(device: Device) -> None:
    """Event.close: twice is harmless; a held event is retired at once and destroyed when let go."""
    event = device.create_event(timing=False)
    event.close()
    event.close()
    assert event.closed
    held = device.create_event(timing=False)
    held._hold()
    held.close()
    assert held.closed
    with pytest.raises(ClosedError):
        held.sync()
    held._let_go()  # destroys it now (no error)


def test_a_failing_fast_entry_falls_back_to_the_surface_call(
    device: Device, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Event create/destroy through `HipApi.fast`: a non-zero status there (no effect) makes
    the surface call again, whose status is HIP's; an event still works either way."""
    from hip_core._hip import hip

    api = hip()
    calls: list[str] = []

    def failing(name: str) -> object:
        def call(*_: object) -> int:
            calls.append(name)
            return 999  # a platform's own failure code, with no effect

        return call

    entries = (
        *(api, api.ffi.typeof("hipEvent_t*"), failing("create"), failing("destroy"), []),
        *(failing("query"), {}),  # (no recycled handles: the create is made)
    )
    monkeypatch.setattr(event_module, "_last", entries)
    event = device.create_event(timing=False)
    event.record(device.default_stream)
    event.sync()
    assert event.done
    event.close()  # a query that fails never recycles: the handle is destroyed
    assert calls == ["create", "query", "destroy"]
    with pytest.raises(ClosedError):
        event.sync()


def test_a_closed_event_s_handle_is_reused_as_a_new_event(device: Device) -> None:
    """Same device and flags: the next event gets the handle back, done and unrecorded (an
    elapsed time from it is refused, not an answer from its earlier life)."""
    first = device.create_event()
    first.record(device.default_stream)
    first.sync()
    handle = first.handle
    first.close()
    again = device.create_event()
    assert again.handle == handle and again.done
    other = device.create_event()
    other.record(device.default_stream)
    other.sync()
    with pytest.raises(ValueError, match="recorded"):
        again.elapsed_ms(other)
    again.record(device.default_stream)
    other.record(device.default_stream)
    other.sync()
    assert again.elapsed_ms(other) >= 0.0
    untimed = device.create_event(timing=False)  # another kind: not that handle
    assert untimed.handle != handle
    for event in (again, other, untimed):
        event.close()


def test_an_event_still_pending_at_close_is_destroyed_not_reused(device: Device) -> None:
    stream = device.create_stream()
    gate = threading.Event()
    stream.launch_host_func(lambda: gate.wait(60))
    pending = device.create_event(timing=False)
    pending.record(stream)  # behind the host func: not done
    handle = pending.handle
    assert not pending.done
    pending.close()
    fresh = device.create_event(timing=False)
    kinds = event_module._last[6]
    assert all(handle not in free for free in kinds.values())
    gate.set()
    stream.sync()
    fresh.close()
    stream.close()


def test_recycling_keeps_at_most_64_of_a_kind_and_never_an_interprocess_event(
    device: Device,
) -> None:
    events = [device.create_event(timing=False) for _ in range(80)]
    for event in events:
        event.close()
    kinds = event_module._last[6]
    assert len(kinds[device.ordinal << 3 | 2]) == 64  # (EVENT_DISABLE_TIMING)
    shared = device.create_event(timing=False, interprocess=True)
    shared.close()
    assert all(key & 4 == 0 for key in kinds)  # (EVENT_INTERPROCESS: never kept)

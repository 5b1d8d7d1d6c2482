"""Event creation and close (issue 15 times create + close against cuda.core)."""

from __future__ import annotations

import pytest

from hip_core import ClosedError, Device


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
    from hip_core import event as event_module
    from hip_core._hip import hip

    api = hip()
    calls: list[str] = []

    def failing(name: str) -> object:
        def call(*_: object) -> int:
            calls.append(name)
            return 999  # a platform's own failure code, with no effect

        return call

    entries = (api, api.ffi.typeof("hipEvent_t*"), failing("create"), failing("destroy"), [])
    monkeypatch.setattr(event_module, "_last", entries)
    event = device.create_event(timing=False)
    event.record(device.default_stream)
    event.sync()
    assert event.done
    event.close()
    assert calls == ["create", "destroy"]
    with pytest.raises(ClosedError):
        event.sync()


def test_an_adopted_handle_is_an_event_that_destroys_it(
    device: Device, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Event.adopt (IpcEventHandle.open's way in): the event works as one made here, and its
    close destroys the handle once."""
    from hip_core import event as event_module
    from hip_core._hip import hip
    from hip_ffi.constants import EVENT_DISABLE_TIMING

    api = hip()
    out = api.ffi.new("hipEvent_t*")
    assert api.hipEventCreateWithFlags(out, EVENT_DISABLE_TIMING) == 0
    destroyed: list[object] = []
    destroy = api.fast("hipEventDestroy")

    def spy(handle: object) -> int:
        destroyed.append(handle)
        return int(destroy(handle))

    entries = (api, api.ffi.typeof("hipEvent_t*"), None, spy, [])
    monkeypatch.setattr(event_module, "_last", entries)
    event = event_module.Event.adopt(out[0], device, interprocess=False)
    assert (event.device, event.timing, event.interprocess) == (device, False, False)
    event.record(device.default_stream)
    event.sync()
    assert event.done
    with pytest.raises(ValueError, match="timing=True"):
        event.elapsed_ms(event)
    event.close()
    event.close()
    assert destroyed == [out[0]]
    with pytest.raises(ClosedError):
        event.sync()

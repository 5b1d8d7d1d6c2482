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

"""How many devices the cpu platform has, and which one is current on each host thread.

`HIP_FFI_CPU_DEVICES=N` (read once per process, at the platform's load; default 1, at most
`MAX_DEVICES`) gives the platform N devices, ordinals 0 to N-1. Each is the same host (same
cores, same memory) with its own memory accounting (limits.BUDGETS: the host's bound split
evenly), its own null stream (streams.py), its own default memory pool (pools.py) and its own
peers (peers.py). As in HIP, every host thread starts on device 0 and hipSetDevice changes the
current device of the calling thread only.
"""

from __future__ import annotations

import functools
import os
import threading

MAX_DEVICES = 64


def parse(text: str) -> int:
    """The device count that a `HIP_FFI_CPU_DEVICES` value asks for ("" is 1).

    Raises ValueError, naming the variable, for anything but a whole number 1..MAX_DEVICES.
    """
    text = text.strip()
    if not text:
        return 1
    if not text.isdigit() or not 1 <= int(text) <= MAX_DEVICES:
        raise ValueError(
            f"HIP_FFI_CPU_DEVICES must be a whole number from 1 to {MAX_DEVICES}, not {text!r}"
        )
    return int(text)


@functools.cache
def count() -> int:
    """The number of devices, from `HIP_FFI_CPU_DEVICES` as it was at the first call."""
    return parse(os.environ.get("HIP_FFI_CPU_DEVICES", ""))


def valid(ordinal: int) -> bool:
    return 0 <= ordinal < count()


class _Current(threading.local):
    ordinal = 0  # every thread starts on device 0, as in HIP


_current = _Current()


def current() -> int:
    """The calling thread's current device (hipGetDevice)."""
    return _current.ordinal


def make_current(ordinal: int) -> None:
    """hipSetDevice's effect: `ordinal` (already checked) becomes this thread's device."""
    _current.ordinal = ordinal

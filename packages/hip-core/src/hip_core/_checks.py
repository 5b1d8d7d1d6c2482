"""Argument checks shared by buffers, pools and launches."""

from __future__ import annotations

import operator
from typing import Any


def integer(value: Any, what: str) -> int:
    """`value` as an int: any integral type (int, numpy integers, anything with `__index__`),
    never a bool, a float or a string (TypeError naming `what`)."""
    if type(value) is int:
        return value
    if not isinstance(value, bool):
        try:
            return operator.index(value)
        except TypeError:
            pass
    raise TypeError(f"{what} must be an integer, not {type(value).__name__} {value!r}")

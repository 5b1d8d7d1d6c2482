"""Timing loops shared by the benchmarks: host wall time over back-to-back calls plus one
synchronize, median of repeats after a warm-up.

The same method as the repository's bench/ scripts (bench/_harness.py): what a Python caller
pays per call, including queueing, with the device work drained by one sync at the end.
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class Timing:
    """Microseconds per call: the median and the range over the repeats."""

    median_us: float
    min_us: float
    max_us: float


def per_call(
    fn: Callable[[], Any], calls: int, sync: Callable[[], Any], repeats: int = 5
) -> Timing:
    """Time `calls` calls of `fn` followed by one `sync()`, `repeats` times, after a warm-up of
    max(calls // 10, 1) calls; per-call microseconds."""
    if calls < 1 or repeats < 1:
        raise ValueError("calls and repeats must be >= 1")
    for _ in range(max(calls // 10, 1)):
        fn()
    sync()
    samples = []
    for _ in range(repeats):
        start = time.perf_counter()
        for _ in range(calls):
            fn()
        sync()
        samples.append((time.perf_counter() - start) / calls * 1e6)
    return Timing(statistics.median(samples), min(samples), max(samples))


def gb_per_s(nbytes: float, us: float) -> float:
    """Bytes moved in `us` microseconds as GB/s (1e9 bytes per second)."""
    return nbytes / us / 1e3 if us > 0 else float("inf")


__all__ = ["Timing", "gb_per_s", "per_call"]

"""The one timing loop of the benchmarks, `hip-backend bench` and the repository's bench/
scripts alike: host wall time over back-to-back calls plus one synchronize, median of repeats
after a warm-up.

What a Python caller pays per call, including queueing, with the device work drained by one
sync at the end of each repeat. bench/ scripts choose more repeats and a longer warm-up
(bench/_harness.py); the loop is this one.
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


def _calls(fn: Callable[[], Any], calls: int) -> int:
    for _ in range(calls):
        fn()
    return 0


def _status_calls(fn: Callable[[], Any], calls: int) -> int:
    # OR-ed and checked after the clock stops, so the check costs every implementation alike.
    bad = 0
    for _ in range(calls):
        bad |= fn() or 0
    return bad


def per_call(
    fn: Callable[[], Any],
    calls: int,
    sync: Callable[[], Any],
    repeats: int = 5,
    *,
    warmup: int | None = None,
    status: bool = False,
    before: Callable[[], Any] | None = None,
) -> Timing:
    """Time `calls` calls of `fn` followed by one `sync()`, `repeats` times; per-call µs.

    Args:
        warmup: untimed calls first, then one `sync()` (default max(calls // 10, 1); 0: none).
        status: `fn` returns a HIP status (an int, or None for success); a non-zero one raises
            RuntimeError once the timing is done. Without it, what `fn` returns is ignored.
        before: called before each repeat, outside the timing (e.g. dropping the page cache).
    """
    if calls < 1 or repeats < 1:
        raise ValueError("calls and repeats must be >= 1")
    loop = _status_calls if status else _calls
    bad = 0
    warmup = max(calls // 10, 1) if warmup is None else warmup
    if warmup:
        bad |= loop(fn, warmup)
        sync()
    samples = []
    for _ in range(repeats):
        if before is not None:
            before()
        start = time.perf_counter()
        bad |= loop(fn, calls)
        sync()
        samples.append((time.perf_counter() - start) / calls * 1e6)
    if bad:
        raise RuntimeError(f"a call failed (status bits {bad:#x})")
    return Timing(statistics.median(samples), min(samples), max(samples))


def gb_per_s(nbytes: float, us: float) -> float:
    """Bytes moved in `us` microseconds as GB/s (1e9 bytes per second)."""
    return nbytes / us / 1e3 if us > 0 else float("inf")


__all__ = ["Timing", "gb_per_s", "per_call"]

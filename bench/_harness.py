"""What every benchmark here shares: result rows, timing loops, anchor discovery, the runner.

A benchmark script imports this (scripts run from bench/, so it is on sys.path), records rows
with `emit`, and hands its measurements to `run` so that an anchor that cannot run here is
reported as skipped instead of stopping the run.
"""

from __future__ import annotations

import json
import os
import shutil
import statistics
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

ROWS: list[dict[str, Any]] = []


def emit(**row: Any) -> None:
    """Record one result row and print it as a JSON line."""
    ROWS.append(row)
    print(json.dumps(row), flush=True)


def per_call_us(
    fn: Callable[[], Any], calls: int, sync: Callable[[], Any], repeats: int = 7
) -> tuple[float, float, float]:
    """(median, min, max) over `repeats` of (wall time of `calls` calls + one sync) / calls, in µs.

    `fn` may return a status: any non-zero int fails the benchmark (checked once, at the end,
    so the check costs every implementation the same).
    """
    bad = 0
    for _ in range(max(calls // 10, 100)):
        bad |= fn() or 0
    sync()
    samples = []
    for _ in range(repeats):
        start = time.perf_counter()
        for _ in range(calls):
            bad |= fn() or 0
        sync()
        samples.append((time.perf_counter() - start) / calls * 1e6)
    if bad:
        raise RuntimeError(f"a call failed (status bits {bad:#x})")
    return statistics.median(samples), min(samples), max(samples)


def nvcc() -> str:
    """The CUDA compiler for raw-C anchors; RuntimeError when there is none."""
    found = shutil.which("nvcc")
    if found is None and Path("/usr/local/cuda/bin/nvcc").exists():
        found = "/usr/local/cuda/bin/nvcc"
    if found is None:
        raise RuntimeError("no nvcc")
    return found


def cuda_core() -> Any:
    """The cuda.core module (its API moved out of `cuda.core.experimental` in newer releases)."""
    try:
        import cuda.core as cc

        cc.Device  # noqa: B018 - newer releases export here
        return cc
    except (ImportError, AttributeError):
        import cuda.core.experimental as cc

        return cc


def run(name: str, benches: Sequence[tuple[str, Callable[[], None]]]) -> None:
    """Run each (implementation, function); failures become `skipped` rows. Saves the rows as
    `<name>.jsonl` under --out DIR or $OUT when given."""
    for impl, bench in benches:
        try:
            bench()
        except Exception as error:  # an anchor missing here is reported, not fatal
            emit(bench="skipped", impl=impl, reason=f"{type(error).__name__}: {error}"[:300])
    out = sys.argv[sys.argv.index("--out") + 1] if "--out" in sys.argv else os.environ.get("OUT")
    if out:
        Path(out).mkdir(parents=True, exist_ok=True)
        Path(out, f"{name}.jsonl").write_text("".join(json.dumps(r) + "\n" for r in ROWS))


def median_us(fn: Callable[[], Any], calls: int, sync: Callable[[], Any]) -> float:
    """The median of `per_call_us`, in µs."""
    return per_call_us(fn, calls, sync)[0]

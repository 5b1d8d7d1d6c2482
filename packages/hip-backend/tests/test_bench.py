"""`hip-backend bench`: every group runs here and reports numbers (never judged by speed)."""

from __future__ import annotations

import json
from typing import TYPE_CHECKING

import pytest

from hip_backend.bench import GROUPS, per_call

if TYPE_CHECKING:
    from conftest import Cli


def test_quick_bench_json_has_every_group(cli: Cli) -> None:
    done = cli("bench", "--quick", "--json")
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout)
    assert report["quick"] is True and report["platform"]
    rows = report["rows"]
    groups = {row["group"] for row in rows}  # collectives: only with two or more devices
    assert set(GROUPS) - {"collectives"} <= groups <= set(GROUPS)
    for row in rows:
        assert row["skipped"] is None, row  # ModelRuntime and hipBLAS exist on every platform
        assert row["us"] > 0, row
    rates = {row["name"]: row for row in rows if row["rate"] is not None}
    assert "device->device" in rates and rates["device->device"]["unit"] == "GB/s"
    assert rates["ModelRuntime.load (safetensors)"]["rate"] > 0


def test_bench_table_for_one_group(cli: Cli) -> None:
    done = cli("bench", "--quick", "--only", "launch")
    assert done.returncode == 0, done.stderr
    assert "Kernel.launch (empty kernel)" in done.stdout and "copy" not in done.stdout


def test_per_call_counts_calls_and_syncs() -> None:
    calls, syncs = [], []
    timing = per_call(lambda: calls.append(1), 10, lambda: syncs.append(1), repeats=3)
    assert len(calls) == 1 + 3 * 10 and len(syncs) == 1 + 3
    assert 0 <= timing.min_us <= timing.median_us <= timing.max_us
    with pytest.raises(ValueError):
        per_call(lambda: None, 0, lambda: None)


def test_per_call_checks_statuses_after_timing_and_runs_before_each_repeat() -> None:
    calls, befores = [], []
    per_call(lambda: calls.append(1), 4, lambda: None, repeats=2, warmup=0,
             before=lambda: befores.append(len(calls)))  # fmt: skip
    assert len(calls) == 2 * 4 and befores == [0, 4]  # no warm-up; `before` precedes each repeat
    assert per_call(lambda: 0, 3, lambda: None, status=True).median_us >= 0
    with pytest.raises(RuntimeError, match="status bits 0x2"):
        per_call(lambda: 2, 3, lambda: None, status=True)

"""`hip-backend selftest` passes on the selected platform (cpu in CI), and says so when it
does not."""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

import pytest

import hip_core
from hip_backend.cli import FAILED, OK, UNAVAILABLE, main
from hip_backend.selftest import CHECKS, entry_points
from hip_backend.selftest import runner as selftest_runner
from hip_backend.selftest.checks import OpCheck
from hip_runtime.libraries import kernel_sources
from hip_runtime.testing import DTYPES, Mismatch, assert_close

if TYPE_CHECKING:
    from conftest import Cli


def test_selftest_passes_with_a_table(cli: Cli) -> None:
    done = cli("selftest")
    assert done.returncode == OK, done.stdout + done.stderr
    lines = done.stdout.splitlines()
    for check in CHECKS:
        for dtype in DTYPES:
            row = [line for line in lines if line.startswith(f"{check.name} ") and f" {dtype} "
                   in line and not line.startswith(f"{check.name} (")]  # fmt: skip
            assert len(row) == 1 and " pass " in row[0], (check.name, dtype, row)
    assert any(line.startswith("compile norms.hip") and " pass " in line for line in lines)
    assert " 0 failed" in lines[-1]


def test_selftest_json_reports_every_check(cli: Cli) -> None:
    done = cli("selftest", "--json", "--only", "layernorm", "--only", "matmul")
    assert done.returncode == OK, done.stderr
    report = json.loads(done.stdout)
    assert report["passed"] is True
    checked = {(r["check"], r["dtype"]) for r in report["results"] if r["dtype"] != "-"}
    assert checked == {(name, t) for name in ("layernorm", "matmul") for t in DTYPES}
    compiled = [r for r in report["results"] if r["check"].startswith("compile ")]
    assert compiled and all(r["passed"] for r in compiled)


def test_a_wrong_result_fails_with_exit_1(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    def off_by_one(backend: Any, rng: Any, dtype: str) -> float:
        x = rng.standard_normal((3, 5)).astype(DTYPES[dtype])
        got = backend.add(backend.from_numpy(x), backend.from_numpy(x)).to_numpy()
        return assert_close(got, 2.0 * x.astype("float64") + 1.0, dtype)

    monkeypatch.setattr(selftest_runner, "CHECKS", (OpCheck("add", off_by_one),))
    monkeypatch.setenv("HIP_PLATFORM", "cpu")
    assert main(["selftest", "--only", "add"]) == FAILED
    out = capsys.readouterr().out
    assert out.count(" FAIL ") == len(DTYPES) and "out of tolerance" in out


def test_no_device_exits_3(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("HIP_PLATFORM", "cpu")
    monkeypatch.setattr(hip_core.Device, "count", staticmethod(lambda: 0))
    assert main(["selftest"]) == UNAVAILABLE
    assert "sees no device" in capsys.readouterr().err


def test_assert_close_rejects_nan_and_wrong_dtype() -> None:
    import numpy as np

    with pytest.raises(Mismatch):
        assert_close(np.array([np.nan], np.float32), np.array([1.0]), "f32")
    with pytest.raises(Mismatch, match="dtype"):
        assert_close(np.array([1.0], np.float64), np.array([1.0]), "f32")
    assert assert_close(np.array([1.0], np.float32), np.array([1.0]), "f32") == 0.0


def test_entry_points_are_found_with_and_without_launch_bounds() -> None:
    source = (
        'extern "C" __global__ void __launch_bounds__(1024) a_f32(float* x) {}\n'
        'extern "C" __global__ void b_f16(const hipk::f16* x,\n    long long n) {}\n'
        "__device__ void helper() {}\n"
    )
    assert entry_points("made_up.hip", source) == ["a_f32", "b_f16"]


def test_entry_points_of_the_sources_that_take_structs() -> None:
    """copy.hip and indexing.hip take argument structs by value (kernel_structs): the scan
    reads their layouts instead of refusing the parameter (the selftest's compile rows)."""
    sources = kernel_sources.sources()
    assert "copy_u16" in entry_points("copy.hip", sources["copy.hip"])
    assert "gather_u32" in entry_points("indexing.hip", sources["indexing.hip"])

"""The self-test behind `hip-backend selftest`: every kernel compiled and every HipBackend op
checked against its float64 numpy reference (hip_runtime.testing) on the current platform.

    from hip_backend.selftest import run_selftest
    failed = [r for r in run_selftest() if not r.passed]
"""

from __future__ import annotations

from hip_backend.selftest.checks import CHECKS, OpCheck
from hip_backend.selftest.runner import Result, entry_points, run_selftest

__all__ = [
    "CHECKS",
    "OpCheck",
    "Result",
    "entry_points",
    "run_selftest",
]

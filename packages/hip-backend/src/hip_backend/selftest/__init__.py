"""The self-test behind `hip-backend selftest`: every kernel compiled and every HipBackend op
checked against a float64 numpy reference on the current platform.

    from hip_backend.selftest import run_selftest
    failed = [r for r in run_selftest() if not r.passed]
"""

from __future__ import annotations

from hip_backend.selftest.checks import CHECKS, OpCheck
from hip_backend.selftest.references import DTYPES, TOLERANCE, Mismatch
from hip_backend.selftest.runner import Result, entry_points, run_selftest

__all__ = [
    "CHECKS",
    "DTYPES",
    "TOLERANCE",
    "Mismatch",
    "OpCheck",
    "Result",
    "entry_points",
    "run_selftest",
]

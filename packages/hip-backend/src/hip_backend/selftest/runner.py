"""Runs the self-test: compile every kernel source, run every op check in every float type, and
note any kernel entry point that no check launched.

    from hip_backend.selftest import run_selftest
    results = run_selftest()            # on device 0 of the process's platform
    assert all(r.passed for r in results)

Each result is one row of the table `hip-backend selftest` prints.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from hip_backend.selftest.checks import CHECKS, OpCheck
from hip_core.signature import kernels_in_source
from hip_runtime import HipBackend, KernelCache
from hip_runtime.libraries import kernel_sources
from hip_runtime.libraries.kernel_structs import STRUCTS
from hip_runtime.testing import DTYPES, tolerance


@dataclass(frozen=True)
class Result:
    """One row: what was checked, in which type, how it went, and the evidence.

    `status` is "pass", "fail", or "untested" (kernels that compiled but that no op check
    launches: a new kernel without an op yet; reported, not a failure). `error` is the largest
    error as a fraction of the allowed one (0 for bit-exact checks), None where nothing numeric
    was compared; `detail` says what failed or what was covered.
    """

    check: str
    dtype: str
    status: str
    seconds: float
    error: float | None = None
    detail: str = ""

    @property
    def passed(self) -> bool:
        return self.status != "fail"


class RecordingKernelCache(KernelCache):
    """A KernelCache that remembers every (source, kernel) the ops asked for."""

    def __init__(self, device: Any) -> None:
        super().__init__(device)
        self.used: set[tuple[str, str]] = set()

    def get(self, source: str, name: str) -> Any:
        self.used.add((source, name))
        return super().get(source, name)


def entry_points(name: str, source: str) -> list[str]:
    """The `__global__` kernel names the kernel source `name` (its text: `source`) defines, in
    order (hip-core's own scan, which knows `__launch_bounds__` wherever it stands and skips
    comments; the structs some take by value from kernel_structs)."""
    return list(kernels_in_source(source, STRUCTS.get(name)))


def _first_line(error: BaseException) -> str:
    text = str(error).strip().splitlines()
    return f"{type(error).__name__}: {text[0] if text else ''}"[:160]


def _compile(backend: HipBackend) -> list[Result]:
    results = []
    for source, text in kernel_sources.sources().items():
        names = entry_points(source, text)
        start = time.perf_counter()
        status, detail = "pass", f"{len(names)} kernels"
        try:
            module = backend.kernels.module(source)
            for name in names:
                module.get_kernel(name)
        except Exception as error:
            status, detail = "fail", _first_line(error)
        if not names:
            status, detail = "fail", "no entry points"
        seconds = time.perf_counter() - start
        results.append(Result(f"compile {source}", "-", status, seconds, detail=detail))
    return results


def _run_check(backend: HipBackend, check: OpCheck, dtype: str, seed: int) -> Result:
    rng = np.random.default_rng([seed, *check.name.encode(), *dtype.encode()])
    start = time.perf_counter()
    try:
        error = check.run(backend, rng, dtype)
    except Exception as failure:
        seconds = time.perf_counter() - start
        return Result(check.name, dtype, "fail", seconds, detail=_first_line(failure))
    seconds = time.perf_counter() - start
    rtol, atol = tolerance(dtype)
    detail = f"rtol {rtol:g}, atol {atol:g}" if error else "bit-exact"
    return Result(check.name, dtype, "pass", seconds, error, detail)


def _coverage(backend: HipBackend, used: set[tuple[str, str]]) -> Result:
    defined = {
        (source, name)
        for source, text in kernel_sources.sources().items()
        for name in entry_points(source, text)
    }
    missed = sorted(f"{name} ({source})" for source, name in defined - used)
    detail = f"{len(defined & used)}/{len(defined)} kernels launched by the op checks"
    if missed:
        detail += "; compiled only: " + ", ".join(missed)
    return Result("kernel coverage", "-", "untested" if missed else "pass", 0.0, detail=detail)


def run_selftest(
    device: Any = None,
    *,
    only: Sequence[str] = (),
    seed: int = 0,
    on_result: Callable[[Result], None] | None = None,
) -> list[Result]:
    """Compile every kernel source on `device` (default: the current one), then run the op
    checks (`only`: those named, else all) in f32, f16 and bf16 with inputs from `seed`.

    Returns every result; `on_result` sees each as it is produced. Failures are results, not
    exceptions. Kernel coverage is checked only when every op check runs.
    """
    unknown = sorted(set(only) - {check.name for check in CHECKS})
    if unknown:
        raise ValueError(f"no check named {', '.join(unknown)}")
    results: list[Result] = []

    def record(result: Result) -> None:
        results.append(result)
        if on_result is not None:
            on_result(result)

    with HipBackend(device) as backend:
        recorder = RecordingKernelCache(backend.device)
        backend.kernels = recorder
        for result in _compile(backend):
            record(result)
        for check in CHECKS:
            if only and check.name not in only:
                continue
            for dtype in DTYPES:
                record(_run_check(backend, check, dtype, seed))
        if not only:
            record(_coverage(backend, recorder.used))
    return results


__all__ = ["RecordingKernelCache", "Result", "entry_points", "run_selftest"]

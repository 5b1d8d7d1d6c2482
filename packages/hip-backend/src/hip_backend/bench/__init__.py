"""Quick benchmarks of the installed stack on the current platform (`hip-backend bench`).

    from hip_backend.bench import run_bench
    for row in run_bench(device, quick=True):
        print(row.name, row.us, row.rate, row.unit)

The repository's bench/ scripts measure at full size beside their anchors (raw C, cuda.core,
CuPy, torch); this package holds the measuring code an installed hip-backend needs.
"""

from __future__ import annotations

from hip_backend.bench.measure import Timing, gb_per_s, per_call
from hip_backend.bench.suite import GROUPS, Row, Sizes, run_bench

__all__ = ["GROUPS", "Row", "Sizes", "Timing", "gb_per_s", "per_call", "run_bench"]

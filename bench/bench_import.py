"""Import cost of each layer over a bare interpreter (goal: hip_ffi <= 30 ms, hip_core <= 50 ms).

Runs `python -c "import X"` and `python -c "pass"` alternately, 30 times each, and reports the
median wall-clock difference. Prints JSON lines, then a table.

    python bench/bench_import.py [module ...]
"""

from __future__ import annotations

import json
import statistics
import subprocess
import sys
import time

RUNS = 30


def _wall(code: str) -> float:
    start = time.perf_counter()
    subprocess.run([sys.executable, "-c", code], check=True)
    return time.perf_counter() - start


def import_cost_ms(module: str) -> dict[str, float | str]:
    bare, loaded = [], []
    for _ in range(RUNS):
        bare.append(_wall("pass"))
        loaded.append(_wall(f"import {module}"))
    base, with_module = statistics.median(bare), statistics.median(loaded)
    return {
        "bench": "import",
        "module": module,
        "bare_ms": round(base * 1e3, 2),
        "import_ms": round(with_module * 1e3, 2),
        "cost_ms": round((with_module - base) * 1e3, 2),
    }


def main(modules: list[str]) -> None:
    rows = [import_cost_ms(module) for module in modules]
    for row in rows:
        print(json.dumps(row))
    print(f"{'module':<14}{'bare ms':>10}{'import ms':>12}{'cost ms':>10}")
    for row in rows:
        print(f"{row['module']:<14}{row['bare_ms']:>10}{row['import_ms']:>12}{row['cost_ms']:>10}")


if __name__ == "__main__":
    main(sys.argv[1:] or ["hip_ffi"])

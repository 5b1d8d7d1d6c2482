"""Import cost of each layer over a bare interpreter (goal: hip_ffi <= 30 ms, hip_core <= 50 ms;
issue 15: `import hip_runtime` <= numpy + ml_dtypes + 30 ms).

Runs `python -c "BASE; import X"` and `python -c "BASE"` alternately, 30 times each (--quick:
5), and reports the median wall-clock difference. BASE is `pass` (a bare interpreter), or with
`--over numpy,ml_dtypes` those modules imported first, so the figure is what the layer itself
adds. A statement may stand for a module (`"from hip_runtime import HipBackend"`). Prints JSON
lines, then a table; writes bench_import.jsonl and bench_import.md under --out.

    python bench/bench_import.py [--quick] [--out DIR] [--over MODULES] [module ...]
"""

from __future__ import annotations

import statistics
import subprocess
import sys
import time

from _harness import ROWS, emit, parser, save


def _wall(code: str) -> float:
    start = time.perf_counter()
    subprocess.run([sys.executable, "-c", code], check=True)
    return time.perf_counter() - start


def import_cost_ms(module: str, runs: int, over: str) -> None:
    before = f"import {over}" if over else "pass"
    statement = module if " " in module else f"import {module}"
    bare, loaded = [], []
    for _ in range(runs):
        bare.append(_wall(before))
        loaded.append(_wall(f"{before}; {statement}"))
    base, with_module = statistics.median(bare), statistics.median(loaded)
    emit(
        bench="import",
        module=module,
        over=over or "bare",
        bare_ms=round(base * 1e3, 2),
        import_ms=round(with_module * 1e3, 2),
        cost_ms=round((with_module - base) * 1e3, 2),
    )


def table() -> str:
    lines = [f"{'module':<40}{'over':<18}{'base ms':>10}{'import ms':>12}{'cost ms':>10}"]
    for row in ROWS:
        lines.append(
            f"{row['module']:<40}{row['over']:<18}{row['bare_ms']:>10}{row['import_ms']:>12}"
            f"{row['cost_ms']:>10}"
        )
    return "\n".join(lines)


def main() -> None:
    flags = parser(__doc__)
    flags.add_argument("modules", nargs="*", default=["hip_ffi"], help="modules to import")
    flags.add_argument(
        "--over", default="", metavar="MODULES", help="imported first in both runs: numpy,ml_dtypes"
    )
    args = flags.parse_args()
    for module in args.modules:
        import_cost_ms(module, 5 if args.quick else 30, args.over)
    save(args.out, "bench_import", table())


if __name__ == "__main__":
    main()

"""What every benchmark here shares: the flags, result rows, the timing policy, anchor
discovery, the runner and the files each run leaves.

A benchmark script imports this (scripts run from bench/, so it is on sys.path), builds its
flags with `parser` (every script takes `--out DIR` and `--quick`, then its own), records rows
with `emit`, and hands its measurements to `run` so that an anchor that cannot run here is
reported as skipped instead of stopping the run. `save` leaves `<name>.jsonl` (the rows) and
`<name>.md` (the table) under --out. Timing is hip-backend's one loop
(`hip_backend.bench.per_call`); this file only sets the policy the scripts share.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from hip_backend.bench import Timing, per_call

ROWS: list[dict[str, Any]] = []
#: Where results go without --out or $OUT (git ignores it).
RESULTS = Path(__file__).resolve().parent / "results"


def parser(doc: str | None) -> argparse.ArgumentParser:
    """The flags every script takes (its docstring as the help); a script adds its own, then
    calls `parse_args()`."""
    flags = argparse.ArgumentParser(
        description=doc, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    flags.add_argument(
        "--out",
        type=Path,
        default=Path(os.environ.get("OUT") or RESULTS),
        metavar="DIR",
        help="where the JSON lines, table and plots go (default: $OUT, else bench/results/)",
    )
    flags.add_argument("--quick", action="store_true", help="small sizes, few repeats: a smoke run")
    return flags


def emit(**row: Any) -> None:
    """Record one result row and print it as a JSON line."""
    ROWS.append(row)
    print(json.dumps(row), flush=True)


def timing(fn: Callable[[], Any], calls: int, sync: Callable[[], Any]) -> Timing:
    """Per-call µs of `calls` back-to-back calls plus one `sync()`: median, min and max of 7
    repeats after a warm-up of max(calls // 10, 100) calls.

    `fn` may return a status: any non-zero int fails the benchmark (checked once, at the end,
    so the check costs every implementation the same).
    """
    return per_call(fn, calls, sync, repeats=7, warmup=max(calls // 10, 100), status=True)


def median_us(fn: Callable[[], Any], calls: int, sync: Callable[[], Any]) -> float:
    """The median of `timing`, in µs."""
    return timing(fn, calls, sync).median_us


def seconds(
    fn: Callable[[], Any],
    repeats: int,
    *,
    warmup: int = 1,
    status: bool = False,
    before: Callable[[], Any] | None = None,
) -> float:
    """Median seconds of one synchronous call of `fn` (it waits for its own work) over
    `repeats`, after `warmup` untimed calls; `before` runs untimed before each (per_call's
    meaning of `status` and `before`)."""
    timed = per_call(fn, 1, _nothing, repeats, warmup=warmup, status=status, before=before)
    return timed.median_us / 1e6


def _nothing() -> None:
    pass


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


def cuda_core_kernel(source: str, name: str) -> tuple[Any, Any, Any, Any]:
    """(cuda.core module, its current Device, a new stream, kernel `name` of `source` compiled
    to a CUBIN for that device): the anchor's setup before anything is timed."""
    cc = cuda_core()
    device = cc.Device()
    device.set_current()
    stream = device.create_stream()
    arch = "".join(str(v) for v in device.compute_capability)
    program = cc.Program(source, code_type="c++", options=cc.ProgramOptions(arch=f"sm_{arch}"))
    return cc, device, stream, program.compile("cubin").get_kernel(name)


def hip_module(hip: Any, source: str, name: str, options: Sequence[str] = ()) -> Any:
    """A hipModule_t of `source` compiled by `hip`'s hiprtc (the cpu platform's compiler on
    cpu) and loaded with hipModuleLoadData."""
    from hip_ffi.rtc import compile_source

    compiled = compile_source(hip, source, name=name, options=list(options))
    assert compiled.ok, compiled.log
    module = hip.ffi.new("hipModule_t*")
    assert hip.hipModuleLoadData(module, compiled.code) == 0
    return module[0]


def pyplot() -> Any:
    """matplotlib.pyplot drawing to files (Agg), or None when matplotlib does not import."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        print("plot skipped: matplotlib is not importable", file=sys.stderr)
        return None
    return plt


def run(benches: Sequence[tuple[str, Callable[[], None]]]) -> None:
    """Run each (implementation, function); failures become `skipped` rows."""
    for impl, bench in benches:
        try:
            bench()
        except Exception as error:  # an anchor missing here is reported, not fatal
            emit(bench="skipped", impl=impl, reason=f"{type(error).__name__}: {error}"[:300])


def save(out: Path, name: str, table: str) -> None:
    """Print `table`, and write `<name>.jsonl` (every row) and `<name>.md` (the table) under
    `out`."""
    print(table)
    out.mkdir(parents=True, exist_ok=True)
    (out / f"{name}.jsonl").write_text("".join(json.dumps(r) + "\n" for r in ROWS))
    (out / f"{name}.md").write_text(table + "\n")


def cupti_kernels(
    torch: Any, step: Callable[[], Any], steps: int, sync: Callable[[], Any]
) -> tuple[float, float, dict[str, tuple[int, float]]]:
    """(kernels, kernel µs) per step from a CUPTI trace of `steps` calls of `step`
    (torch.profiler's, which sees every kernel of the process, hip's included; `sync` waits
    for them), and {kernel name: (launches, µs)} over all of them. Kernel µs is the time at
    least one kernel runs (the union of their spans): kernels that start early (hip-core's
    `Kernel.start_early`) overlap the one ahead, and each one's span, from its start to its
    end, then includes its wait for that one, so the per-name sums overlap too."""
    import tempfile

    from torch.profiler import ProfilerActivity

    with tempfile.TemporaryDirectory() as tmp:
        trace = Path(tmp) / "trace.json"
        with torch.profiler.profile(activities=[ProfilerActivity.CUDA]) as prof:
            for _ in range(steps):
                step()
            sync()
        prof.export_chrome_trace(str(trace))
        events = json.loads(trace.read_text())["traceEvents"]
    kernels = [e for e in events if e.get("cat") == "kernel"]
    by_name: dict[str, tuple[int, float]] = {}
    for e in kernels:
        count, total = by_name.get(e["name"], (0, 0.0))
        by_name[e["name"]] = (count + 1, total + float(e["dur"]))
    busy, end = 0.0, float("-inf")
    for start, stop in sorted((float(e["ts"]), float(e["ts"]) + float(e["dur"])) for e in kernels):
        busy += max(0.0, stop - max(start, end))
        end = max(end, stop)
    return len(kernels) / steps, busy / steps, by_name

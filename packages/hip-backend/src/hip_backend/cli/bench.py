"""`hip-backend bench`: launch latency, copies, ops and loading on the current platform."""

from __future__ import annotations

import argparse
import dataclasses
from typing import Any

from hip_backend.cli._common import output, select_device, table

NAME = "bench"
HELP = "measure launch latency, copies, ops, loading and collectives"
DESCRIPTION = (
    "Measure, on device 0 of the current platform: empty-kernel launch latency, host<->device "
    "and device-to-device copies, HipBackend ops (effective GB/s, matmul TFLOP/s) and "
    "ModelRuntime checkpoint loading; with two or more devices, an f32 all-reduce across all "
    "of them (bus bandwidth GB/s). Host wall time of back-to-back calls plus one "
    "synchronize, median of repeats. Sizes are modest (seconds on the cpu platform); the "
    "repository's bench/ scripts measure at full size beside anchors."
)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """`--quick` and `--only GROUP`."""
    from hip_backend.bench import GROUPS

    parser.add_argument("--quick", action="store_true", help="smaller sizes: a smoke run")
    parser.add_argument(
        "--only",
        action="append",
        default=[],
        choices=list(GROUPS),
        metavar="GROUP",
        help=f"run only this group (repeatable): {', '.join(GROUPS)}",
    )


def run(args: argparse.Namespace) -> int:
    """Measure and print; a group that cannot run here is a `skipped` row, not a failure."""
    from hip_backend.bench import run_bench

    platform, device = select_device(args.platform)
    rows = run_bench(device, quick=args.quick, groups=tuple(args.only))
    report = {
        "platform": platform,
        "device": device.name,
        "arch": device.arch,
        "quick": args.quick,
        "rows": [dataclasses.asdict(row) for row in rows],
    }
    return output(args, report, render)


def render(report: dict[str, Any]) -> str:
    """The rows as a table under a line naming the platform and device."""
    rows = [
        [row["group"], row["name"], row["size"], row["us"],
         f"skipped: {row['skipped']}" if row["skipped"] else _rate(row)]
        for row in report["rows"]
    ]  # fmt: skip
    header = f"hip-backend bench on {report['platform']}: {report['device']} ({report['arch']})"
    return header + "\n" + table(["group", "benchmark", "size", "µs", "rate"], rows)


def _rate(row: dict[str, Any]) -> str:
    return "-" if row["rate"] is None else f"{row['rate']:.3g} {row['unit']}"

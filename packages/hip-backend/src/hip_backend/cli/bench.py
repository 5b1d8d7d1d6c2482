"""`hip-backend bench`: launch latency, copies, ops and loading on the current platform."""

from __future__ import annotations

import argparse
import dataclasses
from typing import Any

from hip_backend.cli._common import OK, first_device, print_json, select_platform, table


def add_parser(commands: Any, **kwargs: Any) -> None:
    """Register the `bench` subcommand."""
    from hip_backend.bench import GROUPS

    parser = commands.add_parser(
        "bench",
        help="measure launch latency, copies, ops and loading",
        description="Measure, on device 0 of the current platform: empty-kernel launch "
        "latency, host<->device and device-to-device copies, HipBackend ops (effective GB/s, "
        "matmul TFLOP/s) and ModelRuntime checkpoint loading. Host wall time of back-to-back "
        "calls plus one synchronize, median of repeats. Sizes are modest (seconds on the cpu "
        "platform); the repository's bench/ scripts measure at full size beside anchors.",
        **kwargs,
    )
    parser.add_argument("--quick", action="store_true", help="smaller sizes: a smoke run")
    parser.add_argument(
        "--only",
        action="append",
        default=[],
        choices=list(GROUPS),
        metavar="GROUP",
        help=f"run only this group (repeatable): {', '.join(GROUPS)}",
    )
    parser.add_argument("--json", action="store_true", help="print the rows as JSON")
    parser.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    """Measure and print; a group that cannot run here is a `skipped` row, not a failure."""
    from hip_backend.bench import run_bench

    platform = select_platform(args.platform)
    device = first_device()
    rows = run_bench(device, quick=args.quick, groups=tuple(args.only))
    if args.json:
        print_json(
            {
                "platform": platform,
                "device": device.name,
                "quick": args.quick,
                "rows": [dataclasses.asdict(row) for row in rows],
            }
        )
        return OK
    print(f"hip-backend bench on {platform}: {device.name} ({device.arch})")
    print(
        table(
            ["group", "benchmark", "size", "µs", "rate"],
            [
                [
                    row.group,
                    row.name,
                    row.size,
                    row.us,
                    f"skipped: {row.skipped}" if row.skipped else _rate(row),
                ]
                for row in rows
            ],
        )
    )
    return OK


def _rate(row: Any) -> str:
    return "-" if row.rate is None else f"{row.rate:.3g} {row.unit}"

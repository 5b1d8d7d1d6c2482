"""`hip-backend selftest`: compile every kernel, check every op against numpy, print a table."""

from __future__ import annotations

import argparse
import dataclasses
import sys
import time

from hip_backend.cli._common import FAILED, OK, USAGE, print_json, select_device, table

NAME = "selftest"
HELP = "check every kernel and op against numpy"
DESCRIPTION = (
    "Compile every kernel source, run every HipBackend op on small odd shapes in f32, f16 and "
    "bf16 and compare with a float64 numpy reference (tolerances of a few units of the output "
    "type's rounding; casts, embedding and transpose bit for bit). Prints a pass/fail table; "
    "exits 1 if anything fails."
)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """`--only CHECK` and `--seed`."""
    from hip_backend.selftest import CHECKS

    parser.add_argument(
        "--only",
        action="append",
        default=[],
        metavar="CHECK",
        choices=[check.name for check in CHECKS],
        help="run only this op check (repeatable); one of: "
        + ", ".join(check.name for check in CHECKS),
    )
    parser.add_argument("--seed", type=int, default=0, help="seed of the random inputs")


def run(args: argparse.Namespace) -> int:
    """Run the checks; 0 when all pass, 1 when any fails."""
    from hip_backend.selftest import run_selftest

    platform, device = select_device(args.platform)
    if not args.json:
        print(f"hip-backend selftest on {platform}: {device.name} ({device.arch})", flush=True)
    start = time.perf_counter()
    try:
        results = run_selftest(device, only=args.only, seed=args.seed)
    except ValueError as error:
        print(f"hip-backend selftest: {error}", file=sys.stderr)
        return USAGE
    failed = [r for r in results if not r.passed]
    if args.json:
        print_json(
            {
                "platform": platform,
                "device": device.name,
                "passed": not failed,
                "results": [{**dataclasses.asdict(r), "passed": r.passed} for r in results],
            }
        )
    else:
        rows = [
            [r.check, r.dtype, r.status.upper() if r.status == "fail" else r.status,
             "-" if r.error is None else f"{r.error:.3f}", f"{r.seconds * 1e3:.0f}", r.detail]
            for r in results
        ]  # fmt: skip
        print(table(["check", "dtype", "result", "error/tol", "ms", "detail"], rows))
        elapsed = time.perf_counter() - start
        untested = sum(r.status == "untested" for r in results)
        passed = len(results) - len(failed) - untested
        print(f"\n{passed} passed, {len(failed)} failed, {untested} untested in {elapsed:.1f} s")
    return FAILED if failed else OK

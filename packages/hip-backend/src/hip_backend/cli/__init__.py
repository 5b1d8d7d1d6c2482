"""The `hip-backend` command line: `info`, `selftest`, `bench` and `load`.

    hip-backend info [--json]             platform, libraries, devices
    hip-backend selftest                  every kernel and op against numpy, a pass/fail table
    hip-backend bench [--quick] [--json]  launch, copies, ops and loading on this platform
    hip-backend load PATH                 load a checkpoint: GB/s, tensors, memory

Every command takes `--platform amd|nvidia|cpu` (else `HIP_PLATFORM`, else detection). Exit
codes: 0 success, 1 a check failed, 2 bad usage or input, 3 no usable platform or device.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable, Sequence

import hip_ffi
from hip_backend._version import __version__
from hip_backend.cli import bench, info, load, selftest
from hip_backend.cli._common import FAILED, OK, UNAVAILABLE, USAGE, CommandError

__all__ = ["FAILED", "OK", "UNAVAILABLE", "USAGE", "build_parser", "main"]

#: Each command is a module with NAME, HELP, DESCRIPTION, add_arguments(parser) and run(args).
_COMMANDS = (info, selftest, bench, load)
_EPILOG = (
    "exit codes: 0 success, 1 a check failed, 2 bad usage or input, "
    "3 no usable platform, library or device"
)


def _platform_option(default: object) -> argparse.ArgumentParser:
    parent = argparse.ArgumentParser(add_help=False)
    parent.add_argument(
        "--platform",
        choices=hip_ffi.PLATFORMS,
        default=default,
        help="the HIP platform to use (default: $HIP_PLATFORM, else the first detected: "
        "amd with a device, nvidia with a device, cpu)",
    )
    return parent


def build_parser() -> argparse.ArgumentParser:
    """The argument parser of every command."""
    parser = argparse.ArgumentParser(
        prog="hip-backend",
        description="Inspect, check and measure the hip-backend stack on this machine.",
        epilog=_EPILOG,
        parents=[_platform_option(None)],
    )
    parser.add_argument("--version", action="version", version=f"%(prog)s {__version__}")
    commands = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    # SUPPRESS: `hip-backend info --platform cpu` and `hip-backend --platform cpu info` both
    # work, and a subcommand without the option leaves the top-level value alone.
    after = _platform_option(argparse.SUPPRESS)
    for command in _COMMANDS:
        sub = commands.add_parser(
            command.NAME,
            help=command.HELP,
            description=command.DESCRIPTION,
            parents=[after],
            epilog=_EPILOG,
        )
        command.add_arguments(sub)
        sub.add_argument("--json", action="store_true", help="print the result as JSON")
        sub.set_defaults(run=command.run)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command line; returns the exit code (the console script exits with it)."""
    parser = build_parser()
    args = parser.parse_args(argv)  # exits with 2 and a usage message on bad arguments
    run: Callable[[argparse.Namespace], int] = args.run
    try:
        return run(args)
    except CommandError as error:
        print(f"hip-backend {args.command}: {error}", file=sys.stderr)
        return error.code
    except KeyboardInterrupt:
        print(f"hip-backend {args.command}: interrupted", file=sys.stderr)
        return 130


def console() -> None:
    """The `hip-backend` console script."""
    sys.exit(main())

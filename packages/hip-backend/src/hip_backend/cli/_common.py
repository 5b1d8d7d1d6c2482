"""What every command shares: exit codes, the error a command raises to stop, platform choice,
the JSON-or-text output, and plain-text tables."""

from __future__ import annotations

import argparse
import json
import os
import sys
from collections.abc import Callable, Sequence
from typing import Any

#: Exit codes of the `hip-backend` command.
OK = 0
FAILED = 1  # a check failed (selftest), or a benchmark could not run
USAGE = 2  # bad arguments or input: unknown option, missing or unreadable file (as argparse)
UNAVAILABLE = 3  # no usable platform, library or device; a feature this install lacks


class CommandError(Exception):
    """Stops a command with a message for the user (no traceback) and an exit code."""

    def __init__(self, message: str, code: int = USAGE) -> None:
        super().__init__(message)
        self.code = code


def select_platform(platform: str | None) -> str:
    """Make `platform` (or `HIP_PLATFORM`, or detection) the process's platform and load it.

    Sets `HIP_PLATFORM` so that hip-core's process-wide HipApi, loaded on first use, is the same
    one. Returns the platform's name. Raises CommandError(UNAVAILABLE) when it cannot load.
    """
    import hip_ffi

    if platform is not None:
        os.environ["HIP_PLATFORM"] = platform
    try:
        api = hip_ffi.load()
    except ValueError as error:  # HIP_PLATFORM names no platform
        raise CommandError(str(error), USAGE) from error
    except (hip_ffi.HipFfiError, OSError, ImportError) as error:
        raise CommandError(f"no usable HIP platform: {error}", UNAVAILABLE) from error
    os.environ["HIP_PLATFORM"] = api.platform
    return str(api.platform)


def select_device(platform: str | None) -> tuple[str, Any]:
    """`select_platform(platform)`, then its device 0: (platform name, hip_core.Device).
    CommandError(UNAVAILABLE) when the platform sees no device."""
    import hip_ffi
    from hip_core import Device

    name = select_platform(platform)
    if Device.count() == 0:  # hip_ffi.device_count, with runtime errors raised
        raise CommandError(
            f"the {name} platform ({hip_ffi.load().platform_version}) sees no device; "
            "choose another with --platform or HIP_PLATFORM",
            UNAVAILABLE,
        )
    return name, Device(0)


def output(args: argparse.Namespace, report: dict[str, Any], render: Callable[..., str]) -> int:
    """Print `report` as JSON with `--json`, else as `render(report)` writes it; returns OK."""
    if args.json:
        print_json(report)
    else:
        print(render(report))
    return OK


def table(headers: Sequence[str], rows: Sequence[Sequence[Any]]) -> str:
    """Rows under headers in aligned columns; numbers right-aligned, text left-aligned."""
    cells = [[_cell(value) for value in row] for row in rows]
    widths = [max([len(h), *(len(row[i]) for row in cells)]) for i, h in enumerate(headers)]
    numeric = [
        all(isinstance(row[i], (int, float)) for row in rows) and bool(rows)
        for i in range(len(headers))
    ]

    def line(values: Sequence[str]) -> str:
        parts = [
            v.rjust(w) if right else v.ljust(w)
            for v, w, right in zip(values, widths, numeric, strict=True)
        ]
        return "  ".join(parts).rstrip()

    rule = "  ".join("-" * w for w in widths)
    return "\n".join([line(list(headers)), rule, *(line(row) for row in cells)])


def _cell(value: Any) -> str:
    if isinstance(value, float):
        return f"{value:.3g}" if abs(value) < 100 else f"{value:.0f}"
    return "-" if value is None else str(value)


def print_json(data: Any) -> None:
    """`data` as indented JSON on stdout."""
    json.dump(data, sys.stdout, indent=2)
    sys.stdout.write("\n")


def human_bytes(count: float) -> str:
    """1536 -> "1.5 KiB"."""
    for unit in ("B", "KiB", "MiB", "GiB"):
        if abs(count) < 1024 or unit == "GiB":
            return f"{count:.0f} {unit}" if unit == "B" else f"{count:.1f} {unit}"
        count /= 1024
    raise AssertionError("unreachable")

"""`hip-backend info`: the platform, its libraries (paths and versions) and every device."""

from __future__ import annotations

import argparse
from collections import Counter
from typing import Any

from hip_backend.cli._common import human_bytes, output, select_platform, table

NAME = "info"
HELP = "platform, libraries, devices and peer links"
DESCRIPTION = (
    "Show the selected HIP platform, the libraries it loaded (paths and versions), the "
    "properties of every device it sees and, with two or more, which devices can access each "
    "other's memory (peer access). A platform without devices is reported, not an error."
)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """`info` has only the options every command has."""


def run(args: argparse.Namespace) -> int:
    """Print the report; exit 0 whenever the platform loads (even with no device)."""
    from hip_backend.platform_info import platform_info

    select_platform(args.platform)
    return output(args, platform_info(), render)


def render(report: dict[str, Any]) -> str:
    """The report as text."""
    versions = report["versions"]
    lines = [
        f"hip-backend {report['version']}",
        f"platform: {report['platform']} ({report['platform_version']})",
        f"  runtime version {versions['runtime']}, driver version {versions['driver']}, "
        f"hiprtc {versions['hiprtc'] or 'unavailable'}",
        "",
        "libraries:",
        table(
            ["role", "path", "version"],
            [[lib["role"], _path(lib), lib["version"] or "-"] for lib in report["libraries"]],
        ),
    ]
    reasons = Counter(report["unavailable"].values())
    for reason, count in sorted(reasons.items()):
        lines.append(f"  {count} function(s) unavailable: {reason}")
    count = report["device_count"]
    why = f" ({report['device_error']})" if report["device_error"] else ""
    lines += ["", f"devices: {count}{why}"]
    for device in report["devices"]:
        lines.append(_device(device))
    if report["peer_links"]:
        lines += ["", _peer_links(report["peer_links"], count)]
    return "\n".join(lines)


def _peer_links(links: list[dict[str, Any]], count: int) -> str:
    """A matrix: row a, column b says whether kernels on device a can access device b's
    memory once `enable_peer_access` is called (the link's kind is not known here)."""
    answer = {True: "yes", False: "no", None: "?"}
    cells = {(link["device"], link["peer"]): answer[link["can_access"]] for link in links}
    rows = [[f"[{a}]"] + [cells.get((a, b), "-") for b in range(count)] for a in range(count)]
    note = "peer access (row: the device whose kernels read and write; column: the peer):"
    failures = [f"  [{x['device']}] -> [{x['peer']}]: {x['error']}" for x in links if "error" in x]
    return "\n".join([note, table(["", *(f"[{b}]" for b in range(count))], rows), *failures])


def _path(lib: dict[str, Any]) -> str:
    path, resolved = lib["path"], lib["resolved"]
    return path if resolved == path else f"{path} -> {resolved}"


def _device(d: dict[str, Any]) -> str:
    free = d.get("free_memory")
    memory = human_bytes(d["total_memory"]) + (
        f" ({human_bytes(free)} free)" if free is not None else ""
    )
    return "\n".join(
        [
            f"  [{d['ordinal']}] {d['name']}",
            f"      arch {d['arch']}, {memory}, PCI {d['pci_bus_id']}",
            f"      {d['multiprocessors']} multiprocessors, warp {d['warp_size']}, "
            f"{d['max_threads_per_block']} threads/block, "
            f"{human_bytes(d['shared_memory_per_block'])} shared/block, "
            f"clock {d['clock_rate_khz'] / 1000:.0f} MHz",
        ]
    )

"""`hip-backend load PATH`: load a checkpoint onto the device with a progress bar and report
GB/s, the tensor count and the device memory used."""

from __future__ import annotations

import argparse
from typing import Any

from hip_backend.cli._common import (
    UNAVAILABLE,
    USAGE,
    CommandError,
    human_bytes,
    output,
    select_device,
)

NAME = "load"
HELP = "load a checkpoint and report GB/s, tensors and memory"
DESCRIPTION = (
    "Load a checkpoint onto device 0 with hip-runtime's ModelRuntime: whatever "
    "hip_runtime.open_checkpoint opens — a .safetensors or .gguf file, a sharded checkpoint's "
    "model.safetensors.index.json, or a directory holding exactly one of those. Shows a "
    "progress bar, then the load rate (tensor data read per second, GB = 1e9 bytes), the "
    "tensor count and the device memory by category."
)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """The checkpoint path and `--no-progress`."""
    parser.add_argument("path", help="the checkpoint file or directory")
    parser.add_argument("--no-progress", action="store_true", help="no progress bar")


def run(args: argparse.Namespace) -> int:
    """Load, report, release. 2 for a path that is not a readable checkpoint, 3 when this
    install cannot load at all (no device, no ModelRuntime)."""
    from hip_backend.loading import CheckpointPathError, check_path, load_checkpoint

    try:  # headers only, before any platform work: a typo or a corrupt file fails fast
        path = check_path(args.path)
    except CheckpointPathError as error:  # the message starts with the path at fault
        raise CommandError(f"cannot load {error}", USAGE) from error
    _, device = select_device(args.platform)
    try:
        report = load_checkpoint(path, device, progress_bar=not (args.no_progress or args.json))
    except ImportError as error:
        raise CommandError(f"cannot load checkpoints here: {error}", UNAVAILABLE) from error
    except (ValueError, OSError) as error:  # a corrupt or unreadable file (FormatError...)
        raise CommandError(f"cannot load {path}: {error}", USAGE) from error
    return output(args, report, render)


def render(report: dict[str, Any]) -> str:
    """The load report as text."""
    lines = [
        f"loaded {report['path']}",
        f"  {report['tensors']} tensors from {report['files']} file(s), "
        f"{human_bytes(report['file_bytes'])} of tensor data read in {report['seconds']:.3f} s: "
        f"{report['gb_per_s']:.3g} GB/s",
        f"  device memory: {human_bytes(report['device_bytes'])} of tensors",
    ]
    lines += [f"    {category}: {human_bytes(size)}" for category, size in report["memory"].items()]
    return "\n".join(lines)

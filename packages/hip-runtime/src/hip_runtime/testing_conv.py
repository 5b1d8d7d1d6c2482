"""Compatibility path: this module now lives at `hip_runtime.testing.conv`.

hip-runtime's modules were grouped into folders by layer (issue 40); this path is kept because
docs/ops.md of earlier releases pointed at `hip_runtime.testing_conv` for the spatial ops'
references. It only re-exports the public names (the same objects); new code imports
`hip_runtime.testing.conv`, and nothing inside the package imports this path.
"""

from __future__ import annotations

from hip_runtime.testing.conv import (
    adaptive_avg_pool2d,
    avg_pool2d,
    batch_norm,
    conv1d,
    conv2d,
    conv_transpose1d,
    conv_transpose2d,
    group_norm,
    max_pool2d,
    upsample_bilinear2d,
    upsample_nearest2d,
)

__all__ = [
    "adaptive_avg_pool2d",
    "avg_pool2d",
    "batch_norm",
    "conv1d",
    "conv2d",
    "conv_transpose1d",
    "conv_transpose2d",
    "group_norm",
    "max_pool2d",
    "upsample_bilinear2d",
    "upsample_nearest2d",
]

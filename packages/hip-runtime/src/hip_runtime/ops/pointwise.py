"""Elementwise ops over any layout with numpy broadcasting: binary arithmetic, comparisons,
unary functions, where, affine, clamp, powf.

(Filled in by the op-set issue; an empty family until then.)
"""

from __future__ import annotations

from hip_runtime.ops.base import OpsBase


class PointwiseOps(OpsBase):
    pass


__all__ = ["PointwiseOps"]

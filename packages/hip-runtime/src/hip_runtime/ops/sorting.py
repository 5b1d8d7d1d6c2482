"""Sorting along the last axis: argsort and topk.

(Filled in by the op-set issue; an empty family until then.)
"""

from __future__ import annotations

from hip_runtime.ops.base import OpsBase


class SortingOps(OpsBase):
    pass


__all__ = ["SortingOps"]

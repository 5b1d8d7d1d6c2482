"""Reductions along any axes: sum, mean, max, min, argmax, argmin, l2_normalize.

(Filled in by the op-set issue; an empty family until then.)
"""

from __future__ import annotations

from hip_runtime.ops.base import OpsBase


class ReductionOps(OpsBase):
    pass


__all__ = ["ReductionOps"]

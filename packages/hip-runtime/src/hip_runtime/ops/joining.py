"""Tensors joined and split along an axis: cat, stack, split, chunk, pad.

(Filled in by the op-set issue; an empty family until then.)
"""

from __future__ import annotations

from hip_runtime.ops.base import OpsBase


class JoiningOps(OpsBase):
    pass


__all__ = ["JoiningOps"]

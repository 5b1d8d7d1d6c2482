"""Tensors made on the device: arange, full, fill, tril and triu masks.

(Filled in by the op-set issue; an empty family until then.)
"""

from __future__ import annotations

from hip_runtime.ops.base import OpsBase


class CreationOps(OpsBase):
    pass


__all__ = ["CreationOps"]

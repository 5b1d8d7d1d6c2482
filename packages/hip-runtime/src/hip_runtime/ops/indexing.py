"""Indexing by device ids: index_select, embedding, gather, scatter_add, index_add.

(Filled in by the op-set issue; an empty family until then.)
"""

from __future__ import annotations

from hip_runtime.ops.base import OpsBase


class IndexingOps(OpsBase):
    pass


__all__ = ["IndexingOps"]

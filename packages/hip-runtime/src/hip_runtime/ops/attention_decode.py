"""Decode attention over a batch of KV caches with per-sequence lengths (issue 16; being built)."""

from __future__ import annotations

from hip_runtime.ops.base import OpsBase


class AttentionDecodeOps(OpsBase):
    pass

"""A decoder's host-side checks of its inputs: prompts (token ids and a left-padding mask) and
the token ids of a decode step, before anything reaches the device."""

from __future__ import annotations

from typing import Any

import numpy as np


def check_prompts(
    input_ids: Any, attention_mask: Any, vocab_size: int, max_tokens: int
) -> tuple[np.ndarray, np.ndarray]:
    """(ids int32 [B, S], mask int64 [B, S]) of host prompts. ValueError for ids not [B, S]
    with both > 0 or outside [0, vocab_size), a mask of another shape or with values other
    than 0 and 1 (None: all ones), a sequence with no real token, more than `max_tokens`
    tokens a sequence (the KV cache's)."""
    ids = token_ids_checked(np.asarray(input_ids), "input_ids", vocab_size)
    if ids.ndim != 2 or ids.shape[1] == 0 or ids.shape[0] == 0:
        raise ValueError(f"input_ids must be [batch, tokens] with both > 0, not {ids.shape}")
    if attention_mask is None:
        mask = np.ones(ids.shape, np.int64)
    else:
        mask = np.asarray(attention_mask)
        if mask.shape != ids.shape or not (mask.dtype == bool or mask.dtype.kind in "iu"):
            raise ValueError(f"attention_mask is {mask.shape} {mask.dtype}; expected 0/1 "
                             f"{ids.shape}")  # fmt: skip
        if ((mask != 0) & (mask != 1)).any():
            raise ValueError("attention_mask holds values other than 0 and 1")
        mask = mask.astype(np.int64)
    real = mask.sum(axis=1)
    if (real == 0).any():
        raise ValueError(f"sequence {int(np.argmin(real))} has no real token (all padding)")
    if ids.shape[1] > max_tokens:
        raise ValueError(f"{ids.shape[1]} tokens do not fit the KV cache "
                         f"(max_tokens={max_tokens})")  # fmt: skip
    return ids, mask


def token_ids_checked(ids: np.ndarray, name: str, vocab_size: int) -> np.ndarray:
    """`ids` as int32, after checking they are integers in [0, vocab_size) (ValueError naming
    `name` otherwise)."""
    if ids.dtype.kind not in "iu":
        raise ValueError(f"{name} must be integer token ids, not {ids.dtype}")
    if ids.size and (ids.min() < 0 or ids.max() >= vocab_size):
        raise ValueError(f"{name} holds ids outside [0, {vocab_size}) (the vocabulary)")
    return ids.astype(np.int32)


__all__ = ["check_prompts", "token_ids_checked"]

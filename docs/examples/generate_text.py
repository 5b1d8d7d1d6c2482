"""Generate tokens with a Llama-style decoder from a Hugging Face folder.

A tokenizer turns text into ids; `tokenizer(texts, padding=True, padding_side="left")` gives
exactly the `input_ids` and `attention_mask` below. Here the prompts are ids already, so the
example needs nothing but hip_runtime and numpy. The decoder prefills the whole left-padded
batch at once, then adds one token per sequence per step from its KV cache, choosing each token
on the device; `generate` returns the prompts followed by the new tokens.
"""

from __future__ import annotations

import sys

import numpy as np

from hip_runtime.models import LlamaDecoder


def left_pad(prompts: list[list[int]], pad_id: int) -> tuple[np.ndarray, np.ndarray]:
    """(input_ids, attention_mask), int64 [B, longest]: each prompt at the right end of its row."""
    width = max(len(prompt) for prompt in prompts)
    ids = np.full((len(prompts), width), pad_id, np.int64)
    mask = np.zeros_like(ids)
    for row, prompt in enumerate(prompts):
        ids[row, width - len(prompt) :] = prompt
        mask[row, width - len(prompt) :] = 1
    return ids, mask


def generate_text(
    folder: str, prompts: list[list[int]], max_new_tokens: int = 16, device: object = None
) -> tuple[np.ndarray, np.ndarray]:
    """Greedy and sampled continuations of `prompts` by the model in `folder`."""
    with LlamaDecoder.from_folder(folder, device, dtype="float32") as decoder:
        ids, mask = left_pad(prompts, pad_id=decoder.config.pad_token_id or 0)
        greedy = decoder.generate(ids, mask, max_new_tokens=max_new_tokens)
        sampled = decoder.generate(
            ids, mask, max_new_tokens=max_new_tokens,
            temperature=0.8, top_k=50, top_p=0.95, seed=1234,  # the same seed, the same tokens
        )  # fmt: skip
    return greedy, sampled


if __name__ == "__main__":
    greedy, sampled = generate_text(sys.argv[1], [[5, 17, 42, 7], [99, 3]])
    print("greedy: ", greedy.tolist())
    print("sampled:", sampled.tolist())

"""Sentence embeddings from a Hugging Face BERT folder (as all-MiniLM-L6-v2), and how alike
the sentences are.

    python docs/examples/encode_sentences.py all-MiniLM-L6-v2/ "A cat sat." "A dog sat." "Tax law."

The tokenizer is the model's own (the `tokenizers` package, or transformers' AutoTokenizer):
hip_runtime takes its int64 ids and attention mask as they come, padded to the longest
sentence. docs/models.md shows this file; tests/test_models_bert.py runs `embed` and
`similarities` against transformers' output.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Mapping
from typing import Any

import numpy as np

from hip_runtime.models import BertEncoder


def embed(
    folder: str | os.PathLike[str], tokens: Mapping[str, Any], device: Any = None,
    dtype: str = "float32",
) -> np.ndarray:  # fmt: skip
    """One unit-length float32 vector per sentence, [B, hidden], from the tokenizer's output
    `tokens` (input_ids, attention_mask and maybe token_type_ids, [B, S] each)."""
    with BertEncoder.from_folder(folder, device, dtype=dtype) as encoder:
        vectors = encoder.encode(**tokens)  # mean pooling; queued on the device, not waited for
        return vectors.to_numpy()  # waits for the device, then copies [B, H] to the host


def similarities(vectors: np.ndarray) -> np.ndarray:
    """Cosine similarity of every pair: the vectors have unit length, so a matrix product."""
    return vectors @ vectors.T


def main(folder: str, sentences: list[str]) -> None:
    from transformers import AutoTokenizer  # only for this demo: any tokenizer will do

    tokens = AutoTokenizer.from_pretrained(folder)(sentences, padding=True, return_tensors="np")
    vectors = embed(folder, dict(tokens))
    for sentence, row in zip(sentences, similarities(vectors), strict=True):
        print(f"{sentence[:30]:30}", " ".join(f"{value:5.2f}" for value in row))


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2:])

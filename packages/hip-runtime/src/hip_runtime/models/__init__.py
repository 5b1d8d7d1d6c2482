"""Transformer models written with HipBackend's ops, loaded from Hugging Face folders or GGUF.

    from hip_runtime.models import BertEncoder, LlamaDecoder

    encoder = BertEncoder.from_folder("all-MiniLM-L6-v2/")       # config.json + safetensors
    vectors = encoder.encode(input_ids, attention_mask)           # numpy in, DeviceTensor out

    decoder = LlamaDecoder.from_folder("tiny-llama/")             # or LlamaDecoder.from_gguf(...)
    tokens = decoder.generate(prompt_ids, max_new_tokens=32)

Each model is a hip_core.Resource owning a ModelRuntime (weights, KV cache, backend): `close()`
or `with` frees them. Names are imported on first use, as in hip_runtime.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from hip_core._lazy import lazy_exports

if TYPE_CHECKING:
    from hip_runtime.models.bert import BertEncoder
    from hip_runtime.models.config import read_config
    from hip_runtime.models.llama import LlamaDecoder

#: Each public name and the module that defines it.
_HOMES = {
    "BertEncoder": "hip_runtime.models.bert",
    "LlamaDecoder": "hip_runtime.models.llama",
    "read_config": "hip_runtime.models.config",
}

__getattr__, __dir__ = lazy_exports(__name__, _HOMES)

__all__ = ["BertEncoder", "LlamaDecoder", "read_config"]

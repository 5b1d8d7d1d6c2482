"""LlamaDecoder's folded norms (models.llama_weights.fold_norms): in f32 and bf16 each layer's
norm weights are folded into its stacked QKV and gate/up weights at load, and rows that BLAS
multiplies divide by the residual stream's RMS in rope_and_cache and swiglu (`rms_of`) instead
of running rmsnorm. Checked against the checkpoint's own tensors (read with safetensors) and
against the same decoder loaded with the norms apart: prefill and decode-step logits equal up
to f32 rounding. f16 and quantized layers stay unfolded. On the cpu platform in CI (every
product there is BLAS's, so every layer takes the folded path); marked gpu on nvidia."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from safetensors.numpy import load_file

from hip_core import Device
from hip_runtime.models import LlamaDecoder, llama_weights

DATA = Path(__file__).parent / "data" / "models"
GQA = DATA / "llama-gqa"


def checkpoint() -> dict[str, np.ndarray]:
    tensors: dict[str, np.ndarray] = {}
    for shard in sorted(GQA.glob("*.safetensors")):
        tensors.update(load_file(shard))
    return tensors


def test_the_weights_hold_each_norm_folded_into_the_product_after_it(
    device: Device, program_cache: Path
) -> None:
    stored = checkpoint()
    with LlamaDecoder.from_folder(GQA, device) as decoder:
        assert all(layer.norms_folded for layer in decoder.weights.layers)
        held = decoder.runtime.weights
        for n in (0, len(decoder.weights.layers) - 1):
            at = f"model.layers.{n}."
            for norm, products in (
                ("input_layernorm", ("self_attn.q_proj", "self_attn.k_proj", "self_attn.v_proj")),
                ("post_attention_layernorm", ("mlp.gate_proj", "mlp.up_proj")),
            ):
                g = stored[f"{at}{norm}.weight"]
                assert (held[f"{at}{norm}.weight"].to_numpy() == 1).all()
                for product in products:
                    expected = stored[f"{at}{product}.weight"] * g  # (f32: one rounding)
                    got = held[f"{at}{product}.weight"].to_numpy()
                    np.testing.assert_array_equal(got, expected)
        # the final norm (before a head that may be the tied embedding) stays apart
        np.testing.assert_array_equal(decoder.weights.norm.to_numpy(), stored["model.norm.weight"])


def logits(device: Device) -> tuple[np.ndarray, np.ndarray]:
    """(prefill logits, the next decode step's) of the reference prompts."""
    with np.load(GQA / "reference.npz") as ref:
        ids, mask, greedy = ref["input_ids"], ref["attention_mask"], ref["greedy"]
    with LlamaDecoder.from_folder(GQA, device) as decoder:
        prefill = decoder.forward(ids, mask).to_numpy()
        step = decoder.decode(greedy[:, ids.shape[1]]).to_numpy()
    return prefill, step


def test_folded_logits_equal_the_unfolded_ones(
    device: Device, program_cache: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    folded = logits(device)
    monkeypatch.setattr(llama_weights, "foldable", lambda layer: False)
    unfolded = logits(device)
    for got, expected in zip(folded, unfolded, strict=True):
        assert np.abs(got - expected).max() / np.abs(expected).max() < 1e-5


def test_f16_and_quantized_layers_keep_their_norms(device: Device, program_cache: Path) -> None:
    with LlamaDecoder.from_folder(GQA, device, dtype="float16") as decoder:
        assert not any(layer.norms_folded for layer in decoder.weights.layers)
    with LlamaDecoder.from_gguf(GQA / "model-q8_0.gguf", device) as decoder:
        assert not any(layer.norms_folded for layer in decoder.weights.layers)
        assert not (decoder.weights.layers[0].attn_norm.to_numpy() == 1).all()

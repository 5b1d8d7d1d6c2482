"""LlamaDecoder with the GEMV kernel's fusions (hip_runtime.ops.gemv: rmsnorm into the QKV,
gate/up and head products, SwiGLU and the residual adds into their epilogues) against
transformers, on every platform: the cpu platform leaves the kernel off by default, so these
tests turn it on through a shared HipBackend."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest

from hip_core import Device, Kernel
from hip_runtime import HipBackend
from hip_runtime.models import LlamaDecoder
from hip_runtime.ops.gemv import GEMV_MAX_ROWS

DATA = Path(__file__).parent / "data" / "models"
MODELS = ("llama-gqa", "llama-tied")


def reference(name: str) -> dict[str, np.ndarray]:
    with np.load(DATA / name / "reference.npz") as data:
        return dict(data)


@pytest.mark.parametrize("name", MODELS)
def test_fused_decode_steps_match_transformers(
    device: Device, program_cache: Path, monkeypatch: pytest.MonkeyPatch, name: str
) -> None:
    ref = reference(name)
    ids, mask, greedy = ref["input_ids"], ref["attention_mask"], ref["greedy"]
    launched: set[str] = set()
    launch = Kernel.launch

    def record(self: Kernel, *args: Any, **kwargs: Any) -> None:
        launched.add(self.name)
        launch(self, *args, **kwargs)

    monkeypatch.setattr(Kernel, "launch", record)
    backend = HipBackend(device, gemv_rows=GEMV_MAX_ROWS)
    with backend, LlamaDecoder.from_folder(DATA / name, backend) as decoder:
        new = greedy.shape[1] - ids.shape[1]
        np.testing.assert_array_equal(decoder.generate(ids, mask, max_new_tokens=new), greedy)
        # a decode step's logits against the prefill of the longer sequence (unfused ops)
        decoder.forward(ids, mask)
        width = ids.shape[1]
        stepped = decoder.decode(greedy[:, width]).to_numpy()
        whole = np.concatenate([mask, np.ones((len(ids), 1), np.int64)], axis=1)
        full = decoder.forward(greedy[:, : width + 1], whole).to_numpy()[:, width]
        assert np.abs(stepped - full).max() / np.abs(full).max() < 1e-4
    assert {n.split("_r")[0] for n in launched if n.startswith("gemv_")} == {
        "gemv",
        "gemv_norm",
        "gemv_swiglu",
    }


@pytest.mark.parametrize("dtype", ["float32", "bfloat16"])
def test_chained_steps_equal_the_steps_of_separate_products(
    device: Device, program_cache: Path, dtype: str
) -> None:
    """The chained step (models.llama_chain) runs each product's kernel code in the same
    order as the unchained step: the same logits, bit for bit, eager and replayed."""
    ref = reference("llama-gqa")
    ids, mask, greedy = ref["input_ids"], ref["attention_mask"], ref["greedy"]
    width = ids.shape[1]
    tokens = [np.ascontiguousarray(greedy[:, width + i]) for i in range(3)]
    results = []
    for chained in (True, False):
        backend = HipBackend(device, gemv_rows=GEMV_MAX_ROWS)
        with backend, LlamaDecoder.from_folder(DATA / "llama-gqa", backend, dtype=dtype) as d:
            d.chain_products = chained
            d.forward(ids, mask)
            eager = [backend.cast(d.decode(t), np.float32).to_numpy() for t in tokens[:2]]
            step = d.decode_step(graph=True)
            replayed = backend.cast(step(backend.from_numpy(tokens[2])), np.float32)
            results.append([*eager, replayed.to_numpy()])
    for chained, separate in zip(*results, strict=True):
        np.testing.assert_array_equal(chained, separate)


@pytest.mark.parametrize("name", MODELS)
def test_fused_bf16_decode_within_torchs_own_bf16_error(
    device: Device, program_cache: Path, name: str
) -> None:
    """bf16: the fused steps keep the normed rows and gate/up in f32 (unfused, they are
    rounded to bf16), so they stay within the error bound the unfused ops meet."""
    ref = reference(name)
    ids, mask, greedy = ref["input_ids"], ref["attention_mask"], ref["greedy"]
    width = ids.shape[1]
    backend = HipBackend(device, gemv_rows=GEMV_MAX_ROWS)
    with backend, LlamaDecoder.from_folder(DATA / name, backend, dtype="bfloat16") as decoder:
        decoder.forward(ids, mask)
        step = decoder.decode(greedy[:, width])
        got = backend.cast(step, np.float32).to_numpy()
    with LlamaDecoder.from_folder(DATA / name, device) as f32_decoder:
        whole = np.concatenate([mask, np.ones((len(ids), 1), np.int64)], axis=1)
        expected = f32_decoder.forward(greedy[:, : width + 1], whole).to_numpy()[:, width]
    assert np.abs(got - expected).max() <= 3 * float(ref["bf16_error"])

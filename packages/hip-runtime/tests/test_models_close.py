"""Closing a model frees what it owns, at once: the weights (and, for LlamaDecoder, the rotary
tables, the KV cache and the decode steps' state and graph) go back to the backend's pool, a
tensor of the closed model raises ClosedError, and so do its methods; a backend given to the
model (shared) stays open and gets its memory back. Issue 39: the weights used to stay
allocated and readable until the model object was collected.

Runs on the cpu platform and, marked gpu, on nvidia (where the decode graph is captured too).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from hip_core import ClosedError, Device
from hip_runtime import DeviceTensor, HipBackend
from hip_runtime.models import BertEncoder, LlamaDecoder

DATA = Path(__file__).parent / "data" / "models"


def llama_inputs() -> tuple[np.ndarray, np.ndarray]:
    with np.load(DATA / "llama-tied" / "reference.npz") as ref:
        return ref["input_ids"], ref["attention_mask"]


def assert_closed(*tensors: DeviceTensor) -> None:
    for tensor in tensors:
        assert tensor.closed
        with pytest.raises(ClosedError):
            tensor.to_numpy()


def test_closing_an_encoder_frees_its_weights_now(device: Device, program_cache: Path) -> None:
    ids = np.load(DATA / "bert-tiny" / "reference.npz")["input_ids"]
    encoder = BertEncoder.from_folder(DATA / "bert-tiny", device)
    pool, word = encoder.backend.pool, encoder.weights.word
    qkv = encoder.weights.layers[1].qkv[0]
    encoder.encode(ids).to_numpy()
    held = pool.stats().in_use
    assert held >= word.nbytes + qkv.nbytes
    with encoder:
        pass
    assert pool.stats().in_use == 0  # everything the encoder had, with the object still alive
    assert_closed(word, qkv)
    for call in (lambda: encoder.encode(ids), lambda: encoder.forward(ids)):
        with pytest.raises(ClosedError, match="BertEncoder is closed"):
            call()


def test_closing_a_decoder_frees_weights_tables_cache_and_steps(
    device: Device, program_cache: Path, platform: str
) -> None:
    ids, mask = llama_inputs()
    decoder = LlamaDecoder.from_folder(DATA / "llama-tied", device)
    pool, weights = decoder.backend.pool, decoder.weights
    decoder.generate(ids, mask, max_new_tokens=3)  # the KV cache and an eager step's state
    step = decoder._eager_step
    assert step is not None and step._state is not None
    owned = [weights.embed, weights.norm, weights.layers[0].q, decoder._cos, decoder._sin]
    owned.append(step._state)
    if platform != "cpu":  # (no graph replay on the cpu platform: test_models_llama.py)
        decoder.generate(ids, mask, max_new_tokens=3, graph=True)
        assert decoder._graph_step is not None and decoder._graph_step._graph is not None
        graph = decoder._graph_step._graph
        owned += [*graph.inputs, graph.outputs]
    cache = decoder.cache
    assert cache is not None
    decoder.close()
    assert_closed(*owned)
    assert cache.closed
    assert pool.stats().in_use == 0
    for call in (lambda: decoder.forward(ids, mask), lambda: decoder.decode(ids[:, -1]),
                 lambda: decoder.generate(ids, mask, max_new_tokens=2)):  # fmt: skip
        with pytest.raises(ClosedError, match="LlamaDecoder is closed"):
            call()
    decoder.close()  # twice is harmless


@pytest.mark.parametrize("model", ["bert", "llama"])
def test_a_shared_backend_stays_open_and_gets_its_memory_back(
    device: Device, program_cache: Path, model: str
) -> None:
    with HipBackend(device) as backend:
        kept = backend.from_numpy(np.arange(6, dtype=np.float32))
        before = backend.pool.stats().in_use
        loaded: BertEncoder | LlamaDecoder
        if model == "bert":
            loaded = BertEncoder.from_folder(DATA / "bert-tiny", backend)
            weight = loaded.weights.word
        else:
            loaded = LlamaDecoder.from_folder(DATA / "llama-tied", backend)
            weight = loaded.weights.embed
        assert loaded.backend is backend and weight.stream is backend.stream
        assert backend.pool.stats().in_use > before
        loaded.close()
        assert not backend.closed and backend.pool.stats().in_use == before
        assert_closed(weight)
        np.testing.assert_array_equal(backend.add(kept, 1).to_numpy(), np.arange(1, 7))

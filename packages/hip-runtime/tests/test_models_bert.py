"""BertEncoder against Hugging Face transformers, and its handling of bad input.

The references under tests/data/models/bert*/ were made by tools/make_bert_reference.py
(torch CPU, f32, eager attention) from small random-init models saved with `save_pretrained`:
`bert-tiny` (a BertModel with its pooler) and `bert-mlm-tiny` (a BertForMaskedLM: names under
"bert.", tanh GELU, three token types). f32 must agree within 1e-4 relative; bf16 within twice
what torch's own bf16 run differs from its f32 (stored beside the reference).

On the cpu platform in CI; through the `device` fixture, marked gpu, on nvidia too. The gpu test
at the end builds a larger BERT with transformers on the fly (torch is on the H200 machine).
"""

from __future__ import annotations

import importlib.util
import json
import shutil
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from hip_core import ClosedError, Device, use_platform
from hip_runtime.models import BertEncoder

DATA = Path(__file__).parent / "data" / "models"
EXAMPLE = Path(__file__).resolve().parents[3] / "docs" / "examples" / "encode_sentences.py"
MODELS = ("bert-tiny", "bert-mlm-tiny")
BF16_FACTOR = 2.0  # bf16 may differ from f32 by this many times torch's own bf16 difference
Loader = Callable[[str, str], BertEncoder]


def reference(name: str) -> dict[str, np.ndarray]:
    with np.load(DATA / name / "reference.npz") as stored:
        return dict(stored)


def feeds(ref: dict[str, np.ndarray]) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    return ref["input_ids"], ref["attention_mask"], ref["token_type_ids"]


def spread(got: np.ndarray, expected: np.ndarray) -> float:
    """max |got - expected| / max |expected|: the measure the stored bf16 figures use."""
    return float(np.abs(got.astype(np.float32) - expected).max() / np.abs(expected).max())


@pytest.fixture(scope="module")
def encoders(device: Device, program_cache: Path) -> Iterator[Loader]:
    """Each (model, dtype) loaded once for the module, closed at its end."""
    made: dict[tuple[str, str], BertEncoder] = {}

    def load(name: str, dtype: str) -> BertEncoder:
        if (name, dtype) not in made:
            made[name, dtype] = BertEncoder.from_folder(DATA / name, device, dtype=dtype)
        return made[name, dtype]

    yield load
    for encoder in made.values():
        encoder.close()


@pytest.mark.parametrize("name", MODELS)
def test_f32_matches_transformers(encoders: Loader, name: str) -> None:
    ref, encoder = reference(name), encoders(name, "float32")
    hidden = encoder.forward(*feeds(ref)).to_numpy()
    assert hidden.shape == ref["last_hidden_state"].shape and hidden.dtype == np.float32
    scale = np.abs(ref["last_hidden_state"]).max()
    np.testing.assert_allclose(hidden, ref["last_hidden_state"], rtol=1e-4, atol=1e-4 * scale)
    poolings = ["mean", "cls"] + (["pooler"] if encoder.has_pooler else [])
    assert encoder.has_pooler == ("pooler" in ref)
    for pooling in poolings:
        got = encoder.encode(*feeds(ref), pooling=pooling, normalize=pooling != "pooler")
        assert got.shape == ref[pooling].shape and got.dtype == np.float32
        np.testing.assert_allclose(got.to_numpy(), ref[pooling], rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("name", MODELS)
def test_bf16_within_torch_own_bf16_difference(encoders: Loader, name: str) -> None:
    ref, encoder = reference(name), encoders(name, "bfloat16")
    assert encoder.dtype.name == "bfloat16"
    hidden = encoder.forward(*feeds(ref))
    assert hidden.dtype == encoder.dtype
    got = {"last_hidden_state": hidden.to_numpy()}
    for pooling in ("mean", "cls", "pooler") if encoder.has_pooler else ("mean", "cls"):
        got[pooling] = encoder.encode(
            *feeds(ref), pooling=pooling, normalize=pooling != "pooler"
        ).to_numpy()  # fmt: skip
    for key, value in got.items():
        torch_spread = float(ref[f"bf16_{key}"])
        assert 0 < torch_spread < 0.1  # the stored figure is a real bf16 difference
        assert spread(value, ref[key]) <= BF16_FACTOR * torch_spread, key


def test_device_inputs_and_defaults(encoders: Loader) -> None:
    """int32 device tensors give what int64 host arrays give; no token types is type 0; no
    mask attends to every token (the same as an all-ones mask)."""
    ref, encoder = reference("bert-mlm-tiny"), encoders("bert-mlm-tiny", "float32")
    ids, mask, types = feeds(ref)
    backend = encoder.backend
    on_device = [backend.from_numpy(a.astype(np.int32)) for a in (ids, mask, types)]
    np.testing.assert_array_equal(
        encoder.forward(*on_device).to_numpy(), encoder.forward(ids, mask, types).to_numpy()
    )
    np.testing.assert_array_equal(
        encoder.forward(ids, mask).to_numpy(),
        encoder.forward(ids, mask, np.zeros_like(types)).to_numpy(),
    )
    np.testing.assert_allclose(
        encoder.encode(ids[:1]).to_numpy(),
        encoder.encode(ids[:1], np.ones_like(ids[:1])).to_numpy(),
        rtol=1e-5, atol=1e-6,
    )  # fmt: skip
    np.testing.assert_array_equal(
        encoder.forward(ids, mask.astype(bool), types).to_numpy(),
        encoder.forward(ids, mask, types).to_numpy(),
    )


def test_device_ids_out_of_range_embed_zeros_without_touching_other_sequences(
    encoders: Loader,
) -> None:
    """Device ids are not read on the host: an id past the vocabulary embeds a zero row (the
    documented rule); its sequence stays finite and the others are exactly as before."""
    ref, encoder = reference("bert-tiny"), encoders("bert-tiny", "float32")
    ids, mask, types = feeds(ref)
    bad = ids.copy()
    bad[1, 2] = encoder.config.vocab_size + 5
    got = encoder.forward(encoder.backend.from_numpy(bad), mask, types).to_numpy()
    good = encoder.forward(ids, mask, types).to_numpy()
    assert np.isfinite(got).all()
    np.testing.assert_array_equal(np.delete(got, 1, axis=0), np.delete(good, 1, axis=0))
    assert not np.allclose(got[1], good[1])


@pytest.mark.parametrize(
    ("change", "message"),
    [
        (lambda ids, mask, types: (ids.astype(np.float32), mask, types), "int32 or int64"),
        (lambda ids, mask, types: (ids[0], None, None), r"shape \(13,\)"),
        (lambda ids, mask, types: (ids[:, :0], None, None), "at least 1"),
        (lambda ids, mask, types: (ids, mask[:, :-1], types), "attention_mask has shape"),
        (lambda ids, mask, types: (ids, mask.astype(np.float32), types), "integer or bool"),
        (lambda ids, mask, types: (ids, mask, types + 2), "outside .0, type_vocab_size = 2"),
        (lambda ids, mask, types: (ids + 200, mask, types), "outside .0, vocab_size = 120"),
        (lambda ids, mask, types: (ids - 1, mask, types), "holds -1"),
        (lambda ids, mask, types: (np.tile(ids, 3), None, None), "max_position_embeddings = 32"),
        (lambda ids, mask, types: (ids.tolist(), None, None), "numpy array or a DeviceTensor"),
    ],
    ids=["float ids", "1-D ids", "no tokens", "mask shape", "float mask", "type out of range",
         "id past vocab", "negative id", "too long", "a list"],
)  # fmt: skip
def test_bad_inputs_raise_before_anything_is_queued(
    encoders: Loader, change: Callable[..., Any], message: str
) -> None:
    ref, encoder = reference("bert-tiny"), encoders("bert-tiny", "float32")
    with pytest.raises((ValueError, TypeError), match=message):
        encoder.encode(*change(*feeds(ref)))


def test_bad_options(encoders: Loader) -> None:
    encoder = encoders("bert-mlm-tiny", "float32")
    ids = reference("bert-mlm-tiny")["input_ids"]
    assert not encoder.has_pooler
    with pytest.raises(ValueError, match="no pooler"):
        encoder.encode(ids, pooling="pooler")
    with pytest.raises(ValueError, match="pooling must be one of"):
        encoder.encode(ids, pooling="max")
    with pytest.raises(ValueError, match="dtype must be float32, float16 or bfloat16"):
        BertEncoder.from_folder(DATA / "bert-tiny", encoder.backend.device, dtype="int8")


def edited_copy(tmp_path: Path, name: str, **changes: Any) -> Path:
    """A copy of a stored model whose config.json has `changes` (None removes a field)."""
    folder = tmp_path / name
    shutil.copytree(DATA / name, folder)
    config = json.loads((folder / "config.json").read_text())
    for key, value in changes.items():
        if value is None:
            config.pop(key)
        else:
            config[key] = value
    (folder / "config.json").write_text(json.dumps(config))
    return folder


@pytest.mark.parametrize(
    ("changes", "message"),
    [
        ({"num_attention_heads": None}, "'num_attention_heads' is missing"),
        ({"hidden_size": "64"}, "'hidden_size' must be int"),
        ({"hidden_act": "quick_gelu"}, "hidden_act 'quick_gelu' is not supported"),
        ({"position_embedding_type": "relative_key"}, "position_embedding_type"),
        ({"model_type": "roberta"}, "model_type 'roberta' is not supported"),
        ({"num_attention_heads": 3}, "must split into 3 heads"),
        ({"num_hidden_layers": 3}, "lacks 16 tensor"),
        ({"intermediate_size": 100}, r"intermediate.dense.weight is \(128, 64\)"),
    ],
    ids=["missing field", "mistyped field", "activation", "relative positions", "not bert",
         "heads", "missing layer", "wrong shape"],
)  # fmt: skip
def test_bad_folders_are_refused_clearly(
    device: Device, tmp_path: Path, changes: dict[str, Any], message: str
) -> None:
    folder = edited_copy(tmp_path, "bert-tiny", **changes)
    with pytest.raises(ValueError, match=message):
        BertEncoder.from_folder(folder, device)


def test_close_and_with(device: Device, program_cache: Path) -> None:
    ids = reference("bert-mlm-tiny")["input_ids"]
    with BertEncoder.from_folder(DATA / "bert-mlm-tiny", device) as encoder:
        assert "2 layers, hidden 32, 2 heads, float32" in repr(encoder)
        runtime = encoder.runtime
        assert encoder.encode(ids).shape == (len(ids), 32)
        assert len(runtime.weights) == 5 + 2 * 12  # embeddings, then each layer (QKV fused)
    assert encoder.closed and runtime.closed and repr(encoder) == "<BertEncoder closed>"
    with pytest.raises(ClosedError):
        encoder.forward(ids)
    encoder.close()  # twice is harmless


def test_the_documented_encode_sentences_example(device: Device, program_cache: Path) -> None:
    spec = importlib.util.spec_from_file_location("encode_sentences", EXAMPLE)
    assert spec is not None and spec.loader is not None
    example = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(example)
    ref = reference("bert-tiny")
    names = ("input_ids", "attention_mask", "token_type_ids")  # a tokenizer's output
    vectors = example.embed(DATA / "bert-tiny", {name: ref[name] for name in names}, device)
    np.testing.assert_allclose(vectors, ref["mean"], rtol=1e-4, atol=1e-5)
    similar = example.similarities(vectors)
    np.testing.assert_allclose(np.diag(similar), 1.0, rtol=1e-5)
    np.testing.assert_allclose(similar, ref["mean"] @ ref["mean"].T, atol=1e-5)


@pytest.mark.gpu
@pytest.mark.parametrize("dtype", ["float32", "bfloat16"])
def test_larger_bert_matches_transformers_on_the_gpu(tmp_path: Path, dtype: str) -> None:
    """A 4-layer, hidden-512 BERT built by transformers now, on a batch of 16 × 128 padded
    tokens: the nvidia device against torch CPU f32 (bf16 against torch's own bf16 spread)."""
    torch = pytest.importorskip("torch")
    transformers = pytest.importorskip("transformers")
    torch.manual_seed(23)
    config = transformers.BertConfig(
        vocab_size=3000, hidden_size=512, num_hidden_layers=4, num_attention_heads=8,
        intermediate_size=2048, max_position_embeddings=256, initializer_range=0.1,
        attn_implementation="eager",
    )  # fmt: skip
    model = transformers.BertModel(config).eval()
    model.save_pretrained(tmp_path)
    rng = np.random.default_rng(23)
    lengths = rng.integers(1, 129, 16)
    lengths[0] = 128
    mask = (np.arange(128)[None, :] < lengths[:, None]).astype(np.int64)
    ids = rng.integers(1, config.vocab_size, mask.shape) * mask
    types = (np.arange(128)[None, :] >= lengths[:, None] // 2) * mask
    inputs = {"input_ids": ids, "attention_mask": mask, "token_type_ids": types}

    def torch_hidden() -> np.ndarray:
        with torch.no_grad():
            out = model(**{k: torch.from_numpy(v) for k, v in inputs.items()})
        return out.last_hidden_state.float().numpy()

    expected = torch_hidden()
    model.to(torch.bfloat16)
    torch_spread = spread(torch_hidden(), expected)
    with use_platform("nvidia"), BertEncoder.from_folder(tmp_path, dtype=dtype) as encoder:
        got = encoder.forward(ids, mask, types).to_numpy().astype(np.float32)
    if dtype == "float32":
        scale = np.abs(expected).max()
        np.testing.assert_allclose(got, expected, rtol=1e-4, atol=1e-4 * scale)
    else:
        assert spread(got, expected) <= BF16_FACTOR * torch_spread

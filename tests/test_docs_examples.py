"""The code docs/ops.md shows runs and is right: docs/examples/sentence_encoder.py against a
float64 numpy BERT (post-LN layers, GELU MLP, masked mean pooling, L2 normalization) on a small
random model, padded batch included, with the fused attention op and with the general ops.

On the cpu platform in CI; marked gpu, on nvidia too.
"""

from __future__ import annotations

import importlib.util
import math
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from hip_core import use_platform
from hip_runtime import HipBackend, testing

EXAMPLE = Path(__file__).resolve().parents[1] / "docs" / "examples" / "sentence_encoder.py"
VOCAB, MAX_POSITIONS, HIDDEN, HEADS, LAYERS, INTERMEDIATE, EPS = 50, 16, 32, 4, 2, 48, 1e-12


def load_example() -> Any:
    spec = importlib.util.spec_from_file_location("sentence_encoder", EXAMPLE)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def bert_weights(rng: np.random.Generator) -> dict[str, np.ndarray]:
    """Random f32 weights named as a Hugging Face BertModel's."""

    def normal(*shape: int, scale: float = 0.2) -> np.ndarray:
        return (rng.standard_normal(shape) * scale).astype(np.float32)

    w = {
        "embeddings.word_embeddings.weight": normal(VOCAB, HIDDEN),
        "embeddings.position_embeddings.weight": normal(MAX_POSITIONS, HIDDEN),
        "embeddings.token_type_embeddings.weight": normal(2, HIDDEN),
        "embeddings.LayerNorm.weight": 1 + normal(HIDDEN, scale=0.1),
        "embeddings.LayerNorm.bias": normal(HIDDEN, scale=0.1),
    }
    for i in range(LAYERS):
        p = f"encoder.layer.{i}."
        for name, (out, into) in {
            "attention.self.query": (HIDDEN, HIDDEN), "attention.self.key": (HIDDEN, HIDDEN),
            "attention.self.value": (HIDDEN, HIDDEN), "attention.output.dense": (HIDDEN, HIDDEN),
            "intermediate.dense": (INTERMEDIATE, HIDDEN), "output.dense": (HIDDEN, INTERMEDIATE),
        }.items():  # fmt: skip
            w[p + name + ".weight"], w[p + name + ".bias"] = normal(out, into), normal(out)
        for norm in ("attention.output.LayerNorm", "output.LayerNorm"):
            w[p + norm + ".weight"] = 1 + normal(HIDDEN, scale=0.1)
            w[p + norm + ".bias"] = normal(HIDDEN, scale=0.1)
    return w


def numpy_bert(w: dict[str, np.ndarray], ids: np.ndarray, mask: np.ndarray) -> np.ndarray:
    """The sentence embeddings in float64."""
    f = {name: value.astype(np.float64) for name, value in w.items()}
    batch, seq = ids.shape
    d = HIDDEN // HEADS

    def norm(x: np.ndarray, name: str) -> np.ndarray:
        mu = x.mean(-1, keepdims=True)
        var = ((x - mu) ** 2).mean(-1, keepdims=True)
        return (x - mu) / np.sqrt(var + EPS) * f[name + ".weight"] + f[name + ".bias"]

    def dense(x: np.ndarray, name: str) -> np.ndarray:
        return x @ f[name + ".weight"].T + f[name + ".bias"]

    x = f["embeddings.word_embeddings.weight"][ids] + f["embeddings.position_embeddings.weight"][
        :seq] + f["embeddings.token_type_embeddings.weight"][0]  # fmt: skip
    x = norm(x, "embeddings.LayerNorm")
    for i in range(LAYERS):
        p = f"encoder.layer.{i}."
        q, k, v = (dense(x, p + "attention.self." + n).reshape(batch, seq, HEADS, d)
                   .transpose(0, 2, 1, 3) for n in ("query", "key", "value"))  # fmt: skip
        scores = q @ k.transpose(0, 1, 3, 2) / math.sqrt(d)
        scores = np.where(mask[:, None, None, :] != 0, scores, -np.inf)
        probs = np.exp(scores - scores.max(-1, keepdims=True))
        probs /= probs.sum(-1, keepdims=True)
        context = (probs @ v).transpose(0, 2, 1, 3).reshape(batch, seq, HIDDEN)
        x = norm(dense(context, p + "attention.output.dense") + x, p + "attention.output.LayerNorm")
        hidden = testing.gelu(dense(x, p + "intermediate.dense"))
        x = norm(dense(hidden, p + "output.dense") + x, p + "output.LayerNorm")
    pooled = (x * mask[:, :, None]).sum(1) / mask.sum(1)[:, None]
    return pooled / np.linalg.norm(pooled, axis=-1, keepdims=True)


@pytest.mark.parametrize(
    "platform", [pytest.param("cpu"), pytest.param("nvidia", marks=pytest.mark.gpu)]
)
@pytest.mark.parametrize("fused", [True, False], ids=["attention op", "general ops"])
def test_the_documented_sentence_encoder_matches_numpy(platform: str, fused: bool) -> None:
    example = load_example()
    rng = np.random.default_rng(7)
    weights = bert_weights(rng)
    lengths = [11, 4, 1]  # a padded batch: the tokenizer's int64 ids and mask, as they come
    seq = max(lengths)
    ids = rng.integers(1, VOCAB, (len(lengths), seq)).astype(np.int64)
    mask = (np.arange(seq)[None, :] < np.array(lengths)[:, None]).astype(np.int64)
    ids[mask == 0] = 0
    with use_platform(platform), HipBackend() as backend:
        on_device = {name: backend.from_numpy(value) for name, value in weights.items()}
        got = example.encode(
            backend, on_device, backend.from_numpy(ids), backend.from_numpy(mask),
            layers=LAYERS, heads=HEADS, eps=EPS, fused=fused,
        ).to_numpy()  # fmt: skip
    expected = numpy_bert(weights, ids, mask)
    assert got.shape == (len(lengths), HIDDEN) and got.dtype == np.float32
    np.testing.assert_allclose(got, expected, rtol=1e-4, atol=2e-5)


def test_the_ops_page_first_example_runs(capsys: pytest.CaptureFixture[str]) -> None:
    page = (EXAMPLE.parents[1] / "ops.md").read_text()
    code = page.split("```python\n", 1)[1].split("```", 1)[0]
    with use_platform("cpu"):
        exec(compile(code, "docs/ops.md", "exec"), {})
    printed = np.array(capsys.readouterr().out.strip(" []\n").split(), dtype=np.float64)
    assert printed.shape == (8,) and np.all(printed >= 0)

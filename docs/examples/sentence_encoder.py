"""A BERT-style sentence encoder (as all-MiniLM-L6-v2) written with HipBackend's ops.

Everything runs on the device from the tokenizer's own output: int64 token ids and the
attention mask are uploaded as they are; the padding mask is made on the device by a
comparison; heads are split and merged through views (no transposes, no copies); every
sequence of the batch goes through each op at once (no Python loop over sentences); mean
pooling and the L2 normalization are reductions. docs/ops.md shows this file; the test
tests/test_docs_examples.py runs it against a float64 numpy BERT.

`weights` holds DeviceTensors named as in a Hugging Face BERT checkpoint, with the layer
prefix `encoder.layer.{i}.` taken off (see `layer_weights`).
"""

from __future__ import annotations

import math

from hip_runtime import DeviceTensor, HipBackend

Weights = dict[str, DeviceTensor]


def dense(backend: HipBackend, w: Weights, name: str, x: DeviceTensor) -> DeviceTensor:
    """x @ weightᵀ + bias of the checkpoint's linear layer `name` (torch.nn.Linear)."""
    return backend.linear(x, w[f"{name}.weight"], w[f"{name}.bias"])


def self_attention_with_ops(
    backend: HipBackend, w: Weights, x: DeviceTensor, keep: DeviceTensor, heads: int
) -> DeviceTensor:
    """Multi-head self-attention from the general ops: x [B, S, H], keep [B, 1, 1, S] bool."""
    batch, seq, hidden = x.shape
    d = hidden // heads

    def split_heads(t: DeviceTensor) -> DeviceTensor:  # [B, S, H] -> [B, heads, S, D], a view
        return t.reshape(batch, seq, heads, d).permute(0, 2, 1, 3)

    q = split_heads(dense(backend, w, "attention.self.query", x))
    k = split_heads(dense(backend, w, "attention.self.key", x))
    v = split_heads(dense(backend, w, "attention.self.value", x))
    scores = backend.matmul(q, k.mT, alpha=1.0 / math.sqrt(d))  # [B, heads, S, S]; k.mT is a view
    scores = backend.where(keep, scores, -math.inf)  # padding keys never attended
    probs = backend.softmax(scores)
    context = backend.empty((batch, seq, heads, d), x.dtype)
    backend.matmul(probs, v, out=context.permute(0, 2, 1, 3))  # written straight into [B, S, H, D]
    return context.reshape(batch, seq, hidden)


def self_attention(
    backend: HipBackend, w: Weights, x: DeviceTensor, keep: DeviceTensor, heads: int
) -> DeviceTensor:
    """The same with the fused attention op: the S x S scores never reach device memory."""
    batch, seq, hidden = x.shape
    d = hidden // heads

    def split_heads(t: DeviceTensor) -> DeviceTensor:
        return t.reshape(batch, seq, heads, d).permute(0, 2, 1, 3)

    q = split_heads(dense(backend, w, "attention.self.query", x))
    k = split_heads(dense(backend, w, "attention.self.key", x))
    v = split_heads(dense(backend, w, "attention.self.value", x))
    context = backend.empty((batch, seq, heads, d), x.dtype)
    backend.scaled_dot_product_attention(q, k, v, mask=keep, out=context.permute(0, 2, 1, 3))
    return context.reshape(batch, seq, hidden)


def encoder_layer(
    backend: HipBackend, w: Weights, x: DeviceTensor, keep: DeviceTensor, heads: int,
    eps: float, fused: bool = True,
) -> DeviceTensor:  # fmt: skip
    """One post-LN BERT layer: attention, then the GELU MLP, each with a residual."""
    attend = self_attention if fused else self_attention_with_ops
    context = attend(backend, w, x, keep, heads)
    attended = dense(backend, w, "attention.output.dense", context)
    x = backend.layernorm(
        backend.add(attended, x), w["attention.output.LayerNorm.weight"],
        w["attention.output.LayerNorm.bias"], eps=eps,
    )  # fmt: skip
    hidden = backend.gelu(dense(backend, w, "intermediate.dense", x))
    out = dense(backend, w, "output.dense", hidden)
    return backend.layernorm(
        backend.add(out, x), w["output.LayerNorm.weight"], w["output.LayerNorm.bias"], eps=eps
    )


def layer_weights(weights: Weights, i: int) -> Weights:
    prefix = f"encoder.layer.{i}."
    return {name[len(prefix) :]: t for name, t in weights.items() if name.startswith(prefix)}


def encode(
    backend: HipBackend, weights: Weights, ids: DeviceTensor, attention_mask: DeviceTensor,
    *, layers: int, heads: int, eps: float = 1e-12, fused: bool = True,
) -> DeviceTensor:  # fmt: skip
    """Sentence embeddings [B, H]: ids and attention_mask are the tokenizer's [B, S] int64."""
    seq = ids.shape[1]
    positions = backend.arange(seq, dtype="int64")
    x = backend.embedding(ids, weights["embeddings.word_embeddings.weight"])  # [B, S, H]
    position = backend.embedding(positions, weights["embeddings.position_embeddings.weight"])
    x = backend.add(x, position)  # [S, H] broadcast over the batch
    x = backend.add(x, weights["embeddings.token_type_embeddings.weight"][0])  # one row, broadcast
    x = backend.layernorm(
        x, weights["embeddings.LayerNorm.weight"], weights["embeddings.LayerNorm.bias"], eps=eps
    )
    keep = backend.ne(attention_mask, 0)[:, None, None, :]  # [B, 1, 1, S] bool, a view
    for i in range(layers):
        x = encoder_layer(backend, layer_weights(weights, i), x, keep, heads, eps, fused)
    # Mean pooling over the real tokens, then unit length: both reductions on the device.
    mask = backend.cast(attention_mask, x.dtype)[:, :, None]  # [B, S, 1]
    pooled = backend.div(backend.sum(backend.mul(x, mask), axis=1), backend.sum(mask, axis=1))
    return backend.l2_normalize(pooled, axis=-1)


__all__ = ["encode", "encoder_layer", "layer_weights", "self_attention", "self_attention_with_ops"]

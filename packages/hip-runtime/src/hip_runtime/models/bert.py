"""BertEncoder: a BERT-style encoder (as all-MiniLM-L6-v2) from a Hugging Face folder.

    with BertEncoder.from_folder("all-MiniLM-L6-v2/", dtype="bfloat16") as encoder:
        hidden = encoder.forward(input_ids, attention_mask)        # [B, S, H] DeviceTensor
        vectors = encoder.encode(input_ids, attention_mask)        # [B, H] f32, unit length

The model: token + position + token-type embeddings and a LayerNorm, then post-LN layers
(self-attention, residual, LayerNorm; a GELU MLP, residual, LayerNorm), and BertModel's pooler
(dense + tanh on the first token) where the checkpoint has one. Checkpoints saved from
BertModel (no prefix) and from BertFor* heads ("bert." prefix; the head is not loaded) both work.

Everything runs on the device, on the backend's stream, with the whole padded batch in each op:
the ids and mask go up as the tokenizer made them, the key-padding mask is a comparison on the
device, attention is the fused `scaled_dot_product_attention` with the heads split and merged
through views of one fused QKV projection. `forward` and `encode` return at once (nothing
waits); `.to_numpy()` on the result waits for the backend's stream.

Inputs: `input_ids` [B, S] (S at most max_position_embeddings), numpy int32/int64 arrays or
DeviceTensors of this encoder's backend; `attention_mask` [B, S] (non-zero: a real token) and
`token_type_ids` [B, S] the same. Host arrays are checked on the host: an id outside
[0, vocab_size) or a token type outside [0, type_vocab_size) is a ValueError. Device ids are
never read by the host (that would wait for the device): an id out of range there embeds as a
row of zeros (hip_runtime's embedding rule), and the result is not meaningful.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Any

import numpy as np

from hip_core import Device, Resource
from hip_runtime.backend import HipBackend
from hip_runtime.models.bert_weights import BertWeights, prepare
from hip_runtime.models.common import close_runtime, load_model, model_dtype
from hip_runtime.models.config import positive_float, read_config, require
from hip_runtime.models.pooling import cls_pool, mean_pool
from hip_runtime.models.pooling import normalize as unit_length
from hip_runtime.runtime.model_runtime import ModelRuntime
from hip_runtime.tensors.dtypes import DTypeLike, bool_, float32
from hip_runtime.tensors.tensor import DeviceTensor

#: hidden_act values -> (HipBackend activation, its options). gelu_new, gelu_fast and
#: gelu_pytorch_tanh are all the tanh approximation.
ACTIVATIONS: dict[str, tuple[str, dict[str, str]]] = {
    "gelu": ("gelu", {}),
    "gelu_new": ("gelu", {"approximate": "tanh"}),
    "gelu_fast": ("gelu", {"approximate": "tanh"}),
    "gelu_pytorch_tanh": ("gelu", {"approximate": "tanh"}),
    "relu": ("relu", {}),
    "silu": ("silu", {}),
    "swish": ("silu", {}),
}
POOLINGS = ("mean", "cls", "pooler")
_MAX_HEAD_DIM = 256  # scaled_dot_product_attention's largest head size
_ID_DTYPES = (np.dtype(np.int32), np.dtype(np.int64))


@dataclass(frozen=True)
class BertConfig:
    """The fields of a BERT config.json this encoder reads (sizes in elements)."""

    vocab_size: int
    hidden_size: int
    num_hidden_layers: int
    num_attention_heads: int
    intermediate_size: int
    hidden_act: str
    max_position_embeddings: int
    type_vocab_size: int
    layer_norm_eps: float

    @property
    def head_dim(self) -> int:
        return self.hidden_size // self.num_attention_heads

    @classmethod
    def from_dict(cls, config: dict[str, Any], where: str = "config") -> BertConfig:
        """The config, checked: ValueError naming `where` and the field for a missing or
        mistyped field and for what this encoder does not run (relative positions, a decoder,
        cross-attention, an unknown activation, a head size attention cannot take)."""
        ints = ("vocab_size", "hidden_size", "num_hidden_layers", "num_attention_heads",
                "intermediate_size", "max_position_embeddings", "type_vocab_size")  # fmt: skip
        values: dict[str, Any] = {name: require(config, name, int, where) for name in ints}
        for name, value in values.items():
            if value < 1:
                raise ValueError(f"{where}: {name!r} must be at least 1, not {value}")
        values["hidden_act"] = require(config, "hidden_act", str, where)
        values["layer_norm_eps"] = positive_float(config, "layer_norm_eps", where)
        if values["hidden_act"] not in ACTIVATIONS:
            raise ValueError(
                f"{where}: hidden_act {values['hidden_act']!r} is not supported; this encoder "
                f"runs {', '.join(ACTIVATIONS)}"
            )
        refused = {
            "model_type": (config.get("model_type", "bert"), "bert"),
            "position_embedding_type": (config.get("position_embedding_type", "absolute"),
                                        "absolute"),
            "is_decoder": (config.get("is_decoder", False), False),
            "add_cross_attention": (config.get("add_cross_attention", False), False),
        }  # fmt: skip
        for name, (value, supported) in refused.items():
            if value != supported:
                raise ValueError(
                    f"{where}: {name} {value!r} is not supported (this encoder runs {supported!r})"
                )
        hidden, heads = values["hidden_size"], values["num_attention_heads"]
        if hidden % heads or hidden // heads > _MAX_HEAD_DIM:
            raise ValueError(
                f"{where}: hidden_size {hidden} must split into {heads} heads of at most "
                f"{_MAX_HEAD_DIM} elements"
            )
        return cls(**values)


class BertEncoder(Resource):
    """A BERT encoder's prepared weights on one device, owned through a ModelRuntime.

    Make one with `from_folder`. `close()` (or `with`) waits for the backend's stream and frees
    the weights, and the backend unless it was given (shared); every method of a closed
    encoder, and every tensor it held, raises hip_core.ClosedError.
    """

    def __init__(self, runtime: ModelRuntime, config: BertConfig, weights: BertWeights) -> None:
        self.runtime = runtime
        self.config = config
        self.weights = weights
        self.dtype = weights.word.dtype
        name, options = ACTIVATIONS[config.hidden_act]
        self._activation = getattr(runtime.backend, name)
        self._activation_options = options
        self._own(close_runtime, runtime)

    @classmethod
    def from_folder(
        cls,
        path: str | os.PathLike[str],
        device: Device | int | HipBackend | None = None,
        *,
        dtype: DTypeLike = "float32",
    ) -> BertEncoder:
        """The encoder in the Hugging Face folder `path` (config.json + safetensors, sharded
        or not), on `device` (a Device, an ordinal, None for the current one, or a HipBackend
        to share: the encoder then runs on its stream and `close()` leaves it open), computing
        in `dtype` (float32, float16 or bfloat16).

        config.json is checked before the device is touched (ValueError naming the file and
        the field). The checkpoint is loaded as stored, then each weight is cast to `dtype` on
        the device once (Q, K and V fused into one projection on the way) and the loaded copy
        is freed, so the device holds one copy of the model in `dtype`; a checkpoint with more
        layers than num_hidden_layers is refused. Returns with the weights resident. On
        failure nothing stays allocated.
        """
        target = model_dtype(dtype, "BertEncoder")
        config = BertConfig.from_dict(read_config(path), f"{os.fspath(path)}/config.json")
        return load_model(
            path, device, lambda backend, tensors: prepare(backend, tensors, config, target),
            lambda runtime, weights: cls(runtime, config, weights),
        )  # fmt: skip

    @property
    def backend(self) -> HipBackend:
        """The HipBackend the encoder runs on (its stream orders every op)."""
        return self.runtime.backend

    @property
    def has_pooler(self) -> bool:
        """Whether the checkpoint has BertModel's pooler (`encode(pooling="pooler")`)."""
        return self.weights.pooler is not None

    def forward(
        self, input_ids: Any, attention_mask: Any = None, token_type_ids: Any = None
    ) -> DeviceTensor:
        """The last hidden state [B, S, H] in the encoder's dtype (padded positions are
        computed too, as transformers does). Queued on the backend's stream; returns at once."""
        self._check_open()
        ids, mask, types = self._inputs(input_ids, attention_mask, token_type_ids)
        return self._forward(ids, mask, types)

    def encode(
        self,
        input_ids: Any,
        attention_mask: Any = None,
        token_type_ids: Any = None,
        *,
        pooling: str = "mean",
        normalize: bool = True,
    ) -> DeviceTensor:
        """Sentence embeddings [B, H], float32: `pooling` "mean" (over the real tokens, as
        sentence-transformers), "cls" (the first token) or "pooler" (BertModel's pooler:
        tanh(dense(first token)); only when `has_pooler`), then scaled to unit length when
        `normalize`. Queued on the backend's stream; returns at once."""
        self._check_open()
        if pooling not in POOLINGS:
            raise ValueError(f"encode: pooling must be one of {POOLINGS}, not {pooling!r}")
        if pooling == "pooler" and self.weights.pooler is None:
            raise ValueError("encode: this checkpoint has no pooler (pooler.dense.*)")
        ids, mask, types = self._inputs(input_ids, attention_mask, token_type_ids)
        hidden = self._forward(ids, mask, types)
        backend = self.backend
        if pooling == "mean":
            pooled = mean_pool(backend, hidden, mask)
        elif pooling == "cls":
            pooled = cls_pool(backend, hidden)
        else:
            pooled = self._pooler(hidden)
        return unit_length(backend, pooled) if normalize else pooled

    def close(self) -> None:
        """Wait for the backend's stream and free the weights (which raise ClosedError from
        then on), and the backend unless it was given. Twice is fine."""
        super().close()

    def __repr__(self) -> str:
        if self.closed:
            return "<BertEncoder closed>"
        c = self.config
        return (
            f"<BertEncoder {c.num_hidden_layers} layers, hidden {c.hidden_size}, "
            f"{c.num_attention_heads} heads, {self.dtype} on {self.backend.device!r}>"
        )

    # --- private ------------------------------------------------------------------------------

    def _forward(
        self, ids: DeviceTensor, mask: DeviceTensor | None, types: DeviceTensor | None
    ) -> DeviceTensor:
        backend, w, c = self.backend, self.weights, self.config
        batch, seq = ids.shape
        x = backend.embedding(ids, w.word)  # [B, S, H]
        backend.add(x, w.position[:seq], out=x)  # positions 0..S-1: a view, broadcast over B
        token_types = w.token_type[0] if types is None else backend.embedding(types, w.token_type)
        backend.add(x, token_types, out=x)
        x = backend.layernorm(x, *w.embedding_norm, eps=c.layer_norm_eps)
        # The key-padding mask [B, 1, 1, S] (True attends): a comparison on the device, a view.
        keep = None
        if mask is not None:
            keep = (mask if mask.dtype == bool_ else backend.ne(mask, 0))[:, None, None, :]
        heads, d = c.num_attention_heads, c.head_dim
        for layer in w.layers:
            qkv = backend.linear(x, *layer.qkv)  # [B, S, 3H]
            split = qkv.reshape(batch, seq, 3, heads, d).permute(2, 0, 3, 1, 4)  # a view
            q, k, v = split[0], split[1], split[2]  # [B, heads, S, D] each, views
            context = backend.empty((batch, seq, heads, d), self.dtype)
            backend.scaled_dot_product_attention(
                q, k, v, mask=keep, out=context.permute(0, 2, 1, 3)
            )  # the heads written straight into [B, S, heads, D]: merging them is a reshape
            # The product's bias and the residual are added by the LayerNorm as it reads the
            # plain product (in f32, one launch: kernels/add_norm.h), which it normalizes in
            # place.
            weight, bias = layer.output
            attended = backend.linear(context.reshape(batch, seq, c.hidden_size), weight)
            x = self._add_norm(attended, x, bias, layer.attention_norm)
            inner = self._activated(x, *layer.intermediate)
            weight, bias = layer.down
            x = self._add_norm(backend.linear(inner, weight), x, bias, layer.output_norm)
        return x

    def _add_norm(
        self, product: DeviceTensor, residual: DeviceTensor, bias: DeviceTensor, norm: Any
    ) -> DeviceTensor:
        """LayerNorm(product + bias + residual), into `product`'s memory."""
        return self.backend.layernorm(
            product, *norm, eps=self.config.layer_norm_eps, residual=residual, input_bias=bias,
            out=product,
        )  # fmt: skip

    def _activated(self, x: DeviceTensor, weight: DeviceTensor, bias: Any) -> DeviceTensor:
        """activation(x @ weightᵀ + bias): a GELU adds the bias as it reads the product."""
        if self._activation == self.backend.gelu and bias is not None:
            inner = self.backend.linear(x, weight)
            return self.backend.gelu(inner, bias=bias, out=inner, **self._activation_options)
        inner = self.backend.linear(x, weight, bias)
        return self._activation(inner, out=inner, **self._activation_options)  # type: ignore[no-any-return]

    def _pooler(self, hidden: DeviceTensor) -> DeviceTensor:
        assert self.weights.pooler is not None
        backend = self.backend
        first = backend.linear(hidden[:, 0, :], *self.weights.pooler)
        return backend.cast(backend.tanh(first, out=first), float32)

    def _inputs(
        self, input_ids: Any, attention_mask: Any, token_type_ids: Any
    ) -> tuple[DeviceTensor, DeviceTensor | None, DeviceTensor | None]:
        """The three inputs as device tensors, every check done before anything is queued."""
        c = self.config
        ids = _checked("input_ids", input_ids, None, _ID_DTYPES, c.vocab_size, "vocab_size")
        shape = tuple(np.shape(ids)) if not isinstance(ids, DeviceTensor) else ids.shape
        if shape[1] > c.max_position_embeddings:
            raise ValueError(
                f"BertEncoder: input_ids has {shape[1]} tokens per sequence; this model takes "
                f"at most max_position_embeddings = {c.max_position_embeddings}"
            )
        mask = _checked("attention_mask", attention_mask, shape, None, None, "")
        types = _checked(
            "token_type_ids", token_type_ids, shape, _ID_DTYPES, c.type_vocab_size,
            "type_vocab_size",
        )  # fmt: skip
        return self._upload(ids), self._upload(mask), self._upload(types)

    def _upload(self, value: Any) -> Any:
        if value is None or isinstance(value, DeviceTensor):
            return value
        return self.backend.from_numpy(np.ascontiguousarray(value))


def _checked(
    name: str,
    value: Any,
    shape: tuple[int, ...] | None,
    dtypes: tuple[np.dtype[Any], ...] | None,
    bound: int | None,
    bound_name: str,
) -> Any:
    """`value` (None, a DeviceTensor, or a numpy array) checked for rank 2 / `shape`, its
    dtype (`dtypes`, or any integer or bool type when None) and, on the host only, its values
    in [0, bound)."""
    if value is None:
        return None
    if not isinstance(value, (DeviceTensor, np.ndarray)):
        raise TypeError(
            f"BertEncoder: {name} must be a numpy array or a DeviceTensor, not "
            f"{type(value).__name__}"
        )
    dtype = np.dtype(value.dtype)
    allowed = dtype.kind in "iub" if dtypes is None else dtype in dtypes
    if not allowed:
        kinds = "int32 or int64" if dtypes is not None else "an integer or bool type"
        raise ValueError(f"BertEncoder: {name} must be {kinds}, not {dtype}")
    if (shape is None and (len(value.shape) != 2 or 0 in value.shape)) or (
        shape is not None and tuple(value.shape) != shape
    ):
        expected = "[batch, tokens], both at least 1" if shape is None else f"{shape}"
        raise ValueError(f"BertEncoder: {name} has shape {tuple(value.shape)}; expected {expected}")
    if bound is not None and isinstance(value, np.ndarray):
        low, high = int(value.min()), int(value.max())
        if low < 0 or high >= bound:
            raise ValueError(
                f"BertEncoder: {name} holds {low if low < 0 else high}, outside "
                f"[0, {bound_name} = {bound})"
            )
    return value


__all__ = ["ACTIVATIONS", "POOLINGS", "BertConfig", "BertEncoder"]

"""A BERT checkpoint's tensors turned into the encoder's own: checked, cast, Q/K/V fused.

`prepare` reads the tensors of a loaded checkpoint (a Hugging Face BertModel's names, or a
BertFor* model's under "bert."), checks each one's shape against the config, and writes it in
the target dtype into new device tensors (from the backend's pool, queued on its stream). The
query, key and value projections become one [3H, H] weight and one [3H] bias, so a layer's
attention inputs come from one GEMM. Nothing refers to the checkpoint's tensors afterwards, so
the caller may free them once the backend's stream has run the casts.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from hip_runtime.backend import HipBackend
from hip_runtime.models.common import layers_beyond
from hip_runtime.tensors.dtypes import bfloat16
from hip_runtime.tensors.tensor import DeviceTensor

if TYPE_CHECKING:
    from hip_runtime.models.bert import BertConfig

Pair = tuple[DeviceTensor, DeviceTensor]  # (weight, bias) of a Linear or a LayerNorm
PREFIXES = ("", "bert.")  # BertModel's names; BertForMaskedLM's, BertForSequenceClassification's...


@dataclass(frozen=True)
class BertLayer:
    """One encoder layer: each entry a (weight, bias) pair as linear/layernorm take them."""

    qkv: Pair  # [3H, H], [3H]: query, key, value stacked along the output axis
    output: Pair  # attention.output.dense
    attention_norm: Pair  # attention.output.LayerNorm
    intermediate: Pair  # intermediate.dense [I, H]
    down: Pair  # output.dense [H, I]
    output_norm: Pair  # output.LayerNorm


@dataclass(frozen=True)
class BertWeights:
    word: DeviceTensor  # [vocab, H]
    position: DeviceTensor  # [max_positions, H]
    token_type: DeviceTensor  # [type_vocab, H]
    embedding_norm: Pair
    layers: tuple[BertLayer, ...]
    pooler: Pair | None  # pooler.dense, when the checkpoint has it

    def named(self) -> dict[str, DeviceTensor]:
        """Every tensor under a name (the fused QKV as `attention.self.qkv`), for
        ModelRuntime.weights: the runtime frees what it lists."""
        names = {
            "embeddings.word_embeddings.weight": self.word,
            "embeddings.position_embeddings.weight": self.position,
            "embeddings.token_type_embeddings.weight": self.token_type,
            **_pair("embeddings.LayerNorm", self.embedding_norm),
        }
        for i, layer in enumerate(self.layers):
            for field, module in _LAYER_MODULES.items():
                names.update(_pair(f"encoder.layer.{i}.{module}", getattr(layer, field)))
        if self.pooler is not None:
            names.update(_pair("pooler.dense", self.pooler))
        return names


#: BertLayer's fields and the checkpoint's module names (qkv is three modules, fused).
_LAYER_MODULES = {
    "qkv": "attention.self.qkv",
    "output": "attention.output.dense",
    "attention_norm": "attention.output.LayerNorm",
    "intermediate": "intermediate.dense",
    "down": "output.dense",
    "output_norm": "output.LayerNorm",
}


def prepare(
    backend: HipBackend, tensors: Mapping[str, DeviceTensor], config: BertConfig, dtype: Any
) -> BertWeights:
    """The encoder's weights in `dtype`, written from the checkpoint `tensors` on `backend`'s
    stream. Every name and shape is checked before the first cast is queued: ValueError
    naming the missing tensors, or the tensor and the shape expected."""
    source = _Source(tensors)
    h, i = config.hidden_size, config.intermediate_size
    # Check everything first, so a bad checkpoint queues nothing.
    source.shape("embeddings.word_embeddings.weight", (config.vocab_size, h))
    source.shape("embeddings.position_embeddings.weight", (config.max_position_embeddings, h))
    source.shape("embeddings.token_type_embeddings.weight", (config.type_vocab_size, h))
    source.pair_shapes("embeddings.LayerNorm", (h,), (h,))
    for n in range(config.num_hidden_layers):
        p = f"encoder.layer.{n}."
        for module in ("query", "key", "value"):
            source.pair_shapes(f"{p}attention.self.{module}", (h, h), (h,))
        source.pair_shapes(f"{p}attention.output.dense", (h, h), (h,))
        source.pair_shapes(f"{p}attention.output.LayerNorm", (h,), (h,))
        source.pair_shapes(f"{p}intermediate.dense", (i, h), (i,))
        source.pair_shapes(f"{p}output.dense", (h, i), (h,))
        source.pair_shapes(f"{p}output.LayerNorm", (h,), (h,))
    has_pooler = source.has("pooler.dense.weight")
    if has_pooler:
        source.pair_shapes("pooler.dense", (h, h), (h,))
    source.raise_missing()
    beyond = layers_beyond(tensors, f"{source.prefix}encoder.layer.", config.num_hidden_layers)
    if beyond:  # the config would run the first layers only: a different model, silently
        raise ValueError(
            f"BertEncoder: the checkpoint holds encoder layers up to {beyond[-1]}; config.json's "
            f"num_hidden_layers is {config.num_hidden_layers}"
        )

    def cast(name: str) -> DeviceTensor:
        return backend.cast(source.get(name), dtype)

    def pair(module: str) -> Pair:
        return cast(f"{module}.weight"), cast(f"{module}.bias")

    def fused(prefix: str, part: str) -> DeviceTensor:
        """query, key and value's `part` stacked along axis 0, each cast straight into its rows."""
        parts = [
            source.get(f"{prefix}attention.self.{m}.{part}") for m in ("query", "key", "value")
        ]
        out = backend.empty((3 * h, *parts[0].shape[1:]), dtype)
        for k, tensor in enumerate(parts):
            backend.cast(tensor, dtype, out=out[k * h : (k + 1) * h])
        return out

    layers = []
    for n in range(config.num_hidden_layers):
        p = f"encoder.layer.{n}."
        layers.append(
            BertLayer(
                qkv=(fused(p, "weight"), fused(p, "bias")),
                output=pair(f"{p}attention.output.dense"),
                attention_norm=pair(f"{p}attention.output.LayerNorm"),
                intermediate=pair(f"{p}intermediate.dense"),
                down=pair(f"{p}output.dense"),
                output_norm=pair(f"{p}output.LayerNorm"),
            )
        )
    return BertWeights(
        word=cast("embeddings.word_embeddings.weight"),
        position=cast("embeddings.position_embeddings.weight"),
        token_type=cast("embeddings.token_type_embeddings.weight"),
        embedding_norm=pair("embeddings.LayerNorm"),
        layers=tuple(layers),
        pooler=pair("pooler.dense") if has_pooler else None,
    )


class _Source:
    """The checkpoint's tensors under their names without the model prefix; collects what
    is missing so that one error lists it all."""

    def __init__(self, tensors: Mapping[str, DeviceTensor]) -> None:
        self.tensors = tensors
        self.prefix = next(
            (p for p in PREFIXES if f"{p}embeddings.word_embeddings.weight" in tensors), ""
        )
        self.missing: list[str] = []

    def has(self, name: str) -> bool:
        return self.prefix + name in self.tensors

    def get(self, name: str) -> DeviceTensor:
        return self.tensors[self.prefix + name]

    def shape(self, name: str, expected: Sequence[int]) -> None:
        if not self.has(name):
            self.missing.append(self.prefix + name)
            return
        got = self.get(name).shape
        if got != tuple(expected):
            raise ValueError(
                f"BertEncoder: checkpoint tensor {self.prefix + name} is {got}; the config "
                f"needs {tuple(expected)}"
            )
        if self.get(name).dtype.kind != "f" and self.get(name).dtype != bfloat16:
            raise ValueError(
                f"BertEncoder: checkpoint tensor {self.prefix + name} has dtype "
                f"{self.get(name).dtype}; a float type expected"
            )

    def pair_shapes(self, module: str, weight: Sequence[int], bias: Sequence[int]) -> None:
        self.shape(f"{module}.weight", weight)
        self.shape(f"{module}.bias", bias)

    def raise_missing(self) -> None:
        if self.missing:
            shown = ", ".join(self.missing[:6]) + (", ..." if len(self.missing) > 6 else "")
            raise ValueError(
                f"BertEncoder: the checkpoint lacks {len(self.missing)} tensor(s) a BERT "
                f"encoder needs: {shown}"
            )


def _pair(module: str, pair: Pair) -> dict[str, DeviceTensor]:
    return {f"{module}.weight": pair[0], f"{module}.bias": pair[1]}


__all__ = ["PREFIXES", "BertLayer", "BertWeights", "prepare"]

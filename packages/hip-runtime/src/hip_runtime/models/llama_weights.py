"""A Llama checkpoint's tensors turned into the decoder's own: checked, cast, un-permuted.

`prepare` reads the tensors of a loaded checkpoint — a Hugging Face LlamaForCausalLM's names
(`model.layers.N.self_attn.q_proj.weight`...) or llama.cpp's GGUF names (`blk.N.attn_q.weight`
...) —, checks each one's shape against the config, and writes it in the target dtype into new
device tensors (from the backend's pool, queued on its stream). Nothing refers to the
checkpoint's tensors afterwards, so the caller may free them once the stream has run the casts.

The weights that read one input are stacked into one (`FUSED`: q, k, v; gate, up), so a layer
runs one product for each group; the parts stay fields of `LlamaLayer` as row views of it.
In f32 and bf16, where a layer's QKV and gate/up weights are both dense, each norm's weight is
then folded into the stacked product after it (`fold_norms`), so that product can read the
residual stream un-normalized.

llama.cpp's converter permutes the rows of attn_q and attn_k within each head (HF's
rotate-half pairs (i, i + d/2) become ggml's adjacent pairs (2i, 2i + 1)); `prepare` undoes it
with one row gather on the device, so both sources run the same rotate-half rope.

A GGUF's Q8_0 / Q4_0 linear weights (attention, MLP and the untied head) may stay quantized:
`keep_quantized` turns their records into raw byte records (the loader copies the blocks as
they are, no dequantization) and `prepare` wraps them in ops.quantized_matmul.QuantizedWeight
(row gathers of attn_q / attn_k move whole rows of blocks), rearranged into the split layout
where the row length allows (a multiple of 256: every Llama shape), which the decode GEMV reads
at near the copy rate. The embedding is always expanded:
the embedding op reads floats.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, replace
from typing import Any

import numpy as np

from hip_runtime.backend import HipBackend
from hip_runtime.loading.formats import Checkpoint, TensorRecord
from hip_runtime.models.common import layers_beyond
from hip_runtime.models.llama_config import LlamaConfig
from hip_runtime.ops.quantized import SPLIT_MULTIPLE
from hip_runtime.ops.quantized_matmul import QuantizedWeight
from hip_runtime.tensors.tensor import DeviceTensor

#: A linear layer's weight: a dense tensor of the model's dtype, or GGUF blocks.
Linear = DeviceTensor | QuantizedWeight
#: Fields of a layer that are linear weights (the rest are norms).
LINEAR_FIELDS = ("q", "k", "v", "o", "gate", "up", "down")

#: The layer's tensors: field -> (HF module under model.layers.N., GGUF name under blk.N.).
LAYER_NAMES = {
    "attn_norm": ("input_layernorm", "attn_norm"),
    "q": ("self_attn.q_proj", "attn_q"),
    "k": ("self_attn.k_proj", "attn_k"),
    "v": ("self_attn.v_proj", "attn_v"),
    "o": ("self_attn.o_proj", "attn_output"),
    "mlp_norm": ("post_attention_layernorm", "ffn_norm"),
    "gate": ("mlp.gate_proj", "ffn_gate"),
    "up": ("mlp.up_proj", "ffn_up"),
    "down": ("mlp.down_proj", "ffn_down"),
}
#: (embedding, final norm, head) in each naming.
TOP_NAMES = {
    "hf": ("model.embed_tokens.weight", "model.norm.weight", "lm_head.weight"),
    "gguf": ("token_embd.weight", "output_norm.weight", "output.weight"),
}


#: Weights that read the same input, stored as one (their rows stacked, in this order): one
#: product instead of two or three, a decode step's host cost being per op. The parts stay
#: fields of the layer as row views of the fused weight.
FUSED = {"qkv": ("q", "k", "v"), "gate_up": ("gate", "up")}


@dataclass(frozen=True)
class LlamaLayer:
    attn_norm: DeviceTensor  # [H]
    q: Linear  # [heads * head_dim, H]
    k: Linear  # [kv_heads * head_dim, H]
    v: Linear  # [kv_heads * head_dim, H]
    o: Linear  # [H, heads * head_dim]
    mlp_norm: DeviceTensor  # [H]
    gate: Linear  # [I, H]
    up: Linear  # [I, H]
    down: Linear  # [H, I]
    #: q, k and v stacked ([(heads + 2 kv_heads) * head_dim, H]; q, k, v are its row views),
    #: or None when they cannot be one weight (dense and quantized, or two encodings).
    qkv: Linear | None = None
    gate_up: Linear | None = None  # gate and up stacked ([2 I, H]), or None
    #: The norms' weights are folded into qkv and gate_up (`fold_norms`): attn_norm and
    #: mlp_norm are ones, and the products may read x un-normalized.
    norms_folded: bool = False


@dataclass(frozen=True)
class LlamaWeights:
    embed: DeviceTensor  # [vocab, H]
    layers: tuple[LlamaLayer, ...]
    norm: DeviceTensor  # [H]
    head: Linear  # [vocab, H]: lm_head, or `embed` itself when tied

    def named(self) -> dict[str, DeviceTensor]:
        """Every tensor under its HF name, for ModelRuntime.weights, as the decoder holds it.
        q/k/v and gate/up are row views of their stacked weight (`qkv`, `gate_up`); in a layer
        whose norms are folded (`LlamaLayer.norms_folded`) they hold W·diag(norm weight) and
        the two norms are ones. A quantized weight is its blocks, in
        that QuantizedWeight's layout: "split" for rows of K a multiple of 256, so rebuild one
        with `QuantizedWeight(..., layout="split")`."""
        embed, norm, head = TOP_NAMES["hf"]
        names = {embed: self.embed, norm: self.norm}
        if self.head is not self.embed:
            names[head] = _memory(self.head)
        for n, layer in enumerate(self.layers):
            for field, (module, _) in LAYER_NAMES.items():
                names[f"model.layers.{n}.{module}.weight"] = _memory(getattr(layer, field))
        return names


def _memory(weight: Linear) -> DeviceTensor:
    return weight.blocks if isinstance(weight, QuantizedWeight) else weight


def keep_quantized(
    checkpoint: Checkpoint, config: LlamaConfig
) -> tuple[Checkpoint, dict[str, tuple[str, tuple[int, int]]]]:
    """The GGUF `checkpoint` with its Q8_0 / Q4_0 linear weights as raw uint8 records [N, K /
    32 * block bytes] (loaded as stored), and {name: (encoding, (N, K))} of those records."""
    linear = {name for name, shape in checkpoint_names(config, "gguf").items() if len(shape) == 2}
    linear.discard(TOP_NAMES["gguf"][0])  # the embedding stays dense
    linear.add(TOP_NAMES["gguf"][2])
    kept: dict[str, tuple[str, tuple[int, int]]] = {}
    records = []
    for r in checkpoint.tensors:
        if r.name in linear and r.encoding != "raw" and len(r.shape) == 2 and r.shape[0] > 0:
            kept[r.name] = (r.encoding, (r.shape[0], r.shape[1]))
            shape = (r.shape[0], r.nbytes // r.shape[0])
            r = replace(r, shape=shape, dtype=np.dtype(np.uint8), encoding="raw")
        records.append(r)
    return replace(checkpoint, tensors=tuple(records)), kept


def checkpoint_names(config: LlamaConfig, naming: str) -> dict[str, tuple[int, ...]]:
    """Each tensor the decoder reads (field key -> expected shape), keyed by checkpoint name."""
    c = config
    h, i, q, kv = c.hidden_size, c.intermediate_size, c.heads * c.head_dim, c.kv_heads * c.head_dim
    shapes = {"attn_norm": (h,), "q": (q, h), "k": (kv, h), "v": (kv, h), "o": (h, q),
              "mlp_norm": (h,), "gate": (i, h), "up": (i, h), "down": (h, i)}  # fmt: skip
    embed, norm, _ = TOP_NAMES[naming]
    names = {embed: (c.vocab_size, h), norm: (h,)}
    for n in range(c.layers):
        for field, (module, short) in LAYER_NAMES.items():
            name = (
                f"model.layers.{n}.{module}.weight" if naming == "hf" else f"blk.{n}.{short}.weight"
            )
            names[name] = shapes[field]
    return names


def read_host(record: TensorRecord, where: str) -> np.ndarray:
    """A small stored (raw) tensor's values as f32, read from its file on the host (a GGUF's
    rope_freqs.weight, needed for the rotary tables before anything is on the device)."""
    if record.encoding != "raw" or record.nbytes > 1 << 20:
        raise ValueError(f"{where} must be a small unquantized tensor, not {record.encoding} "
                         f"of {record.nbytes} bytes")  # fmt: skip
    with open(record.path, "rb") as file:
        file.seek(record.offset)
        data = file.read(record.nbytes)
    if len(data) != record.nbytes:
        raise ValueError(f"{where}: the file ends inside the tensor")
    return np.frombuffer(data, record.dtype).astype(np.float32).reshape(record.shape)


def prepare(
    backend: HipBackend,
    tensors: Mapping[str, DeviceTensor],
    config: LlamaConfig,
    dtype: Any,
    naming: str,
    quantized: Mapping[str, tuple[str, tuple[int, int]]] | None = None,
) -> LlamaWeights:
    """The decoder's weights in `dtype` from a checkpoint's `tensors` named as `naming` ("hf"
    or "gguf"), queued on `backend`'s stream. Every name and shape is checked before the first
    cast: ValueError naming the missing tensors, or the tensor and the shape expected. The
    head is the checkpoint's own when it has one, else the embedding (tied). `quantized`:
    the raw block records of `keep_quantized` (name -> (encoding, logical shape)); they
    become QuantizedWeights holding a copy of the blocks."""
    quantized = quantized or {}
    expected = checkpoint_names(config, naming)
    _, _, head_name = TOP_NAMES[naming]
    tied = head_name not in tensors
    if tied and naming == "hf" and not config.tie_word_embeddings:
        raise ValueError(f"the checkpoint has no {head_name} and tie_word_embeddings is false")
    if not tied:
        expected[head_name] = (config.vocab_size, config.hidden_size)
    missing = sorted(name for name in expected if name not in tensors)
    if missing:
        listed = ", ".join(missing[:6]) + (" ..." if len(missing) > 6 else "")
        raise ValueError(f"the checkpoint lacks {len(missing)} tensors the decoder needs: {listed}")
    for name, shape in expected.items():
        found = quantized[name][1] if name in quantized else tensors[name].shape
        if found != shape:
            raise ValueError(f"{name} has shape {found}; expected {shape}")
    _refuse_unread(tensors, expected, config, naming)
    unpermute = {}
    if naming == "gguf":  # undo the converter's row order of attn_q / attn_k (module docstring)
        for heads in {config.heads, config.kv_heads}:
            unpermute[heads] = backend.from_numpy(_rope_rows(heads, config.head_dim))

    def stored(name: str, heads: int | None) -> DeviceTensor:
        """The checkpoint's tensor; a GGUF's attn_q / attn_k (`heads` given) with its rows back
        in HF's order."""
        tensor = tensors[name]
        if heads is not None and naming == "gguf":
            tensor = backend.index_select(tensor, 0, unpermute[heads])
        return tensor

    def cast(name: str, heads: int | None = None) -> Any:
        """One weight in `dtype`, or its blocks (a QuantizedWeight) in new memory."""
        tensor = stored(name, heads)
        if name not in quantized:
            return backend.cast(tensor, dtype)
        encoding, shape = quantized[name]
        # The split layout (the decode GEMV's coalesced one) where K allows: new blocks, like
        # the copy below, so the loaded checkpoint can be freed after `prepare`.
        split = shape[1] % SPLIT_MULTIPLE == 0 and tensor.ptr % 2 == 0
        if heads is None and not split:
            tensor = backend.empty(tensor.shape, tensor.dtype).copy_(tensor)
        weight = QuantizedWeight(tensor, shape, encoding)
        return backend.split_quantized(weight) if split else weight

    def stack(names: list[str], heads: list[int | None]) -> tuple[Any, list[Any]]:
        """(the weights `names` stacked into one, each as a row view of it); (None, each on its
        own) when they are not of one kind (dense, or one block encoding)."""
        encodings = {quantized[name][0] if name in quantized else None for name in names}
        if len(encodings) > 1:
            return None, [cast(name, h) for name, h in zip(names, heads, strict=True)]
        parts = [stored(name, h) for name, h in zip(names, heads, strict=True)]
        rows = [part.shape[0] for part in parts]
        encoding = encodings.pop()
        memory = backend.empty((sum(rows), parts[0].shape[1]), parts[0].dtype if encoding
                               else dtype)  # fmt: skip
        at = 0
        for part, n in zip(parts, rows, strict=True):
            backend.cast(part, memory.dtype, out=memory[at : at + n])  # (blocks: a copy)
            at += n
        if encoding is None:
            return memory, _row_views(memory, rows, lambda block, _: block)
        k = quantized[names[0]][1][1]
        weight = QuantizedWeight(memory, (sum(rows), k), encoding)
        if k % SPLIT_MULTIPLE == 0:
            weight = backend.split_quantized(weight)
        layout = weight.layout
        return weight, _row_views(
            weight.blocks, rows, lambda block, n: QuantizedWeight(block, (n, k), encoding, layout)
        )

    head_counts = {"q": config.heads, "k": config.kv_heads}
    embed_name, norm_name, _ = TOP_NAMES[naming]
    layers, ones = [], None
    for n in range(config.layers):
        names = {
            field: f"model.layers.{n}.{hf}.weight" if naming == "hf" else f"blk.{n}.{gguf}.weight"
            for field, (hf, gguf) in LAYER_NAMES.items()
        }
        fields: dict[str, Any] = {}
        for fused, group in FUSED.items():
            counts = [head_counts.get(field) for field in group]
            fields[fused], parts = stack([names[field] for field in group], counts)
            fields.update(zip(group, parts, strict=True))
        for field in ("attn_norm", "o", "mlp_norm", "down"):
            fields[field] = cast(names[field])
        layer = LlamaLayer(**fields)
        if foldable(layer):
            ones = ones if ones is not None else backend.full((config.hidden_size,), 1.0, dtype)
            layer = fold_norms(backend, layer, ones)
        layers.append(layer)
    embed = cast(embed_name)
    return LlamaWeights(
        embed=embed,
        layers=tuple(layers),
        norm=cast(norm_name),
        head=embed if tied else cast(head_name),
    )


#: Dtypes whose layers get their norms folded: a product of x un-normalized may exceed f16's
#: range where the normalized one does not (a residual stream of |x| in the hundreds).
FOLDED_DTYPES = ("float32", "bfloat16")


def foldable(layer: LlamaLayer) -> bool:
    """Whether `fold_norms` takes the layer: its QKV and gate/up weights are each one dense
    tensor of a FOLDED_DTYPES dtype (not GGUF blocks: folding would re-quantize them)."""
    dense = isinstance(layer.qkv, DeviceTensor) and isinstance(layer.gate_up, DeviceTensor)
    return dense and layer.attn_norm.dtype.name in FOLDED_DTYPES


def fold_norms(backend: HipBackend, layer: LlamaLayer, ones: DeviceTensor) -> LlamaLayer:
    """The layer with each norm's weight g folded into the product that reads the norm, in
    place: W' = W diag(g) for the stacked QKV and gate/up weights (their q/k/v and gate/up
    views too), the norms replaced by `ones` [H]. rmsnorm(x, g) Wᵀ = rmsnorm(x) W'ᵀ =
    (x W'ᵀ) / rms(x), so a product may read x itself and leave the division to the op that
    consumes it (rope_and_cache's and swiglu's `rms_of`): a batch that BLAS multiplies then
    needs no rmsnorm launch (LlamaDecoder._layer). W' is W times g rounded once to the
    weights' dtype (rmsnorm(x, g) rounds x·g instead: the same size of rounding)."""
    qkv, gate_up = layer.qkv, layer.gate_up
    assert isinstance(qkv, DeviceTensor) and isinstance(gate_up, DeviceTensor)  # (foldable)
    backend.mul(qkv, layer.attn_norm, out=qkv)
    backend.mul(gate_up, layer.mlp_norm, out=gate_up)
    return replace(layer, attn_norm=ones, mlp_norm=ones, norms_folded=True)


#: Per-layer tensors a Hugging Face checkpoint may hold that the decoder does not need:
#: transformers 4.3x saved the rotary inverse frequencies (a buffer) with the weights.
_UNNEEDED = ("rotary_emb.inv_freq",)


def _refuse_unread(
    tensors: Mapping[str, Any], expected: Mapping[str, Any], config: LlamaConfig, naming: str
) -> None:
    """ValueError for layers beyond `config.layers` (the config would run a truncated model)
    and, in a Hugging Face checkpoint, for a layer's tensors the decoder would not read
    (q/k/v or MLP biases: transformers' attention_bias / mlp_bias models, Qwen2's)."""
    prefix = "model.layers." if naming == "hf" else "blk."
    beyond = layers_beyond(tensors, prefix, config.layers)
    if beyond:
        counted = "num_hidden_layers" if naming == "hf" else "llama.block_count"
        raise ValueError(f"the checkpoint holds layers up to {beyond[-1]}; the config's "
                         f"{counted} is {config.layers}")  # fmt: skip
    if naming != "hf":
        return
    unread = sorted(
        name for name in tensors
        if name.startswith(prefix) and name not in expected and not name.endswith(_UNNEEDED)
    )  # fmt: skip
    if unread:
        listed = ", ".join(unread[:4]) + (" ..." if len(unread) > 4 else "")
        raise ValueError(f"the checkpoint holds {len(unread)} layer tensors this decoder does not "
                         f"run (a Llama layer has no others): {listed}")  # fmt: skip


def _row_views(stack: DeviceTensor, rows: list[int], make: Any) -> list[Any]:
    """`make(block, n)` of each run of `rows` rows of `stack`, in order."""
    views, at = [], 0
    for n in rows:
        views.append(make(stack[at : at + n], n))
        at += n
    return views


def _rope_rows(heads: int, head_dim: int) -> np.ndarray:
    """Row ids that take a GGUF attn_q/attn_k back to HF's order: HF row h·d + t·d/2 + i is
    GGUF row h·d + 2i + t (convert_hf_to_gguf.py's `permute`)."""
    half = head_dim // 2
    h, t, i = np.meshgrid(np.arange(heads), np.arange(2), np.arange(half), indexing="ij")
    return (h * head_dim + 2 * i + t).reshape(-1).astype(np.int32)


__all__ = [
    "FOLDED_DTYPES", "LAYER_NAMES", "LINEAR_FIELDS", "Linear", "LlamaLayer", "LlamaWeights",
    "checkpoint_names", "fold_norms", "foldable", "keep_quantized", "prepare", "read_host",
]  # fmt: skip

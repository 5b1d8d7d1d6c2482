"""LlamaDecoder: a Llama-style decoder (RMSNorm, RoPE, grouped-query attention, SwiGLU, tied or
untied head) from a Hugging Face folder or a llama.cpp GGUF file, with a batched KV cache.

    with LlamaDecoder.from_folder("tiny-llama/", dtype="bfloat16") as decoder:
        logits = decoder.forward(input_ids, attention_mask)   # prefill: [B, S, vocab]
        step = decoder.decode(next_ids)                        # one token each: [B, vocab]
        tokens = decoder.generate(input_ids, attention_mask, max_new_tokens=32)  # numpy

Prompts are LEFT-padded batches (`attention_mask` 0 on the pads, as a tokenizer with
padding_side="left" makes them). Positions come from the mask as transformers' `generate`
makes them (the i-th real token of a sequence is at position i), and the KV cache holds each
sequence's real tokens from slot 0 (`KVCache.reserve` gives the pads row -1: not stored), so
a decode step's attention reads keys 0..length-1 of every sequence: `attention_decode`'s
contract.

Everything runs on the device, on the backend's stream, with the whole batch in each op;
`forward` and `decode` return at once (nothing waits). Host work per step: the positions of
the new tokens (known on the host: every sequence gains one token per step) go up as one small
copy, shared by every layer.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import numpy as np

from hip_core import Device, Resource
from hip_runtime.backend import HipBackend
from hip_runtime.loading.formats import open_checkpoint
from hip_runtime.models.common import close_runtime, load_model, model_dtype
from hip_runtime.models.config import read_config
from hip_runtime.models.decode_step import DecodeStep
from hip_runtime.models.generation import generate
from hip_runtime.models.llama_chain import chainable, chained_step
from hip_runtime.models.llama_config import LlamaConfig
from hip_runtime.models.llama_weights import (
    Linear,
    LlamaLayer,
    LlamaWeights,
    keep_quantized,
    prepare,
    read_host,
)
from hip_runtime.models.prompts import check_prompts, token_ids_checked
from hip_runtime.ops.gemv import gemv_takes_rows
from hip_runtime.ops.quantized_matmul import QuantizedWeight
from hip_runtime.runtime.kv_cache import KVCache
from hip_runtime.runtime.model_runtime import ModelRuntime
from hip_runtime.tensors.dtypes import DTypeLike
from hip_runtime.tensors.tensor import DeviceTensor

DEFAULT_MAX_TOKENS = 4096  # per sequence, when the model allows more (cache memory grows with it)


class LlamaDecoder(Resource):
    """A decoder on one HipBackend: weights in one dtype, rotary tables, a KV cache for the
    batch of the last `forward` (made, or remade for a new batch size, by `forward`).

    Make one with `from_folder` or `from_gguf`. `close()` (or `with`) waits for the backend's
    stream and frees the weights, the rotary tables, the cache, the decode steps' state and
    graph, and the backend unless it was given (shared); every method of a closed decoder, and
    every tensor it held, raises hip_core.ClosedError.
    """

    def __init__(
        self, runtime: ModelRuntime, config: LlamaConfig, weights: LlamaWeights, max_tokens: int
    ) -> None:
        self.runtime = runtime
        self.config = config
        self.weights = weights
        self.dtype = weights.embed.dtype
        self.max_tokens = max_tokens
        self._graph_step: DecodeStep | None = None
        self._eager_step: DecodeStep | None = None
        #: Decode steps chain each layer's products after attention into one launch
        #: (models.llama_chain, ops.gemv_chain) where the GEMV kernel takes the batch. Off by
        #: default: on the H200 the chained 1B step took 1189 µs against 909 separate (its
        #: kernel needs 48 registers where the separate ones need 26-32: 5 resident blocks
        #: a multiprocessor instead of 8; docs/benchmarks, 2026-12-02 third session). Set it
        #: before the first decode step: a captured step keeps the path it was captured with.
        self.chain_products = False
        self._own(close_runtime, runtime)
        cos, sin = config.rope_tables(max_tokens)
        self._cos, self._sin = self.backend.from_numpy(cos), self.backend.from_numpy(sin)

    # --- loading -----------------------------------------------------------------------------

    @classmethod
    def from_folder(
        cls,
        path: str | os.PathLike[str],
        device: Device | int | HipBackend | None = None,
        *,
        dtype: DTypeLike = "float32",
        max_tokens: int | None = None,
    ) -> LlamaDecoder:
        """The decoder in the Hugging Face folder `path` (config.json + safetensors, one file
        or sharded with model.safetensors.index.json), on `device` (a Device, an ordinal,
        None for the current one, or a HipBackend to share: the decoder then runs on its
        stream and `close()` leaves it open), computing in `dtype` (float32, float16 or
        bfloat16). `max_tokens`: the KV cache's tokens per sequence (prompt and generated;
        default min(max_position_embeddings, 4096)).

        config.json is checked before the device is touched (ValueError naming the file and
        the field; a rope scaling other than default/linear/llama3 is refused). The checkpoint
        is loaded as stored, each weight cast to `dtype` once on the device, and the stored
        copy freed; layers beyond num_hidden_layers, or tensors of a layer this decoder would
        not read (biases), are refused. Returns with the weights resident; on failure nothing
        stays allocated."""
        target = model_dtype(dtype, "LlamaDecoder")
        config = LlamaConfig.from_hf(read_config(path), f"{os.fspath(path)}/config.json")
        # a folder's checkpoint is found as open_checkpoint finds it (the index first)
        return cls._load(Path(path), config, "hf", target, device, max_tokens)

    @classmethod
    def from_gguf(
        cls,
        path: str | os.PathLike[str],
        device: Device | int | HipBackend | None = None,
        *,
        dtype: DTypeLike = "float32",
        max_tokens: int | None = None,
        quantized: str = "keep",
    ) -> LlamaDecoder:
        """The decoder in llama.cpp's GGUF file `path` (general.architecture "llama"; tensors
        F32, F16, BF16, Q8_0 or Q4_0), as `from_folder`. The `llama.*` metadata gives the
        shape; a rope_freqs.weight (llama3's rope factors as llama.cpp stores them) divides the
        inverse frequencies; attn_q/attn_k rows are put back in Hugging Face's order
        (llama_weights).

        `quantized`: what becomes of Q8_0 / Q4_0 weights. "keep" (default): the linear
        weights (attention, MLP, untied head) stay in their blocks on the device and the
        decoder multiplies them with `quantized_linear` (GEMV kernels that dequantize in
        registers for decode steps and prefills of up to GEMV_MAX_ROWS = 8 tokens in all;
        more expand one weight at a time into pooled scratch and use BLAS; rows of K a
        multiple of 256 kept in the split layout the GEMV reads coalesced); the embedding is
        expanded into `dtype`. "dequantize": every tensor is expanded into `dtype` at load."""
        target = model_dtype(dtype, "LlamaDecoder")
        if quantized not in ("keep", "dequantize"):
            raise ValueError(f"LlamaDecoder: quantized must be 'keep' or 'dequantize', not "
                             f"{quantized!r}")  # fmt: skip
        checkpoint = open_checkpoint(path, dequantize_to=target)
        names = {r.name for r in checkpoint.tensors}
        if "token_embd.weight" not in names:
            raise ValueError(f"{os.fspath(path)}: no token_embd.weight (not a llama GGUF)")
        vocab = checkpoint["token_embd.weight"].shape[0]
        factors = None
        if "rope_freqs.weight" in names:
            factors = read_host(checkpoint["rope_freqs.weight"], f"{os.fspath(path)}: rope_freqs")
        config = LlamaConfig.from_gguf(checkpoint.metadata, os.fspath(path), vocab, factors)
        kept: dict[str, Any] = {}
        if quantized == "keep":
            checkpoint, kept = keep_quantized(checkpoint, config)
        return cls._load(checkpoint, config, "gguf", target, device, max_tokens, kept)

    @classmethod
    def _load(
        cls, source: Any, config: LlamaConfig, naming: str, dtype: Any, device: Any,
        max_tokens: int | None, quantized: dict[str, Any] | None = None,
    ) -> LlamaDecoder:  # fmt: skip
        capacity = (
            min(config.max_positions, DEFAULT_MAX_TOKENS) if max_tokens is None else max_tokens
        )
        if isinstance(capacity, bool) or not isinstance(capacity, int) or capacity < 1:
            raise ValueError(f"LlamaDecoder: max_tokens must be a positive int, not {capacity!r}")
        return load_model(
            source, device,
            lambda backend, stored: prepare(backend, stored, config, dtype, naming, quantized),
            lambda runtime, weights: cls(runtime, config, weights, capacity),
            dequantize_to=dtype,
        )  # fmt: skip

    def close(self) -> None:
        """Wait for the backend's stream, then free everything the decoder owns: the weights
        and the KV cache (the runtime's), the decode steps' state and captured graph, the
        rotary tables, and the backend unless it was given. Every tensor of a closed decoder
        raises ClosedError. Closing twice is harmless."""
        if self.closed:
            return
        steps = (self._graph_step, self._eager_step)
        self._graph_step = self._eager_step = None
        try:
            super().close()  # the runtime's close: waits for the stream first
        finally:
            for step in steps:
                if step is not None:
                    step.free()
            for table in (self._cos, self._sin):
                table.buffer.close()

    @property
    def backend(self) -> HipBackend:
        """The HipBackend the decoder runs on (its stream orders every op)."""
        return self.runtime.backend

    @property
    def cache(self) -> KVCache | None:
        """The KV cache of the batch being decoded (None before the first `forward`)."""
        return self.runtime.kv_cache

    # --- running -----------------------------------------------------------------------------

    def forward(
        self, input_ids: Any, attention_mask: Any = None, *, last_only: bool = False
    ) -> DeviceTensor:
        """Prefill: logits [B, S, vocab] in the decoder's dtype for a batch of left-padded
        prompts (input_ids int [B, S], attention_mask 0/1 [B, S], None: no padding; host
        arrays; see `check_prompts`). Starts new sequences: the KV cache is cleared (or made
        for this batch size) and gets every real token's keys and values. Padded positions'
        logits are computed but meaningless. `last_only`: logits [B, vocab] of the last
        position only (each sequence's next token's: the head multiplies B rows, not B·S).
        Queued on the backend's stream; returns at once."""
        self._check_open()
        hidden = self._prefill(*self.check_prompts(input_ids, attention_mask), last_only)
        return self._linear(hidden, self.weights.head)

    def hidden_states(self, input_ids: Any, attention_mask: Any = None) -> DeviceTensor:
        """The last hidden states [B, S, H] (after the final norm) of a prefill, as `forward`
        (which it is, without the head)."""
        self._check_open()
        return self._prefill(*self.check_prompts(input_ids, attention_mask))

    def decode(self, token_ids: Any) -> DeviceTensor:
        """One decode step: logits [B, vocab] for the next token of each sequence, given each
        sequence's newest token (int [B]: a host array, or a device int32/int64 tensor such
        as a sampler's output, never read by the host). Appends to the KV cache; ValueError
        (nothing queued) before a `forward`, for another batch size, or when a sequence's
        cache is full. Queued on the backend's stream; returns at once."""
        step = self.decode_step()
        batch = step.cache.batch
        if isinstance(token_ids, DeviceTensor):
            if token_ids.size != batch or token_ids.dtype.kind != "i":
                raise ValueError(f"token_ids is {token_ids.shape} {token_ids.dtype}; expected "
                                 f"int [{batch}]")  # fmt: skip
            ids = token_ids.reshape(batch, 1)
        else:
            ids_host = np.asarray(token_ids).reshape(-1)
            host = token_ids_checked(ids_host, "token_ids", self.config.vocab_size)
            if host.shape != (batch,):
                raise ValueError(f"token_ids has {host.size} tokens; the batch has {batch}")
            ids = self.backend.from_numpy(host.reshape(batch, 1))
        return step(ids.reshape(batch))

    def generate(self, input_ids: Any, attention_mask: Any = None, **options: Any) -> np.ndarray:
        """Prompts and new tokens, int64 numpy [B, S + new]: see models.generation.generate
        for the options (max_new_tokens, temperature, top_k, top_p, seed, eos_token_id,
        pad_token_id). Waits for the device at the end (and every few steps when a stop token
        can end it early)."""
        self._check_open()
        return generate(self, input_ids, attention_mask, **options)

    def decode_step(self, graph: bool = False) -> DecodeStep:
        """The decode step over the current cache (models.decode_step: `step(ids)` -> logits
        [B, vocab] for device token ids int [B], as `decode` without its checks of the ids),
        eager or, with `graph`, replaying the cache's captured graph. Each is made on first
        use and kept until the cache is replaced; the decoder closes them. ValueError before
        a `forward`."""
        self._check_open()
        cache = self.cache
        if cache is None:
            raise ValueError("decode needs a forward (prefill) first: the KV cache is empty")
        if not graph:  # kept too: its device state is reused by the next step
            if self._eager_step is None or self._eager_step.cache is not cache:
                self._eager_step = DecodeStep(self.backend, self._step, cache)
            return self._eager_step
        if self._graph_step is None or self._graph_step.cache is not cache:
            self._drop_graph()
            self._graph_step = DecodeStep(self.backend, self._step, cache, graph=True)
        return self._graph_step

    def check_prompts(self, input_ids: Any, attention_mask: Any) -> tuple[np.ndarray, np.ndarray]:
        """(ids int32 [B, S], mask int64 [B, S]): host prompts as `forward` takes them, checked
        on the host (models.prompts.check_prompts: ValueError for ids not [B, S] or outside
        the vocabulary, a bad mask, an all-padding sequence, more tokens than the cache holds)."""
        return check_prompts(input_ids, attention_mask, self.config.vocab_size, self.max_tokens)

    # --- private ------------------------------------------------------------------------------

    def _drop_graph(self) -> None:
        if self._graph_step is not None:
            self._graph_step.close()
            self._graph_step = None

    def _step(self, ids: DeviceTensor, state: DeviceTensor) -> DeviceTensor:
        """Logits [B, vocab] of one decode step (models.decode_step: ids int [B], state int32
        [3, B] of positions, cache rows and lengths after the step); only ops on the device."""
        batch = ids.shape[0]
        x = self.backend.embedding(ids.reshape(batch, 1), self.weights.embed)
        if self.chain_products and batch <= self.backend.gemv_rows and chainable(self.weights):
            return chained_step(self, x, state)
        for n, layer in enumerate(self.weights.layers):
            self._layer(x, n, layer, state[0], None, (state[1], state[2]))
        return self._normed_linear(x[:, 0], self.weights.norm, self.weights.head)

    def _prefill(self, ids: np.ndarray, mask: np.ndarray, last_only: bool = False) -> DeviceTensor:
        """The final-normed hidden states [B, S, H] (or [B, H] of the last position), after
        writing the prompts' keys and values into a cleared cache."""
        batch, seq = ids.shape
        self._cache_for(batch)
        positions = np.where(mask, np.cumsum(mask, axis=1) - 1, 1).astype(np.int32)
        backend = self.backend
        keep = backend.from_numpy(mask.astype(bool).reshape(batch, 1, 1, seq))
        x = backend.embedding(backend.from_numpy(ids), self.weights.embed)
        flat_positions = backend.from_numpy(positions.reshape(-1))
        for n, layer in enumerate(self.weights.layers):
            self._layer(x, n, layer, flat_positions, (mask, keep))
        last = x[:, seq - 1] if last_only else x
        return backend.rmsnorm(last, self.weights.norm, eps=self.config.rms_norm_eps)

    def _layer(
        self,
        x: DeviceTensor,
        n: int,
        layer: LlamaLayer,
        positions: DeviceTensor,
        prompt: tuple[np.ndarray, DeviceTensor] | None,
        step: tuple[DeviceTensor, DeviceTensor] | None = None,
    ) -> None:
        """One decoder layer on x [B, S, H] in place: x += attention(norm(x)); x += mlp(norm(x)).
        `prompt`: (host mask, device keep mask [B, 1, 1, S]) for a prefill; else `step`: (cache
        rows, lengths after the step) of a decode step (S = 1, attention over the cache).

        The ops, each with the whole batch: rmsnorm and the fused QKV product, rope_and_cache
        (queries and keys rotated, keys and values stored in the cache: one launch), attention,
        the output product with x as its addend, rmsnorm and the fused gate/up product and
        swiglu, the down product with x as addend. With dense weights and a decode step's few
        rows, each norm and the product after it, and the gate/up product and swiglu, are one
        launch of the GEMV kernel (hip_runtime.ops.gemv): six launches a layer. Rows that BLAS
        multiplies, in a layer whose norm weights are folded into its products
        (llama_weights.fold_norms), skip both rmsnorm launches: the QKV and gate/up products
        read x itself and rope_and_cache and swiglu divide by x's RMS (`rms_of`)."""
        c = self.config
        batch, seq, _ = x.shape
        fused = gemv_takes_rows(batch * seq, x.dtype.itemsize, self.backend.gemv_rows)
        rms_of = x if layer.norms_folded and not fused else None
        qkv = self._qkv(x, layer, rms_of)
        context = self._attention(x, n, qkv, positions, prompt, step, rms_of)
        self._linear(context.reshape(batch, seq, c.heads * c.head_dim), layer.o, residual=x)
        self._mlp(x, layer, rms_of)

    def _attention(
        self,
        x: DeviceTensor,
        n: int,
        qkv: tuple[DeviceTensor, DeviceTensor, DeviceTensor],
        positions: DeviceTensor,
        prompt: tuple[np.ndarray, DeviceTensor] | None,
        step: tuple[DeviceTensor, DeviceTensor] | None,
        rms_of: DeviceTensor | None,
    ) -> DeviceTensor:
        """Layer n's attention context [B, S, heads, D] from its queries, keys and values
        (`_qkv`'s views; q and k are rotated in place, k and v stored in the cache; divided by
        the RMS of `rms_of`'s rows first when given): `_layer`'s first half."""
        c, backend = self.config, self.backend
        batch, seq, _ = x.shape
        q, k, v = qkv  # [B * S, heads, D] each
        cache = self.cache
        assert cache is not None
        rows = cache.reserve(n, seq, prompt[0]) if prompt is not None else step[0]  # type: ignore[index]
        backend.rope_and_cache(q, k, v, self._cos, self._sin, positions, *cache.tables(n), rows,
                               rms_of=rms_of, eps=c.rms_norm_eps)  # fmt: skip
        heads_first = (0, 2, 1, 3)  # [B, S, heads, D] -> [B, heads, S, D], a view
        q4 = q.reshape(batch, seq, c.heads, c.head_dim).permute(*heads_first)
        if prompt is not None:
            context = backend.empty((batch, seq, c.heads, c.head_dim), x.dtype)
            k4, v4 = (t.reshape(batch, seq, c.kv_heads, c.head_dim).permute(*heads_first)
                      for t in (k, v))  # fmt: skip
            backend.scaled_dot_product_attention(
                q4, k4, v4, causal=True, mask=prompt[1], out=context.permute(*heads_first)
            )
        else:  # one token a sequence: a new [B, heads, 1, D] is [B, 1, heads, D]'s memory
            assert step is not None
            keys, values = cache.view(n)  # (attention_decode: keys 0..length-1, on the device)
            context = backend.attention_decode(q4, keys, values, step[1])
        return context

    def _qkv(
        self, x: DeviceTensor, layer: LlamaLayer, rms_of: DeviceTensor | None
    ) -> tuple[DeviceTensor, DeviceTensor, DeviceTensor]:
        """Queries [T, heads, D], keys and values [T, kv_heads, D] of rmsnorm(x) (x [B, S, H],
        T = B·S): column views of one product with the fused weight, or three products; of x
        itself with `rms_of` (folded norms: rope_and_cache divides)."""
        c = self.config
        tokens, d = x.shape[0] * x.shape[1], c.head_dim
        shapes = ((tokens, c.heads, d), (tokens, c.kv_heads, d), (tokens, c.kv_heads, d))
        if layer.qkv is None:
            h = self.backend.rmsnorm(x, layer.attn_norm, eps=c.rms_norm_eps)
            return tuple(  # type: ignore[return-value]
                self._linear(h, weight).reshape(shape)
                for weight, shape in zip((layer.q, layer.k, layer.v), shapes, strict=True)
            )
        if rms_of is not None:
            return self._split_qkv(self._linear(x, layer.qkv))
        return self._split_qkv(self._normed_linear(x, layer.attn_norm, layer.qkv))

    def _split_qkv(self, qkv: DeviceTensor) -> tuple[DeviceTensor, DeviceTensor, DeviceTensor]:
        """Queries [T, heads, D], keys and values [T, kv_heads, D]: column views of a fused
        QKV product [B, S, (heads + 2 kv_heads) · D] (T = B·S)."""
        c, d = self.config, self.config.head_dim
        flat = qkv.reshape(qkv.shape[0] * qkv.shape[1], -1)
        tokens, q_end, k_end = flat.shape[0], c.heads * d, (c.heads + c.kv_heads) * d
        return (flat[:, :q_end].reshape(tokens, c.heads, d),
                flat[:, q_end:k_end].reshape(tokens, c.kv_heads, d),
                flat[:, k_end:].reshape(tokens, c.kv_heads, d))  # fmt: skip

    def _linear(
        self, x: DeviceTensor, weight: Linear, residual: DeviceTensor | None = None
    ) -> DeviceTensor:
        """x @ weightᵀ: BLAS for a dense weight, quantized_linear for GGUF blocks. With
        `residual` (contiguous, the result's shape): residual += x @ weightᵀ, in place (BLAS's
        beta = 1 for a dense weight), and residual is returned."""
        if isinstance(weight, QuantizedWeight):
            y = self.backend.quantized_linear(x, weight)
            return y if residual is None else self.backend.add(residual, y, out=residual)
        return self.backend.linear(x, weight, residual=residual, out=residual)

    def _normed_linear(self, x: DeviceTensor, norm: DeviceTensor, weight: Linear) -> DeviceTensor:
        """rmsnorm(x, norm) @ weightᵀ: one op for a dense weight (rmsnorm_linear: one launch
        of the GEMV kernel for a decode step's rows), else rmsnorm and `_linear`."""
        eps = self.config.rms_norm_eps
        if isinstance(weight, QuantizedWeight):
            return self._linear(self.backend.rmsnorm(x, norm, eps=eps), weight)
        return self.backend.rmsnorm_linear(x, norm, weight, eps=eps)

    def _mlp(self, x: DeviceTensor, layer: LlamaLayer, rms_of: DeviceTensor | None) -> None:
        """x += SwiGLU(rmsnorm(x)): down(silu(gate(h)) · up(h)); the norm, the stacked gate/up
        product and swiglu one op (rmsnorm_swiglu) when gate and up are one dense weight; with
        `rms_of` (folded norms), the product of x itself and swiglu dividing by its RMS."""
        gate_up, eps = layer.gate_up, self.config.rms_norm_eps
        if isinstance(gate_up, DeviceTensor) and rms_of is None:
            g = self.backend.rmsnorm_swiglu(x, layer.mlp_norm, gate_up, eps=eps)
        else:
            h = x if rms_of is not None else self.backend.rmsnorm(x, layer.mlp_norm, eps=eps)
            if gate_up is None:
                g = self._linear(h, layer.gate)
                self.backend.swiglu(g, self._linear(h, layer.up), out=g)
            else:
                inter = self.config.intermediate_size
                both = self._linear(h, gate_up)
                g = self.backend.swiglu(both[:, :, :inter], both[:, :, inter:], rms_of=rms_of,
                                        eps=eps)  # fmt: skip
        self._linear(g, layer.down, residual=x)

    def _cache_for(self, batch: int) -> KVCache:
        """The KV cache for `batch` sequences, cleared: kept when the batch size is the same,
        else made anew (the old one freed after the stream has finished with it)."""
        cache = self.cache
        if cache is not None and cache.batch == batch:
            cache.reset()
            return cache
        c = self.config
        if cache is not None:
            self._drop_graph()
            self.backend.synchronize()
            cache.close()
        self.runtime.kv_cache = KVCache(
            self.backend.device, self.backend.stream, layers=c.layers, max_tokens=self.max_tokens,
            kv_heads=c.kv_heads, head_dim=c.head_dim, dtype=self.dtype, batch=batch,
        )  # fmt: skip
        return self.runtime.kv_cache

    def __repr__(self) -> str:
        c = self.config
        state = "closed" if self.closed else f"{self.dtype}"
        return (f"<LlamaDecoder {c.layers} layers, hidden {c.hidden_size}, heads {c.heads}/"
                f"{c.kv_heads}, vocab {c.vocab_size}, {state}>")  # fmt: skip


__all__ = ["LlamaDecoder"]

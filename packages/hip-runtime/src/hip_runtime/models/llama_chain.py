"""A LlamaDecoder's decode step with each layer's products after attention in one launch
(`LlamaDecoder.chain_products`; off by default, see there).

For a batch the GEMV kernel takes (at most `HipBackend.gemv_rows` sequences; from 3 sequences
of a 16-bit model each link runs as its own launch, ops/gemv_chain.py) and dense fused
weights, a step is: the first layer's normed QKV product, then per layer rope_and_cache and
attention_decode, then one `gemv_chain` (hip_runtime.ops.gemv_chain) of the output product
into the residual stream, the normed gate/up product with SwiGLU, the down product into the
stream, and the next layer's normed QKV product (after the last layer: the final norm and the
head). Three launches a layer instead of six, meant to let the products that follow each
other stream the next weights while the last finish (issue 38: on the H200 each launch of a
1B Llama's small products ramps down and up for 2-3 µs in which the memory idles). Measured
there it is slower (1189 against 909 µs a step): the chain kernel's 48 registers leave 5
blocks resident a multiprocessor where each product alone has 8.

The ops and their order are the unchained step's (`LlamaDecoder._layer`), so are the results:
each link runs the kernel code its own op would.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from hip_runtime.models.llama_weights import Linear, LlamaWeights
from hip_runtime.ops.gemv_chain import GemvLink
from hip_runtime.tensors.tensor import DeviceTensor

if TYPE_CHECKING:
    from hip_runtime.models.llama import LlamaDecoder


def chainable(weights: LlamaWeights) -> bool:
    """Whether every product of a step is a dense weight the chain takes: QKV and gate/up
    stacked, o, down and the head dense (GGUF's quantized weights run the unchained step)."""
    return isinstance(weights.head, DeviceTensor) and all(
        isinstance(layer.qkv, DeviceTensor)
        and isinstance(layer.gate_up, DeviceTensor)
        and isinstance(layer.o, DeviceTensor)
        and isinstance(layer.down, DeviceTensor)
        for layer in weights.layers
    )


def _dense(weight: Linear | None) -> DeviceTensor:
    assert isinstance(weight, DeviceTensor)  # (chainable)
    return weight


def chained_step(decoder: LlamaDecoder, x: DeviceTensor, state: DeviceTensor) -> DeviceTensor:
    """Logits [B, vocab] of one decode step from the embedded tokens x [B, 1, H] (updated in
    place) and the step's state (models.decode_step); queued on the decoder's stream."""
    backend, c, w = decoder.backend, decoder.config, decoder.weights
    batch, eps = x.shape[0], c.rms_norm_eps
    layers = w.layers
    qkv = backend.rmsnorm_linear(x, layers[0].attn_norm, _dense(layers[0].qkv), eps=eps)
    g = backend.empty((batch, 1, c.intermediate_size), x.dtype)
    logits = backend.empty((batch, c.vocab_size), x.dtype)
    for n, layer in enumerate(layers):
        queries = decoder._split_qkv(qkv)
        context = decoder._attention(x, n, queries, state[0], None, (state[1], state[2]), None)
        links = [
            GemvLink(context.reshape(batch, 1, c.heads * c.head_dim), _dense(layer.o), x, x),
            GemvLink(x, _dense(layer.gate_up), g, norm=layer.mlp_norm, swiglu=True),
            GemvLink(g, _dense(layer.down), x, residual=x),
        ]
        if n + 1 < len(layers):  # (attention has read this layer's qkv: its buffer is free)
            following = layers[n + 1]
            links.append(GemvLink(x, _dense(following.qkv), qkv, norm=following.attn_norm))
        else:
            links.append(GemvLink(x.reshape(batch, -1), _dense(w.head), logits, norm=w.norm))
        backend.gemv_chain(links, eps=eps)
    return logits


__all__ = ["chainable", "chained_step"]

"""`generate`: prefill a batch of left-padded prompts, then decode one token per sequence per step
on the KV cache, choosing each token on the device (models.sampling), until `max_new_tokens` or
until every sequence has produced a stop token.

The loop never waits for the device to choose the next step: the tokens chosen stay on the
device and feed the next decode step directly, a finished sequence's later tokens are replaced
by the pad token on the device (as transformers does), and the host looks at the finished flags
only every `CHECK_EVERY` steps (one small copy) to stop early. The result matches transformers'
`generate`: prompts and new tokens, finished sequences padded, and the columns after the step
where the last sequence finished left out.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np

from hip_runtime.models.sampling import Sampler
from hip_runtime.tensors.tensor import DeviceTensor

if TYPE_CHECKING:
    from hip_runtime.models.llama import LlamaDecoder

CHECK_EVERY = 8  # decode steps between the host's looks at the finished flags (one sync each)


def generate(
    decoder: LlamaDecoder,
    input_ids: Any,
    attention_mask: Any = None,
    *,
    max_new_tokens: int,
    temperature: float = 0.0,
    top_k: int | None = None,
    top_p: float | None = None,
    seed: int | None = None,
    eos_token_id: int | list[int] | tuple[int, ...] | None = None,
    pad_token_id: int | None = None,
    graph: bool = False,
) -> np.ndarray:
    """Prompts followed by up to `max_new_tokens` new tokens, int64 numpy [B, S + new].

    input_ids, attention_mask: left-padded prompts as `LlamaDecoder.forward` takes them (the
    last column must be real tokens: the next token follows it). temperature 0 (the default)
    is greedy (argmax; top_k, top_p and seed unused); above 0 the logits are divided by it and
    the token drawn from the softmax, restricted to the `top_k` largest and then to the
    smallest set whose probability reaches `top_p` (transformers' order), with the device's
    counter-based generator seeded by `seed` (the same seed, prompts and options give the same
    tokens; None: a random seed). eos_token_id: the stop token(s); None takes the config's,
    () never stops early. A sequence that produced one gets `pad_token_id` after it (None:
    the config's pad token, else the first stop token). `graph`: the decode steps replay one
    captured graph (models.decode_step; made on first use for the batch size, kept by the
    decoder) instead of queueing each op. Waits for the device at the end.
    """
    if (
        isinstance(max_new_tokens, bool)
        or not isinstance(max_new_tokens, int)
        or max_new_tokens < 1
    ):
        raise ValueError(f"generate: max_new_tokens must be a positive int, not {max_new_tokens!r}")
    ids, mask = decoder.check_prompts(input_ids, attention_mask)
    if not mask[:, -1].all():
        raise ValueError("generate takes LEFT-padded prompts: the last column of attention_mask "
                         "must be 1 for every sequence")  # fmt: skip
    longest = int(mask.sum(axis=1).max())
    if longest + max_new_tokens - 1 > decoder.max_tokens:
        raise ValueError(f"a prompt of {longest} tokens and {max_new_tokens} new ones do not fit "
                         f"the KV cache (max_tokens={decoder.max_tokens})")  # fmt: skip
    config, backend = decoder.config, decoder.backend
    stops = _stops(config.eos_token_ids if eos_token_id is None else eos_token_id)
    pad = pad_token_id if pad_token_id is not None else config.pad_token_id
    if pad is None:
        pad = stops[0] if stops else 0
    sampler = Sampler(backend, temperature=temperature, top_k=top_k, top_p=top_p, seed=seed)

    logits = decoder.forward(ids, mask, last_only=True)  # [B, vocab]: the next tokens'
    decode = decoder.decode_step(graph)
    batch = ids.shape[0]
    chosen = backend.empty((batch, max_new_tokens), np.int64)
    finished: DeviceTensor | None = backend.zeros((batch,), np.bool_) if stops else None
    steps = max_new_tokens
    for step in range(max_new_tokens):
        token = sampler(logits, step)
        if finished is not None:
            token = backend.where(finished, pad, token)
            for stop in stops:
                finished = backend.where(backend.eq(token, stop), True, finished)
        chosen[:, step].copy_(token)
        if step + 1 == max_new_tokens:
            break
        if finished is not None and (step + 1) % CHECK_EVERY == 0 and finished.to_numpy().all():
            steps = step + 1
            break
        logits = decode(token)
    new = chosen.to_numpy()[:, :steps]
    if stops:  # transformers stops at the step where the last sequence finished
        done = np.isin(new, stops)
        if done.any(axis=1).all():
            new = new[:, : int(done.argmax(axis=1).max()) + 1]
    prompts = np.asarray(input_ids).astype(np.int64)
    return np.concatenate([prompts, new], axis=1)


def _stops(value: Any) -> tuple[int, ...]:
    values = (value,) if isinstance(value, int) else tuple(value)
    for v in values:
        if isinstance(v, bool) or not isinstance(v, (int, np.integer)):
            raise ValueError(f"generate: eos_token_id must be ints, not {value!r}")
    return tuple(int(v) for v in values)


__all__ = ["CHECK_EVERY", "generate"]

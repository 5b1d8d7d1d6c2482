"""Make the stored Llama references of packages/hip-runtime/tests/data/models/llama-*/.

Run with the reference interpreter (torch CPU + transformers + safetensors + gguf; not a CI
dependency):

    /work/refvenv/bin/python tools/make_llama_reference.py

For each small random-init LlamaForCausalLM config below it writes the model folder
(`save_pretrained`: config.json and safetensors, `llama-gqa` sharded to test the index) and
`reference.npz` for a batch of left-padded prompts:

- input_ids, attention_mask (int64 [B, S], pad id 0 on the left), position_ids (as HF's
  `generate` makes them from the mask: cumsum - 1, pads 1);
- logits [B, S, V] and last_hidden [B, S, H] (after the final norm) of the f32 model;
- greedy [B, S + new]: `generate(do_sample=False, max_new_tokens=8)` (finished sequences padded);
- bf16_error: the largest |logit| difference of torch's own bf16 run from its f32 run over the
  real tokens (the bf16 test's tolerance is a small multiple of it).

`llama-gqa` also gets GGUF files laid out as llama.cpp's convert_hf_to_gguf.py lays them out
(llama.* metadata, blk.N.* names, attn_q/attn_k rows permuted for ggml's rope, 1-D norms F32):
`model-f16.gguf`, `model-q8_0.gguf` and `model-q4_0.gguf`, with `logits_f16`, `logits_q8_0` and
`logits_q4_0` in reference.npz: the HF model's logits with every 2-D weight replaced by its
F16 (Q8_0, Q4_0) round trip, the exact reference for a loader of those files; and
`greedy_f16`, `greedy_q8_0`, `greedy_q4_0`: that model's greedy tokens (the decode steps of a
loader that keeps the blocks quantized). `llama-tied` gets `llama-tied-gguf/model-q8_0.gguf` (a
folder of its own: a folder holds one checkpoint; no output.weight: tied; llama3 rope stored as
convert_hf_to_gguf.py stores it, a `rope_freqs.weight` of factors) with `logits_q8_0` and
`greedy_q8_0` in llama-tied/reference.npz.
"""

from __future__ import annotations

import math
import shutil
from pathlib import Path
from typing import Any

import gguf
import numpy as np
import torch
from transformers import LlamaConfig, LlamaForCausalLM

OUT = Path(__file__).resolve().parents[1] / "packages/hip-runtime/tests/data/models"
NEW_TOKENS = 8
PROMPT_LENGTHS = (7, 4, 1)  # left-padded to 7: three real lengths, one of a single token

COMMON: dict[str, Any] = dict(
    vocab_size=256, hidden_size=64, intermediate_size=128, num_hidden_layers=2,
    max_position_embeddings=128, bos_token_id=1, eos_token_id=2, pad_token_id=0,
    attention_bias=False, mlp_bias=False,
)  # fmt: skip
MODELS: dict[str, dict[str, Any]] = {
    # grouped-query attention, 8 query heads over 2 key/value heads; untied head; sharded
    "llama-gqa": dict(
        COMMON,
        num_attention_heads=8,
        num_key_value_heads=2,
        rms_norm_eps=1e-5,
        rope_theta=10000.0,
        tie_word_embeddings=False,
    ),
    # one key/value head, head_dim 24 (not hidden / heads), tied embeddings, llama3 rope
    "llama-tied": dict(
        COMMON,
        num_attention_heads=4,
        num_key_value_heads=1,
        head_dim=24,
        rms_norm_eps=1e-6,
        tie_word_embeddings=True,
        rope_parameters=dict(
            rope_type="llama3",
            rope_theta=500000.0,
            factor=8.0,
            low_freq_factor=1.0,
            high_freq_factor=4.0,
            original_max_position_embeddings=16,
        ),
    ),
}


def build(name: str, settings: dict[str, Any]) -> LlamaForCausalLM:
    torch.manual_seed(sum(map(ord, name)))
    model = LlamaForCausalLM(LlamaConfig(**settings)).eval()
    with torch.no_grad():  # weights large enough that the logits have clear winners
        for pname, p in model.named_parameters():
            if p.ndim == 1:  # norms: around 1, not exactly (so a missing scale shows)
                p.copy_(1.0 + 0.2 * torch.randn_like(p))
            else:
                p.normal_(0.0, 0.5 if "embed" in pname else 1.5 / p.shape[1] ** 0.5)
    return model


def prompts(vocab: int) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    rng = np.random.default_rng(7)
    width = max(PROMPT_LENGTHS)
    ids = np.zeros((len(PROMPT_LENGTHS), width), np.int64)
    mask = np.zeros_like(ids)
    for b, n in enumerate(PROMPT_LENGTHS):
        ids[b, width - n :] = rng.integers(3, vocab, n)
        mask[b, width - n :] = 1
    positions = np.where(mask == 1, np.cumsum(mask, axis=1) - 1, 1)
    return torch.from_numpy(ids), torch.from_numpy(mask), torch.from_numpy(positions)


def logits_of(model: LlamaForCausalLM, ids: Any, mask: Any, positions: Any) -> np.ndarray:
    with torch.no_grad():
        out = model(input_ids=ids, attention_mask=mask, position_ids=positions)
    return np.asarray(out.logits.float().numpy())


def reference(model: LlamaForCausalLM) -> dict[str, np.ndarray]:
    ids, mask, positions = prompts(model.config.vocab_size)
    with torch.no_grad():
        hidden = model.model(input_ids=ids, attention_mask=mask, position_ids=positions)
        greedy = model.generate(
            ids, attention_mask=mask, max_new_tokens=NEW_TOKENS, do_sample=False,
            pad_token_id=0, eos_token_id=2,
        )  # fmt: skip
    logits = logits_of(model, ids, mask, positions)
    bf16 = logits_of(model.to(torch.bfloat16), ids, mask, positions)
    model.float()
    real = mask.numpy().astype(bool)
    return {
        "input_ids": ids.numpy(), "attention_mask": mask.numpy(),
        "position_ids": positions.numpy(), "logits": logits,
        "last_hidden": hidden.last_hidden_state.numpy(), "greedy": greedy.numpy(),
        "bf16_error": np.float32(np.abs(bf16 - logits)[real].max()),
    }  # fmt: skip


def permute(w: np.ndarray, heads: int) -> np.ndarray:
    """convert_hf_to_gguf.py's LlamaModel.permute: each head's rows from HF's rotate-half
    order to ggml's interleaved pairs."""
    return np.asarray(
        w.reshape(heads, 2, w.shape[0] // heads // 2, *w.shape[1:]).swapaxes(1, 2)
    ).reshape(w.shape)


GGUF_TYPES = ("f16", "q8_0", "q4_0")  # llama.cpp's --outtype f16 / q8_0, and a Q4_0 file
GGUF_FILES = {"llama-gqa": GGUF_TYPES, "llama-tied": ("q8_0",)}

GGUF_NAMES = {
    "self_attn.q_proj": "attn_q", "self_attn.k_proj": "attn_k", "self_attn.v_proj": "attn_v",
    "self_attn.o_proj": "attn_output", "mlp.gate_proj": "ffn_gate", "mlp.up_proj": "ffn_up",
    "mlp.down_proj": "ffn_down", "input_layernorm": "attn_norm",
    "post_attention_layernorm": "ffn_norm",
}  # fmt: skip


def gguf_name(hf: str) -> str:
    if hf == "model.embed_tokens.weight":
        return "token_embd.weight"
    if hf == "model.norm.weight":
        return "output_norm.weight"
    if hf == "lm_head.weight":
        return "output.weight"
    _, _, layer, rest = hf.split(".", 3)
    module = rest.rsplit(".", 1)[0]
    return f"blk.{layer}.{GGUF_NAMES[module]}.weight"


def round_trip(w: np.ndarray, qtype: gguf.GGMLQuantizationType) -> np.ndarray:
    if qtype == gguf.GGMLQuantizationType.F16:
        return w.astype(np.float16).astype(np.float32)
    return np.asarray(gguf.quants.dequantize(gguf.quants.quantize(w, qtype), qtype)).reshape(
        w.shape
    )


def write_gguf(model: LlamaForCausalLM, path: Path, qtype: gguf.GGMLQuantizationType) -> None:
    c = model.config
    writer = gguf.GGUFWriter(str(path), "llama")
    head_dim = getattr(c, "head_dim", None) or c.hidden_size // c.num_attention_heads
    writer.add_context_length(c.max_position_embeddings)
    writer.add_embedding_length(c.hidden_size)
    writer.add_block_count(c.num_hidden_layers)
    writer.add_feed_forward_length(c.intermediate_size)
    writer.add_rope_dimension_count(head_dim)
    if head_dim != c.hidden_size // c.num_attention_heads:  # (llama-gqa's files predate these)
        writer.add_key_length(head_dim)
        writer.add_value_length(head_dim)
    writer.add_head_count(c.num_attention_heads)
    writer.add_head_count_kv(c.num_key_value_heads)
    writer.add_layer_norm_rms_eps(c.rms_norm_eps)
    writer.add_rope_freq_base(c.rope_parameters["rope_theta"])
    writer.add_vocab_size(c.vocab_size)
    writer.add_bos_token_id(c.bos_token_id)
    writer.add_eos_token_id(c.eos_token_id)
    writer.add_file_type(1 if qtype == gguf.GGMLQuantizationType.F16 else 7)
    factors = rope_factors(c, head_dim)
    if factors is not None:
        writer.add_tensor("rope_freqs.weight", factors)
    for hf, tensor in model.state_dict().items():
        if hf == "lm_head.weight" and c.tie_word_embeddings:
            continue  # the converter writes no output.weight for a tied head
        w = tensor.numpy()
        if hf.endswith("q_proj.weight"):
            w = permute(w, c.num_attention_heads)
        elif hf.endswith("k_proj.weight"):
            w = permute(w, c.num_key_value_heads)
        if w.ndim == 1:
            writer.add_tensor(gguf_name(hf), w.astype(np.float32))
        elif qtype == gguf.GGMLQuantizationType.F16:
            writer.add_tensor(gguf_name(hf), w.astype(np.float16))
        else:
            writer.add_tensor(gguf_name(hf), gguf.quants.quantize(w, qtype), raw_dtype=qtype)
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()


def rope_factors(c: Any, head_dim: int) -> np.ndarray | None:
    """convert_hf_to_gguf.py's LlamaModel rope_freqs for a llama3 rope (None otherwise): per
    frequency, the divisor that turns the plain inverse frequency into llama3's."""
    rope = c.rope_parameters
    if rope.get("rope_type") != "llama3":
        return None
    freqs = 1.0 / (
        rope["rope_theta"] ** (torch.arange(0, head_dim, 2, dtype=torch.float32) / head_dim)
    )
    factor, low, high = rope["factor"], rope["low_freq_factor"], rope["high_freq_factor"]
    old = rope["original_max_position_embeddings"]
    factors = []
    for freq in freqs.tolist():
        wavelen = 2 * math.pi / freq
        if wavelen < old / high:
            factors.append(1.0)
        elif wavelen > old / low:
            factors.append(factor)
        else:
            smooth = (old / wavelen - low) / (high - low)
            factors.append(1 / ((1 - smooth) / factor + smooth))
    return np.asarray(factors, np.float32)


def quantized_reference(
    model: LlamaForCausalLM, qtype: gguf.GGMLQuantizationType
) -> tuple[np.ndarray, np.ndarray]:
    """Logits and greedy tokens of a copy of `model` whose 2-D weights went through `qtype`
    and back."""
    copy = LlamaForCausalLM(model.config).eval()
    copy.load_state_dict(model.state_dict())
    with torch.no_grad():
        for p in copy.parameters():
            if p.ndim == 2:
                p.copy_(torch.from_numpy(round_trip(p.numpy(), qtype)))
    ids, mask, positions = prompts(model.config.vocab_size)
    with torch.no_grad():
        greedy = copy.generate(
            ids, attention_mask=mask, max_new_tokens=NEW_TOKENS, do_sample=False,
            pad_token_id=0, eos_token_id=2,
        )  # fmt: skip
    return logits_of(copy, ids, mask, positions), greedy.numpy()


def main() -> None:
    for name, settings in MODELS.items():
        folder = OUT / name
        shutil.rmtree(folder, ignore_errors=True)
        model = build(name, settings)
        shard = "100KB" if name == "llama-gqa" else "10GB"
        model.save_pretrained(folder, max_shard_size=shard, safe_serialization=True)
        data = reference(model)
        gguf_folder = folder if name == "llama-gqa" else OUT / f"{name}-gguf"
        if gguf_folder != folder:
            shutil.rmtree(gguf_folder, ignore_errors=True)
            gguf_folder.mkdir(parents=True)
        for label in GGUF_FILES.get(name, ()):
            qtype = gguf.GGMLQuantizationType[label.upper()]
            write_gguf(model, gguf_folder / f"model-{label}.gguf", qtype)
            data[f"logits_{label}"], data[f"greedy_{label}"] = quantized_reference(model, qtype)
        (folder / "generation_config.json").unlink(missing_ok=True)
        arrays: dict[str, Any] = data  # numpy's stub would let ** fill allow_pickle
        np.savez_compressed(folder / "reference.npz", **arrays)
        size = sum(f.stat().st_size for f in folder.iterdir())
        print(f"{name}: {size / 1024:.0f} KiB, greedy {data['greedy'].tolist()}, "
              f"bf16 error {float(data['bf16_error']):.3g}")  # fmt: skip


if __name__ == "__main__":
    main()

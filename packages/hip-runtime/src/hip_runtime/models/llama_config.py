"""A Llama-style decoder's shape, read from a Hugging Face config.json or GGUF metadata, and its
rotary tables.

Everything here is host work done once at load: the fields are checked (a missing or mistyped
one, or a rope scaling this decoder does not implement, is a ValueError naming the source and
the field, raised before the device is touched) and the rotary cos/sin tables are computed as
transformers computes them (inverse frequencies in f32, angles position × frequency in f32).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np

from hip_runtime.models.config import flag, positive_float, positive_int, require

#: rope types implemented (transformers' names): each only changes the inverse frequencies.
ROPE_TYPES = ("default", "linear", "llama3")


@dataclass(frozen=True)
class LlamaConfig:
    vocab_size: int
    hidden_size: int
    intermediate_size: int
    layers: int
    heads: int
    kv_heads: int
    head_dim: int
    rms_norm_eps: float
    rope_theta: float
    max_positions: int
    tie_word_embeddings: bool
    rope: Mapping[str, Any]  # the rope scaling parameters ({"rope_type": "default"} if none)
    bos_token_id: int | None = None
    eos_token_ids: tuple[int, ...] = ()
    pad_token_id: int | None = None
    #: Per-frequency divisors of the inverse frequencies (GGUF's rope_freqs.weight: llama.cpp
    #: stores llama3's rope scaling this way), or None.
    rope_factors: tuple[float, ...] | None = None

    @classmethod
    def from_hf(cls, config: Mapping[str, Any], where: str) -> LlamaConfig:
        """From a transformers LlamaConfig's dict (config.json): rope_theta / rope_scaling as
        transformers 4 writes them, or rope_parameters as transformers 5 does.

        Every field read is checked, as transformers' defaults fill absent ones: sizes are
        positive ints (not bools), rms_norm_eps and rope_theta finite numbers > 0,
        tie_word_embeddings a JSON boolean; what this decoder does not run (partial rotary,
        biases, another activation) is refused rather than ignored. ValueError naming `where`
        and the field."""
        heads = positive_int(config, "num_attention_heads", where)
        hidden = positive_int(config, "hidden_size", where)
        head_dim = positive_int(config, "head_dim", where, default=hidden // heads)
        kv_heads = positive_int(config, "num_key_value_heads", where, default=heads)
        rope = _rope_parameters(config, where)
        for name, expected in (("attention_bias", False), ("mlp_bias", False),
                               ("hidden_act", "silu")):  # fmt: skip
            if name in config and config[name] != expected:
                raise ValueError(f"{where}: {name} {config[name]!r} is not supported (this "
                                 f"decoder runs {expected!r})")  # fmt: skip
        if "partial_rotary_factor" in config:
            rope["partial_rotary_factor"] = config["partial_rotary_factor"]
        made = cls(
            vocab_size=positive_int(config, "vocab_size", where),
            hidden_size=hidden,
            intermediate_size=positive_int(config, "intermediate_size", where),
            layers=positive_int(config, "num_hidden_layers", where),
            heads=heads,
            kv_heads=kv_heads,
            head_dim=head_dim,
            rms_norm_eps=positive_float(config, "rms_norm_eps", where),
            rope_theta=rope.pop("rope_theta"),
            max_positions=positive_int(config, "max_position_embeddings", where),
            tie_word_embeddings=flag(config, "tie_word_embeddings", where, default=False),
            rope=rope,
            bos_token_id=_token(config.get("bos_token_id")),
            eos_token_ids=_tokens(config.get("eos_token_id")),
            pad_token_id=_token(config.get("pad_token_id")),
        )
        made.check(where)
        return made

    @classmethod
    def from_gguf(
        cls, metadata: Mapping[str, Any], where: str, vocab: int,
        rope_factors: np.ndarray | None = None,
    ) -> LlamaConfig:  # fmt: skip
        """From llama.cpp's `llama.*` metadata; `vocab`: token_embd's rows (the vocabulary
        size is optional metadata); `rope_factors`: the file's rope_freqs.weight (f32
        [head_dim / 2], each inverse frequency is divided by its factor), if it has one."""
        arch = metadata.get("general.architecture")
        if arch != "llama":
            raise ValueError(f"{where}: general.architecture is {arch!r}; LlamaDecoder reads llama")
        heads = require(metadata, "llama.attention.head_count", int, where)
        hidden = require(metadata, "llama.embedding_length", int, where)
        head_dim = metadata.get("llama.attention.key_length") or hidden // max(heads, 1)
        rope: dict[str, Any] = {"rope_type": "default"}
        scaling = metadata.get("llama.rope.scaling.type", "none")
        if scaling == "linear":
            factor = positive_float(metadata, "llama.rope.scaling.factor", where)
            rope = {"rope_type": "linear", "factor": factor}
        elif scaling != "none":
            raise ValueError(f"{where}: rope scaling {scaling!r} is not supported (linear)")
        made = cls(
            vocab_size=int(metadata.get("llama.vocab_size", vocab)),
            hidden_size=hidden,
            intermediate_size=require(metadata, "llama.feed_forward_length", int, where),
            layers=require(metadata, "llama.block_count", int, where),
            heads=heads,
            kv_heads=metadata.get("llama.attention.head_count_kv") or heads,
            head_dim=int(head_dim),
            rms_norm_eps=positive_float(metadata, "llama.attention.layer_norm_rms_epsilon", where),
            rope_theta=positive_float(metadata, "llama.rope.freq_base", where, default=10000.0),
            max_positions=require(metadata, "llama.context_length", int, where),
            tie_word_embeddings=False,  # decided by the loader: no output.weight means tied
            rope=rope,
            bos_token_id=_token(metadata.get("tokenizer.ggml.bos_token_id")),
            eos_token_ids=_tokens(metadata.get("tokenizer.ggml.eos_token_id")),
            pad_token_id=_token(metadata.get("tokenizer.ggml.padding_token_id")),
            rope_factors=None if rope_factors is None else tuple(map(float, rope_factors)),
        )
        rot = metadata.get("llama.rope.dimension_count", made.head_dim)
        if rot != made.head_dim:
            raise ValueError(f"{where}: partial rotary (rope dimension {rot} of head {head_dim}) "
                             "is not supported")  # fmt: skip
        made.check(where)
        return made

    def check(self, where: str) -> None:
        for name in ("vocab_size", "hidden_size", "intermediate_size", "layers", "heads",
                     "kv_heads", "head_dim", "max_positions"):  # fmt: skip
            value = getattr(self, name)
            if not isinstance(value, int) or isinstance(value, bool) or value < 1:
                raise ValueError(f"{where}: {name} must be a positive int, not {value!r}")
        if self.heads % self.kv_heads:
            raise ValueError(f"{where}: {self.heads} attention heads (num_attention_heads) are "
                             f"not a multiple of {self.kv_heads} key/value heads "
                             "(num_key_value_heads)")  # fmt: skip
        if self.head_dim % 2 or self.head_dim > 256:
            raise ValueError(f"{where}: head_dim {self.head_dim} must be even and at most 256")
        kind = self.rope.get("rope_type")
        if kind not in ROPE_TYPES:
            raise ValueError(
                f"{where}: rope type {kind!r} is not supported ({', '.join(ROPE_TYPES)})"
            )
        partial = self.rope.get("partial_rotary_factor", 1.0)
        if isinstance(partial, bool) or partial != 1.0:  # (True == 1.0 in Python)
            raise ValueError(f"{where}: partial_rotary_factor {partial!r} is not supported (Llama "
                             "rotates whole heads: 1.0)")  # fmt: skip
        factors = self.rope_factors
        if factors is not None and (
            len(factors) != self.head_dim // 2
            or not all(math.isfinite(f) and f > 0 for f in factors)
        ):
            raise ValueError(f"{where}: rope_freqs must hold head_dim / 2 = {self.head_dim // 2} "
                             f"positive factors, not {len(factors)} values")  # fmt: skip

    def inverse_frequencies(self) -> np.ndarray:
        """f32 [head_dim / 2]: θ^(-2i/d), scaled as the rope type says (transformers' rules)."""
        d = self.head_dim
        inv = (1.0 / (self.rope_theta ** (np.arange(0, d, 2, dtype=np.float32) / d))).astype(
            np.float32
        )
        kind, p = self.rope["rope_type"], self.rope
        if kind == "linear":
            inv = inv / np.float32(p["factor"])
        elif kind == "llama3":
            factor, low, high = p["factor"], p["low_freq_factor"], p["high_freq_factor"]
            old = p["original_max_position_embeddings"]
            wavelen = 2 * math.pi / inv
            scaled = np.where(wavelen > old / low, inv / factor, inv)
            smooth = (old / wavelen - low) / (high - low)
            smoothed = (1 - smooth) * scaled / factor + smooth * scaled
            medium = ~(wavelen < old / high) & ~(wavelen > old / low)
            inv = np.where(medium, smoothed, scaled).astype(np.float32)
        if self.rope_factors is not None:  # as llama.cpp's rope: theta / freq_factor
            inv = (inv / np.asarray(self.rope_factors, np.float32)).astype(np.float32)
        return inv

    def rope_tables(self, positions: int) -> tuple[np.ndarray, np.ndarray]:
        """(cos, sin), f32 [positions, head_dim / 2]: the angles of positions 0.. (the rope
        op's tables)."""
        angles = np.arange(positions, dtype=np.float32)[:, None] * self.inverse_frequencies()
        return np.cos(angles).astype(np.float32), np.sin(angles).astype(np.float32)


def _rope_parameters(config: Mapping[str, Any], where: str) -> dict[str, Any]:
    """rope_parameters (transformers 5) or rope_scaling (4) with rope_theta (either's, else the
    top level's, else 10000) and rope_type (or 4's `type`) filled in, each scale the type reads
    checked: a zero, negative, missing or non-numeric one is a ValueError naming the field
    (it would make the rotary tables NaN, or a KeyError)."""
    name = "rope_parameters" if config.get("rope_parameters") is not None else "rope_scaling"
    given = config.get(name)
    if given is None:
        given = {}
    if not isinstance(given, Mapping):
        raise ValueError(f"{where}: {name} must be an object, not {given!r}")
    rope = dict(given)
    rope.setdefault("rope_type", rope.get("type", "default"))
    if "rope_theta" in rope:
        rope["rope_theta"] = positive_float(rope, "rope_theta", f"{where}: {name}")
    else:
        rope["rope_theta"] = positive_float(config, "rope_theta", where, default=10000.0)
    inner = f"{where}: {name}"
    if rope["rope_type"] in ("linear", "llama3"):
        rope["factor"] = positive_float(rope, "factor", inner)
    if rope["rope_type"] == "llama3":
        low = rope["low_freq_factor"] = positive_float(rope, "low_freq_factor", inner)
        high = rope["high_freq_factor"] = positive_float(rope, "high_freq_factor", inner)
        if not low < high:  # their difference divides the smoothing: transformers' rule too
            raise ValueError(f"{inner}: low_freq_factor {low} must be below high_freq_factor "
                             f"{high}")  # fmt: skip
        rope["original_max_position_embeddings"] = positive_int(
            rope, "original_max_position_embeddings", inner
        )
    return rope


def _token(value: Any) -> int | None:
    """A token id: a JSON or GGUF integer (numpy's too: GGUF arrays are numpy arrays)."""
    if isinstance(value, np.integer):
        return int(value)
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def _tokens(value: Any) -> tuple[int, ...]:
    """One id or a list (a JSON list, a GGUF numpy array) of them; others are left out."""
    values = value.tolist() if isinstance(value, np.ndarray) else value
    values = values if isinstance(values, list) else [values]
    return tuple(t for t in map(_token, values) if t is not None)


__all__ = ["ROPE_TYPES", "LlamaConfig"]

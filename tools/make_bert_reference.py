"""Write the stored BERT references of packages/hip-runtime/tests/test_models_bert.py.

Run with the reference interpreter (torch CPU + transformers + safetensors; not a CI
dependency):

    /work/refvenv/bin/python tools/make_bert_reference.py

For each small random-init config below (seeded) it saves the model with `save_pretrained`
(config.json + model.safetensors, f32) into packages/hip-runtime/tests/data/models/<name>/ and
runs a batch of right-padded inputs (attention mask and token types) through transformers on
torch CPU in f32 with eager attention. `reference.npz` beside the weights holds:

- `input_ids`, `attention_mask`, `token_type_ids`: [B, S] int64, right-padded (pad id 0);
- `last_hidden_state`: [B, S, H] f32 (padded positions included: they are computed too);
- `mean`, `cls`: [B, H] pooled (mean over the real tokens; the first token) then L2-normalized,
  as sentence-transformers does; `pooler`: BertModel's pooler output where the model has one;
- `bf16_<output>`: torch's own bf16 run's max |bf16 - f32| over the output, divided by the
  output's max |f32| (the bf16 tolerance of issue 16: "within what torch's own bf16 run differs
  from its f32").

`bert-tiny` is a BertModel (no name prefix, pooler, exact GELU); `bert-mlm-tiny` is a
BertForMaskedLM (every encoder name under "bert.", an MLM head the encoder ignores, tanh GELU,
three token types). Weights are drawn with std 0.2 (not BERT's 0.02) so that attention is far
from uniform and a wrong mask or head split shows.
"""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

import numpy as np
import torch
from transformers import BertConfig, BertForMaskedLM, BertModel

DATA = Path(__file__).resolve().parents[1] / "packages/hip-runtime/tests/data/models"
LENGTHS = (13, 9, 4, 1)  # a right-padded batch; the longest fills the sequence

MODELS: dict[str, dict[str, Any]] = {
    "bert-tiny": dict(
        cls=BertModel, vocab_size=120, hidden_size=64, num_hidden_layers=2,
        num_attention_heads=4, intermediate_size=128, max_position_embeddings=32,
        type_vocab_size=2, hidden_act="gelu", layer_norm_eps=1e-12, initializer_range=0.2,
    ),
    "bert-mlm-tiny": dict(
        cls=BertForMaskedLM, vocab_size=90, hidden_size=32, num_hidden_layers=2,
        num_attention_heads=2, intermediate_size=64, max_position_embeddings=24,
        type_vocab_size=3, hidden_act="gelu_new", layer_norm_eps=1e-5, initializer_range=0.2,
    ),
}  # fmt: skip


def inputs(config: BertConfig, seed: int) -> dict[str, np.ndarray]:
    """Right-padded ids (pad 0), the mask, and token types (a second segment from the middle)."""
    rng = np.random.default_rng(seed)
    seq = max(LENGTHS)
    mask = (np.arange(seq)[None, :] < np.array(LENGTHS)[:, None]).astype(np.int64)
    ids = rng.integers(1, config.vocab_size, (len(LENGTHS), seq)) * mask
    types = rng.integers(0, config.type_vocab_size, (len(LENGTHS), 1)) * (
        np.arange(seq)[None, :] >= seq // 2
    )  # fmt: skip
    return {"input_ids": ids, "attention_mask": mask, "token_type_ids": types * mask}


def run(model: torch.nn.Module, feeds: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    """The outputs in f32 (the model in whatever dtype it is in)."""
    bert = model if isinstance(model, BertModel) else model.bert
    with torch.no_grad():
        out = bert(**{name: torch.from_numpy(value) for name, value in feeds.items()})
    hidden = out.last_hidden_state.float()
    mask = torch.from_numpy(feeds["attention_mask"]).float()[:, :, None]
    mean = (hidden * mask).sum(1) / mask.sum(1).clamp(min=1e-9)
    results = {
        "last_hidden_state": hidden,
        "mean": torch.nn.functional.normalize(mean, dim=-1),
        "cls": torch.nn.functional.normalize(hidden[:, 0], dim=-1),
    }
    if out.pooler_output is not None:
        results["pooler"] = out.pooler_output.float()
    return {name: value.numpy() for name, value in results.items()}


def make(name: str, seed: int) -> None:
    options = dict(MODELS[name])
    cls = options.pop("cls")
    torch.manual_seed(seed)
    config = BertConfig(**options, attn_implementation="eager")
    model = cls(config).eval()
    folder = DATA / name
    shutil.rmtree(folder, ignore_errors=True)
    model.save_pretrained(folder)  # safetensors: transformers 5 writes nothing else
    feeds = inputs(config, seed)
    f32 = run(model, feeds)
    bf16 = run(model.to(torch.bfloat16), feeds)
    spreads = {
        f"bf16_{key}": np.float32(np.abs(bf16[key] - value).max() / np.abs(value).max())
        for key, value in f32.items()
    }
    arrays: dict[str, Any] = {**feeds, **f32, **spreads}  # numpy's stub: ** may fill allow_pickle
    np.savez_compressed(folder / "reference.npz", **arrays)
    print(name, {key: float(value) for key, value in spreads.items()})


def main() -> None:
    for seed, name in enumerate(MODELS):
        make(name, seed)
    total = sum(path.stat().st_size for path in DATA.glob("bert*/*"))
    print(f"{total / 1e6:.2f} MB under {DATA}")


if __name__ == "__main__":
    main()

"""A model directory as Hugging Face ships one, small on disk: Llama 3.1 8B's ``config.json``
and a sharded safetensors index whose shards hold only their headers.

``ome-agent model-metadata`` counts parameters exactly from the shapes in the shards'
headers (``pkg/hfutil/modelconfig/safetensors.go``: the index names the shards, each
header's shapes are multiplied out); the tensor data after a header is never read, so the
shards leave it out and weigh a few kilobytes. The count is Llama 3.1 8B's, 8,030,261,248,
which OME formats as ``8.03B``; its estimate without weights would be a whole ``8B``, so
the value in the spec proves the agent read the index.
"""

from __future__ import annotations

import json
import math
import struct
from pathlib import Path

CONFIG = {
    "architectures": ["LlamaForCausalLM"],
    "model_type": "llama",
    "hidden_size": 4096,
    "intermediate_size": 14336,
    "num_hidden_layers": 32,
    "num_attention_heads": 32,
    "num_key_value_heads": 8,
    "vocab_size": 128256,
    "max_position_embeddings": 131072,
    "rms_norm_eps": 1e-05,
    "rope_theta": 500000.0,
    "torch_dtype": "bfloat16",
}
SHARDS = 4
BYTES_PER_PARAMETER = 2
"""bfloat16."""
PARAMETERS = 8_030_261_248
PARAMETER_SIZE = "8.03B"
"""``FormatParamCount(PARAMETERS)``."""
BROKEN_CONFIG = '{"model_type": "llama", "hidden_size": 4096,'
"""A config.json cut short, as a failed copy leaves it."""


def tensors() -> dict[str, list[int]]:
    """Every weight of the model by name, with its shape."""
    hidden, inner, vocab = CONFIG["hidden_size"], CONFIG["intermediate_size"], CONFIG["vocab_size"]
    kv = hidden // CONFIG["num_attention_heads"] * CONFIG["num_key_value_heads"]
    shapes = {"model.embed_tokens.weight": [vocab, hidden], "model.norm.weight": [hidden], "lm_head.weight": [vocab, hidden]}
    for layer in range(CONFIG["num_hidden_layers"]):
        prefix = f"model.layers.{layer}"
        shapes |= {
            f"{prefix}.self_attn.q_proj.weight": [hidden, hidden], f"{prefix}.self_attn.k_proj.weight": [kv, hidden],
            f"{prefix}.self_attn.v_proj.weight": [kv, hidden], f"{prefix}.self_attn.o_proj.weight": [hidden, hidden],
            f"{prefix}.mlp.gate_proj.weight": [inner, hidden], f"{prefix}.mlp.up_proj.weight": [inner, hidden],
            f"{prefix}.mlp.down_proj.weight": [hidden, inner],
            f"{prefix}.input_layernorm.weight": [hidden], f"{prefix}.post_attention_layernorm.weight": [hidden],
        }
    return shapes


def write_model(directory: Path, config: str | None = None) -> None:
    """The model's files in ``directory``, readable by any user (the Job runs as a non-root one);
    ``config`` replaces the config.json text (``BROKEN_CONFIG``)."""
    directory.mkdir(parents=True, exist_ok=True)
    shapes = tensors()
    names = sorted(shapes)
    weight_map: dict[str, str] = {}
    for shard in range(SHARDS):
        shard_name = f"model-{shard + 1:05d}-of-{SHARDS:05d}.safetensors"
        header: dict[str, object] = {"__metadata__": {"format": "pt"}}
        offset = 0
        for name in names[shard::SHARDS]:
            shape = shapes[name]
            size = BYTES_PER_PARAMETER * math.prod(shape)
            header[name] = {"dtype": "BF16", "shape": shape, "data_offsets": [offset, offset + size]}
            offset += size
            weight_map[name] = shard_name
        encoded = json.dumps(header).encode()
        (directory / shard_name).write_bytes(struct.pack("<Q", len(encoded)) + encoded)
    index = {"metadata": {"total_size": PARAMETERS * BYTES_PER_PARAMETER}, "weight_map": weight_map}
    (directory / "model.safetensors.index.json").write_text(json.dumps(index), encoding="utf-8")
    (directory / "config.json").write_text(config if config is not None else json.dumps(CONFIG, indent=2), encoding="utf-8")
    for path in [directory, *directory.iterdir()]:
        path.chmod(0o755 if path.is_dir() else 0o644)


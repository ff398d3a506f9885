"""`model=hf_causal_lm`: any Hugging Face causal LM (the optional `hf` extra), built from a config
dict or loaded from a local directory for fine-tuning. Never downloads."""
from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from torch import nn

INSTALL = 'the hf extra: pip install -e ".[hf]"'


def _transformers() -> Any:
    os.environ.setdefault("HF_HUB_OFFLINE", "1")  # a model name must never turn into a download
    try:
        import transformers
    except ImportError as err:
        raise ImportError(f"transformers is not installed; install {INSTALL}") from err
    transformers.logging.set_verbosity_error()  # its advice on generation settings is not ours to print
    return transformers


def causal_lm(vocab_size: int, block_size: int, config: dict[str, Any] | None = None,
              pretrained: str | None = None) -> nn.Module:
    """A fresh `AutoModelForCausalLM` from `config` (model_type plus its fields), sized to the data's
    vocabulary unless the config sets one; or the weights of a local `save_pretrained` directory."""
    transformers = _transformers()
    if pretrained is not None:
        if not Path(pretrained).is_dir():
            raise FileNotFoundError(f"{pretrained} is not a local model directory (save_pretrained writes one)")
        return transformers.AutoModelForCausalLM.from_pretrained(pretrained, local_files_only=True)
    fields = dict(config or {})
    model_type = fields.pop("model_type", "gpt2")
    fields.setdefault("vocab_size", vocab_size)
    hf_config = transformers.AutoConfig.for_model(model_type, **fields)
    if getattr(hf_config, "max_position_embeddings", block_size) < block_size:
        hf_config.max_position_embeddings = block_size
    return transformers.AutoModelForCausalLM.from_config(hf_config)

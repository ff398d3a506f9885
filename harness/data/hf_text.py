"""`data=hf data.task=classification` on a text column (no `data.input_key`): each text tokenised by
a local tokenizer (a tokenizer.json file, or a transformers folder), cut or padded to
`data.block_size`, as the dict sample a sequence classifier takes: `input_ids`, `attention_mask`,
`labels`. With `loss.function=model` a Hugging Face classifier trains on the loss it computes from
them; under the built-in loss the model reads `input_ids` and the cross-entropy `labels`."""
from __future__ import annotations

from pathlib import Path
from typing import Any

import torch
from torch.utils.data import Dataset

from harness.core.errors import ConfigError, one_line
from harness.data.bpe import uses_tokenizers
from harness.data.corpus import BPE, CHAR
from harness.data.loader import HF_INPUT, HF_LABELS, HF_MASK

PAD_TOKENS = ("[PAD]", "<pad>", "<|padding|>")


def is_tokenizer(value: object) -> bool:
    """A tokenizer.json file or a local transformers folder (what text classification reads): not
    char or bpe, which build a vocabulary from a corpus."""
    return isinstance(value, str) and value not in (CHAR, BPE) and (uses_tokenizers(value) or Path(value).is_dir())


class TextClasses(Dataset):
    """Tokenised texts with their labels, as dict samples."""

    def __init__(self, ids: torch.Tensor, mask: torch.Tensor, labels: torch.Tensor) -> None:
        self.ids, self.mask, self.labels = ids, mask, labels

    def __len__(self) -> int:
        return len(self.labels)

    def __getitem__(self, i: int) -> dict[str, torch.Tensor]:
        return {HF_INPUT: self.ids[i], HF_MASK: self.mask[i], HF_LABELS: self.labels[i]}


def text_classes(tokenizer: str, texts: list[str], labels: list[int], block_size: int) -> tuple[TextClasses, int]:
    """The split as TextClasses, and the tokenizer's vocabulary size."""
    ids, mask, vocab = _encode(tokenizer, texts, block_size)
    return TextClasses(ids, mask, torch.as_tensor(labels, dtype=torch.long)), vocab


def _encode(tokenizer: str, texts: list[str], block: int) -> tuple[torch.Tensor, torch.Tensor, int]:
    try:
        if Path(tokenizer).is_dir():
            from transformers import AutoTokenizer

            tok: Any = AutoTokenizer.from_pretrained(tokenizer, local_files_only=True)
            if tok.pad_token is None:
                tok.pad_token = tok.eos_token or tok.unk_token
            encoded = tok(texts, truncation=True, max_length=block, padding="max_length")
            ids, mask, vocab = encoded["input_ids"], encoded["attention_mask"], len(tok)
        else:
            from tokenizers import Tokenizer

            tok = Tokenizer.from_file(tokenizer)
            pad = next((tok.token_to_id(t) for t in PAD_TOKENS if tok.token_to_id(t) is not None), 0)
            tok.enable_truncation(block)
            tok.enable_padding(length=block, pad_id=pad)
            encoded = tok.encode_batch(texts)
            ids, mask, vocab = [e.ids for e in encoded], [e.attention_mask for e in encoded], tok.get_vocab_size()
    except Exception as err:  # noqa: BLE001 - a missing extra, a folder without tokenizer files, a bad file
        raise ConfigError("data.tokenizer", tokenizer, f"a tokenizer.json file or a local tokenizer folder that "
                                                       f"loads: it raised {one_line(err)}") from None
    return torch.as_tensor(ids, dtype=torch.long), torch.as_tensor(mask, dtype=torch.long), int(vocab)

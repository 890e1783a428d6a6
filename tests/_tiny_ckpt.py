"""Test helper: a tiny, randomly initialised Llama checkpoint with a character-level tokenizer.

The tokenizer knows the ChatML markers as single special tokens, so :class:`ridgeline.policies.engine.Engine`
accepts the checkpoint. Nothing is downloaded.
"""

from __future__ import annotations

import string
from pathlib import Path

SPECIALS = ["<pad>", "<unk>", "<|im_start|>", "<|im_end|>"]


def make_tiny_checkpoint(path: Path, *, seed: int = 0, hidden: int = 32, layers: int = 2) -> Path:
    """Write a tiny random ``LlamaForCausalLM`` and a char-level fast tokenizer to ``path``."""
    import torch
    from tokenizers import Regex, Tokenizer, decoders, models, pre_tokenizers
    from transformers import LlamaConfig, LlamaForCausalLM, PreTrainedTokenizerFast

    chars = sorted(set(string.printable) | {"\n", "\t"})
    vocab = {tok: i for i, tok in enumerate(SPECIALS)}
    for c in chars:
        vocab.setdefault(c, len(vocab))
    tok = Tokenizer(models.WordLevel(vocab=vocab, unk_token="<unk>"))
    tok.pre_tokenizer = pre_tokenizers.Split(Regex(r"[\s\S]"), behavior="isolated")
    tok.decoder = decoders.Fuse()
    fast = PreTrainedTokenizerFast(
        tokenizer_object=tok,
        unk_token="<unk>",
        pad_token="<pad>",
        eos_token="<|im_end|>",
        additional_special_tokens=["<|im_start|>"],
    )
    torch.manual_seed(seed)
    config = LlamaConfig(
        vocab_size=len(vocab),
        hidden_size=hidden,
        intermediate_size=hidden * 2,
        num_hidden_layers=layers,
        num_attention_heads=2,
        num_key_value_heads=2,
        max_position_embeddings=8192,
        pad_token_id=vocab["<pad>"],
        eos_token_id=vocab["<|im_end|>"],
        bos_token_id=None,
        tie_word_embeddings=True,
    )
    model = LlamaForCausalLM(config)
    path.mkdir(parents=True, exist_ok=True)
    model.save_pretrained(path)
    fast.save_pretrained(path)
    return path

"""Builds a tiny random-weight Llama with the real Llama 3 tokenizer, for a real vLLM on the CPU.

Run with the vLLM virtualenv's Python: `python exporter/demo/tiny_llama.py TOKENIZER_JSON OUT_DIR`.
Grammar compiles depend on the vocabulary, not on the weights, so they cost what they cost in
production; the model itself answers in microseconds.
"""

from __future__ import annotations

import sys
from pathlib import Path

CHAT_TEMPLATE = (
    "{{ bos_token }}{% for m in messages %}<|start_header_id|>{{ m['role'] }}<|end_header_id|>\n\n"
    "{{ m['content'] }}<|eot_id|>{% endfor %}"
    "{% if add_generation_prompt %}<|start_header_id|>assistant<|end_header_id|>\n\n{% endif %}"
)


def build(tokenizer_json: str, out: Path) -> None:
    import torch
    from transformers import LlamaConfig, LlamaForCausalLM, PreTrainedTokenizerFast

    tok = PreTrainedTokenizerFast(  # type: ignore[no-untyped-call]
        tokenizer_file=tokenizer_json, bos_token="<|begin_of_text|>", eos_token="<|eot_id|>"
    )
    tok.chat_template = CHAT_TEMPLATE
    config = LlamaConfig(
        vocab_size=128256,
        hidden_size=128,
        intermediate_size=256,
        num_hidden_layers=2,
        num_attention_heads=4,  # head_dim 32: the CPU attention backend's minimum
        num_key_value_heads=4,
        max_position_embeddings=1024,
        bos_token_id=128000,
        eos_token_id=128009,
        tie_word_embeddings=True,
    )
    torch.manual_seed(0)
    model = LlamaForCausalLM(config)
    out.mkdir(parents=True, exist_ok=True)
    model.save_pretrained(out, safe_serialization=True)
    tok.save_pretrained(out)


if __name__ == "__main__":
    build(sys.argv[1], Path(sys.argv[2]))

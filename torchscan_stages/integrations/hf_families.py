"""Small configs of Hugging Face families no issue named, as a new user would build them.

One table shared by the tests (``tests/integrations/test_hf_families.py``) and the survey
(``benchmarks/survey_hf.py``): each entry builds a family from a config small enough for a
loaded 2-core CPU (width 32, 1-2 layers, 8 tokens), with random weights and no download,
and gives the keyword inputs its forward takes. ``PREDICTION_FAMILIES`` are five more that
the prediction tests hold to the real run (``tests/predict/test_predict_hf_families.py``),
and ``GPT2`` the one whose CUDA attention backend they check.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import torch
from torch import nn

from .hf_models import build_hf_model

V = 96  # vocabulary
L = 8  # tokens
D = 32  # width


@dataclass(frozen=True)
class Family:
    """One family: its config class, model class, small config and input kind."""

    config_class: str
    config: dict[str, Any]
    model_class: str = "AutoModel"
    inputs: str = "tokens"  # tokens | seq2seq | pixels | audio | llava
    image_size: int = 32
    attn_implementation: str | None = "sdpa"
    notes: str = field(default="", compare=False)

    def build(self) -> nn.Module:
        """The model, with SDPA attention where the family has it, else its eager one."""
        try:
            return self._build(self.attn_implementation)
        except ValueError as error:
            if "does not support an attention" not in str(error):
                raise
            return self._build(None)

    def _build(self, attn_implementation: str | None) -> nn.Module:
        return build_hf_model(
            self.config_class,
            model_class=self.model_class,
            attn_implementation=attn_implementation,
            **self.config,
        )

    def make_inputs(self, batch: int = 1) -> dict[str, torch.Tensor]:
        generator = torch.Generator().manual_seed(0)
        ids = torch.randint(1, V, (batch, L), generator=generator)
        if self.inputs == "pixels":
            size = self.image_size
            return {"pixel_values": torch.rand(batch, 3, size, size, generator=generator)}
        if self.inputs == "audio":
            return {"input_values": torch.rand(batch, 1, 256, generator=generator) - 0.5}
        if self.inputs == "seq2seq":
            return {"input_ids": ids, "decoder_input_ids": ids[:, : L // 2]}
        if self.inputs == "llava":  # 4 image tokens (a 16x16 image, 8x8 patches) first
            ids[:, :4] = LLAVA_IMAGE_TOKEN
            pixels = torch.rand(batch, 3, 16, 16, generator=generator)
            return {"input_ids": ids, "pixel_values": pixels}
        return {"input_ids": ids}


LLAVA_IMAGE_TOKEN = V - 1
DECODER = {
    "hidden_size": D,
    "num_hidden_layers": 2,
    "num_attention_heads": 4,
    "num_key_value_heads": 2,
    "intermediate_size": 64,
    "vocab_size": V,
    "max_position_embeddings": 64,
    "pad_token_id": 0,
    "bos_token_id": 0,
    "eos_token_id": 0,
}
_SEQ2SEQ = {  # Pegasus and Marian know no bos_token_id
    "d_model": D,
    "encoder_layers": 1,
    "decoder_layers": 1,
    "encoder_attention_heads": 4,
    "decoder_attention_heads": 4,
    "encoder_ffn_dim": 48,
    "decoder_ffn_dim": 48,
    "vocab_size": V,
    "max_position_embeddings": 64,
    "pad_token_id": 0,
    "eos_token_id": 0,
    "decoder_start_token_id": 0,
}

FAMILIES: dict[str, Family] = {
    "cohere": Family("CohereConfig", DECODER, "AutoModelForCausalLM"),
    "swin": Family(
        "SwinConfig",
        {"image_size": 32, "patch_size": 4, "embed_dim": 16, "depths": [1, 1]}
        | {"num_heads": [2, 4], "window_size": 4},
        inputs="pixels",
    ),
    "pegasus": Family("PegasusConfig", _SEQ2SEQ, inputs="seq2seq"),
    "marian": Family("MarianConfig", _SEQ2SEQ, inputs="seq2seq"),
    "mamba2": Family(
        "Mamba2Config",
        {"hidden_size": D, "num_hidden_layers": 2, "num_heads": 8, "head_dim": 8, "expand": 2}
        | {"state_size": 16, "n_groups": 1, "vocab_size": V, "chunk_size": 8}
        | {"time_step_rank": 4, "pad_token_id": 0, "bos_token_id": 0, "eos_token_id": 0},
        "AutoModelForCausalLM",
    ),
    "deepseek_v3": Family(
        "DeepseekV3Config",
        {**DECODER, "num_key_value_heads": 4, "moe_intermediate_size": 16}
        | {"n_routed_experts": 4, "num_experts_per_tok": 2, "n_group": 1, "topk_group": 1}
        | {"q_lora_rank": 16, "kv_lora_rank": 16, "qk_rope_head_dim": 4}
        | {"qk_nope_head_dim": 4, "v_head_dim": 8, "head_dim": 4}
        | {"first_k_dense_replace": 1, "n_shared_experts": 1},
        "AutoModelForCausalLM",
    ),
    "convnextv2": Family(
        "ConvNextV2Config",
        {"hidden_sizes": [8, 16], "depths": [1, 1], "num_stages": 2, "image_size": 32}
        | {"out_features": None, "out_indices": None},
        inputs="pixels",
    ),
    "dbrx": Family(
        "DbrxConfig",
        {"d_model": D, "n_heads": 4, "n_layers": 2, "max_seq_len": 64, "vocab_size": V}
        | {"attn_config": {"kv_n_heads": 2, "rope_theta": 10000.0, "clip_qkv": 8.0}}
        | {"ffn_config": {"ffn_hidden_size": 32, "moe_num_experts": 4, "moe_top_k": 2}},
        "AutoModelForCausalLM",
    ),
    "llava": Family(
        "LlavaConfig",
        {
            "vision_config": {
                "model_type": "clip_vision_model",
                "hidden_size": D,
                "intermediate_size": 48,
                "num_hidden_layers": 2,
                "num_attention_heads": 4,
                "image_size": 16,
                "patch_size": 8,
                "projection_dim": D,
            },
            "text_config": {"model_type": "llama", **DECODER},
            "image_token_index": LLAVA_IMAGE_TOKEN,
            "image_seq_length": 4,
            "vision_feature_layer": -1,
            "vision_feature_select_strategy": "default",
        },
        "LlavaForConditionalGeneration",
        inputs="llava",
    ),
    "encodec": Family(
        "EncodecConfig",
        {"hidden_size": 16, "num_filters": 4, "upsampling_ratios": [2, 2], "codebook_size": 16}
        | {"codebook_dim": 16, "num_lstm_layers": 1, "target_bandwidths": [1.5]}
        | {"sampling_rate": 800},
        inputs="audio",
    ),
    "recurrent_gemma": Family(
        "RecurrentGemmaConfig",
        {k: v for k, v in DECODER.items() if k != "max_position_embeddings"}
        | {"num_key_value_heads": 4, "lru_width": D, "attention_window_size": 8}
        | {"block_types": ["recurrent", "attention"], "head_dim": 8},
        "AutoModelForCausalLM",
    ),
}

# families no issue named, predicted against the real run (fp32 and bf16 autocast)
PREDICTION_FAMILIES: dict[str, Family] = {
    "qwen2": Family("Qwen2Config", DECODER, "AutoModelForCausalLM"),
    "gpt_neox": Family(
        "GPTNeoXConfig",
        {k: v for k, v in DECODER.items() if k != "num_key_value_heads"},
        "AutoModelForCausalLM",
    ),
    "t5": Family(
        "T5Config",
        {"d_model": D, "d_kv": 8, "d_ff": 48, "num_layers": 1, "num_decoder_layers": 1}
        | {"num_heads": 4, "vocab_size": V, "pad_token_id": 0, "eos_token_id": 1},
        "AutoModelForSeq2SeqLM",
        inputs="seq2seq",
    ),
    "vit": Family(
        "ViTConfig",
        {"hidden_size": D, "num_hidden_layers": 2, "num_attention_heads": 4}
        | {"intermediate_size": 64, "image_size": 32, "patch_size": 8},
        inputs="pixels",
    ),
    "roberta": Family(
        "RobertaConfig",
        {"hidden_size": D, "num_hidden_layers": 2, "num_attention_heads": 4}
        | {"intermediate_size": 64, "vocab_size": V, "max_position_embeddings": 64}
        | {"pad_token_id": 0, "bos_token_id": 0, "eos_token_id": 0},
        "AutoModelForMaskedLM",
    ),
}
# GPT-2 (dropout 0.1 everywhere by default: its SDPA takes dropout_p in training)
GPT2 = Family(
    "GPT2Config",
    {"n_embd": D, "n_layer": 2, "n_head": 4, "n_positions": 64, "vocab_size": V}
    | {"bos_token_id": 0, "eos_token_id": 0},
    "AutoModelForCausalLM",
)


def build_family(name: str) -> tuple[nn.Module, Callable[[], dict[str, torch.Tensor]]]:
    """(model, inputs factory) of one family; a KeyError names the known families."""
    if name not in FAMILIES:
        raise KeyError(f"unknown family {name!r}; known: {sorted(FAMILIES)}")
    family = FAMILIES[name]
    return family.build(), family.make_inputs

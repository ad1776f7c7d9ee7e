"""Is the analysis complete on the model families people bring? A survey, not a test.

Run: ``python benchmarks/survey_hf.py [--markdown] [NAME ...]``. Builds each family with small
dimensions, random weights and no download: the transformers config classes listed here
(only the keys each knows) and the hand-written configs of ``integrations/hf_families.py``
(named in lower case: ``dbrx``, ``mamba2``, ...). Per family it reports, with no user code:
the status of ``crawl_module``'s module MACs, and the status of ``measure_flops``' tensor-
product share for one forward under no_grad and for a forward + backward in train mode,
with every uncounted operator (forward / training) and its call count. A family whose tiny
config does not build or run prints ERROR with the reason (a survey gap, not a counting
result). ``--markdown`` prints the table docs/models-and-inputs.md records, and its totals.
"""

from __future__ import annotations

import argparse
import inspect
import warnings
from typing import Any

import torch

from torchscan_stages import crawl_module
from torchscan_stages.analysis.operators import measure_flops
from torchscan_stages.integrations.hf_models import build_hf_model

SMALL = {
    **dict.fromkeys(("hidden_size", "d_model", "n_embd"), 32),
    **dict.fromkeys(("num_hidden_layers", "num_layers", "n_layer"), 2),
    **dict.fromkeys(("encoder_layers", "decoder_layers"), 1),
    **dict.fromkeys(
        ("num_attention_heads", "n_head", "encoder_attention_heads", "decoder_attention_heads"), 4
    ),
    **dict.fromkeys(("intermediate_size", "encoder_ffn_dim", "decoder_ffn_dim", "d_ff"), 48),
    **dict.fromkeys(("moe_intermediate_size", "shared_expert_intermediate_size"), 16),
    **dict.fromkeys(("num_experts", "num_local_experts"), 4),
    **dict.fromkeys(("pad_token_id", "bos_token_id", "eos_token_id", "decoder_start_token_id"), 0),
    "num_key_value_heads": 2,
    "num_experts_per_tok": 2,
    "head_dim": 8,
    "vocab_size": 64,
    "max_position_embeddings": 64,
    "num_channels": 3,
    "image_size": 64,
    "patch_size": 8,
}
FAMILIES = [
    "GPT2Config",
    "BertConfig",
    "LlamaConfig",
    "MistralConfig",
    "MixtralConfig",
    "Qwen2MoeConfig",
    "Qwen3Config",
    "Qwen3MoeConfig",
    "GptOssConfig",
    "Gemma2Config",
    "Gemma3TextConfig",
    "Phi3Config",
    "PhimoeConfig",
    "FalconConfig",
    "GPTNeoXConfig",
    "OPTConfig",
    "BloomConfig",
    "MptConfig",
    "OlmoeConfig",
    "GraniteMoeConfig",
    "JetMoeConfig",
    "Llama4TextConfig",
    "FalconH1Config",
    "ModernBertConfig",
    "BartConfig",
    "T5Config",
    "LEDConfig",
    "RobertaConfig",
    "DistilBertConfig",
    "AlbertConfig",
    "ElectraConfig",
    "DebertaV2Config",
    "XLNetConfig",
    "LongformerConfig",
    "BigBirdConfig",
    "FNetConfig",
    "EsmConfig",
    "ViTConfig",
    "DeiTConfig",
    "BeitConfig",
    "Dinov2Config",
    "CLIPVisionConfig",
    "SiglipVisionConfig",
    "DPTConfig",
    "ResNetConfig",
    "RegNetConfig",
    "MobileNetV2Config",
    "EfficientNetConfig",
    "PoolFormerConfig",
    "CvtConfig",
    "FocalNetConfig",
    "MobileViTConfig",
    "Wav2Vec2Config",
    "HubertConfig",
    "SEWConfig",
    "Data2VecAudioConfig",
    "MambaConfig",
    "RwkvConfig",
]


def _build(name: str) -> torch.nn.Module:
    import transformers

    known = set(getattr(transformers, name)().to_dict())
    config = {key: value for key, value in SMALL.items() if key in known}
    try:
        return build_hf_model(name, **config)
    except ValueError as error:  # no SDPA path for this family: its eager attention
        if "does not support an attention" not in str(error):
            raise
        return build_hf_model(name, attn_implementation=None, **config)


def _inputs(model: torch.nn.Module) -> dict[str, torch.Tensor]:
    params = inspect.signature(model.forward).parameters
    generator = torch.Generator().manual_seed(0)
    if "pixel_values" in params and "input_ids" not in params:
        size = getattr(model.config, "image_size", 64)
        size = size if isinstance(size, int) else size[0]
        channels = getattr(model.config, "num_channels", 3)
        return {"pixel_values": torch.randn(1, channels, size, size, generator=generator)}
    if "input_values" in params:
        return {"input_values": torch.randn(1, 4000, generator=generator)}
    ids = torch.randint(1, 64, (1, 8), generator=generator)
    if "decoder_input_ids" in params:
        return {"input_ids": ids, "decoder_input_ids": ids}
    return {"input_ids": ids}


def _first_float(output: Any) -> torch.Tensor:
    values = output if isinstance(output, tuple) else output.values()
    return next(v for v in values if isinstance(v, torch.Tensor) and v.is_floating_point())


def _build_any(name: str) -> tuple[torch.nn.Module, dict[str, torch.Tensor]]:
    from torchscan_stages.integrations.hf_families import FAMILIES as NAMED

    if name in NAMED:
        family = NAMED[name]
        return family.build(), family.make_inputs()
    model = _build(name)
    return model, _inputs(model)


def _gaps(report: Any) -> list[tuple[str | None, int | None]]:
    return [(d.operator, d.count) for d in report.diagnostics if d.code == "uncounted_operator"]


def survey(name: str) -> tuple[str, str, str, str, str]:
    """(family, module MACs status, forward products, training products, uncounted ops)."""
    try:
        model, inputs = _build_any(name)
        macs = crawl_module(model, kwargs=inputs).totals.macs.status
        with torch.no_grad():
            forward = measure_flops(lambda: model(**inputs))
        model.train()
        training = measure_flops(lambda: _first_float(model(**inputs)).sum().backward())
    except Exception as error:  # a survey gap: the tiny config did not build or run
        return name, "ERROR", f"{type(error).__name__}: {str(error).splitlines()[0][:80]}", "", ""

    def products(report: Any) -> str:
        return report.product_flops.status if report.product_flops else "not recorded"

    gaps = _gaps(forward) + _gaps(training)
    return name, macs, products(forward), products(training), str(gaps) if gaps else ""


def main() -> None:
    from torchscan_stages.integrations.hf_families import FAMILIES as NAMED

    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("names", nargs="*", default=[*FAMILIES, *NAMED])
    parser.add_argument("--markdown", action="store_true")
    options = parser.parse_args()
    warnings.simplefilter("ignore")
    from transformers.utils import logging

    logging.set_verbosity_error()
    torch.set_num_threads(1)
    rows = []
    if options.markdown:
        print("| family | module MACs | forward products | training products | uncounted |")
        print("| --- | --- | --- | --- | --- |")
    for name in options.names:
        row = survey(name)
        rows.append(row)
        if options.markdown:
            print("| " + " | ".join(cell.replace("|", "/") for cell in row) + " |", flush=True)
        else:
            print(
                f"{row[0]:28s} MACs {row[1]:9s} forward {row[2]:9s} training {row[3]:9s} {row[4]}",
                flush=True,
            )
    ran = [r for r in rows if r[1] != "ERROR"]
    complete = {
        "module MACs": sum(r[1] == "complete" for r in ran),
        "forward products": sum(r[2] == "complete" for r in ran),
        "training products": sum(r[3] == "complete" for r in ran),
    }
    summary = ", ".join(f"{k} complete on {v}/{len(ran)}" for k, v in complete.items())
    print(f"\n{len(ran)} of {len(rows)} families built and ran; {summary}")


if __name__ == "__main__":
    main()

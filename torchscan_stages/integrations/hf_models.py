"""Hugging Face ``transformers`` models built from a config, never downloaded.

The pipeline's ``model/`` entries and the tests build HF architectures with random,
locally initialised weights: ``build_hf_model("GPT2Config", n_layer=2, ...)``. Weights are
seeded inside a forked generator, so building a model leaves torch's global generator as
it was. Install the extra with ``pip install 'torchscan_stages[hf]'``.
"""

from __future__ import annotations

from typing import Any

import torch
from torch import nn


def _transformers() -> Any:
    try:
        import transformers
    except ImportError as error:  # pragma: no cover - the extra is installed in CI
        raise ImportError(
            "building a Hugging Face model needs the optional dependency 'transformers': "
            "pip install 'torchscan_stages[hf]'"
        ) from error
    return transformers


def _named(module: Any, name: str, argument: str) -> Any:
    value = getattr(module, name, None) if isinstance(name, str) and name else None
    if value is None:
        raise ValueError(
            f"{argument}={name!r} is not a class of transformers {module.__version__}; "
            "give a name such as 'GPT2Config' / 'AutoModelForCausalLM'"
        )
    return value


def build_hf_model(
    config_class: str,
    *,
    model_class: str = "AutoModel",
    seed: int = 0,
    attn_implementation: str | None = "sdpa",
    **config: Any,
) -> nn.Module:
    """An HF model with random weights from ``transformers.<config_class>(**config)``.

    ``model_class`` is an Auto class (``AutoModel``, ``AutoModelForCausalLM``, ...) or a
    concrete model class name (``GPT2LMHeadModel``). The model is returned in eval mode on
    the CPU. A config key the config class does not know is refused (HF would keep it
    silently as an attribute), naming the key.
    """
    transformers = _transformers()
    config_type = _named(transformers, config_class, "config_class")
    known = set(config_type().to_dict())
    unknown = sorted(set(config) - known)
    if unknown:
        raise ValueError(
            f"{config_class} has no field(s) {unknown}; check the spelling against "
            f"transformers.{config_class} (e.g. {sorted(known)[:6]} ...)"
        )
    _refuse_negative_sizes(config_class, config_type().to_dict(), config)
    hf_config = config_type(**config)
    if attn_implementation is not None:
        hf_config._attn_implementation = attn_implementation
    factory = _named(transformers, model_class, "model_class")
    expected = getattr(factory, "config_class", None)
    if isinstance(expected, type) and not isinstance(hf_config, expected):
        raise ValueError(
            f"model_class={model_class!r} is built from a {expected.__name__}, not from "
            f"config_class={config_class!r}; give a model class of that config (e.g. "
            "'AutoModel', which picks it) or the matching config class"
        )
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        try:
            if model_class.startswith("Auto"):  # AutoModel, AutoModelForCausalLM, ...
                model = factory.from_config(hf_config)
            else:
                model = factory(hf_config)
        except (ValueError, KeyError, AttributeError, TypeError) as error:
            message = " ".join(str(error).split())[:300]
            raise ValueError(
                f"model_class={model_class!r} cannot be built from config_class="
                f"{config_class!r} ({type(error).__name__}: {message})"
            ) from None
    return model.eval()


def _refuse_negative_sizes(
    config_class: str, defaults: dict[str, Any], config: dict[str, Any]
) -> None:
    """A negative value for a field whose default is a count (an int >= 0): HF builds a
    model anyway (``n_layer=-1`` gives ``range(-1)``, no blocks), so refuse it here."""
    for key, value in config.items():
        default = defaults.get(key)
        if type(default) is int and default >= 0 and type(value) is int and value < 0:
            raise ValueError(
                f"{config_class}.{key} must be >= 0 (its default is {default}), got {value}"
            )


def token_inputs(
    *, batch_size: int, seq_len: int, vocab_size: int, seed: int = 0
) -> dict[str, torch.Tensor]:
    """``input_ids`` (int64, uniform over the vocabulary) and an all-ones ``attention_mask``."""
    for name, value, least in (("batch_size", batch_size, 0), ("seq_len", seq_len, 0),
                               ("vocab_size", vocab_size, 1)):  # fmt: skip
        if type(value) is not int or value < least:
            raise ValueError(f"token_inputs: {name} must be an int >= {least}, got {value!r}")
    generator = torch.Generator().manual_seed(seed)
    input_ids = torch.randint(0, vocab_size, (batch_size, seq_len), generator=generator)
    return {"input_ids": input_ids, "attention_mask": torch.ones_like(input_ids)}

"""The small quantized models that the crawl tests (tests/analysis/test_quantized.py) and the
prediction tests (tests/predict/test_resident_quantized.py) both use, built in one place so
the two suites' storage figures (928 bytes for the int8 MLP) are about the same model."""

from __future__ import annotations

import warnings

import torch
from torch import nn


def quantize(model: nn.Module, spec: object, qconfig: object = None) -> nn.Module:
    """``quantize_dynamic`` to int8 over ``spec`` (layer types or names), or every Linear
    with ``qconfig`` when one is given (per-channel), without torch.ao's deprecation notices."""
    from torch.ao import quantization

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # torch.ao's deprecation notices
        if qconfig is not None:
            return quantization.quantize_dynamic(model, {nn.Linear: qconfig})
        return quantization.quantize_dynamic(model, spec, dtype=torch.qint8)


def mlp() -> nn.Module:
    """Linear(16, 32), ReLU, Linear(32, 8), seeded: 768 weights and 40 biases."""
    torch.manual_seed(0)
    return nn.Sequential(nn.Linear(16, 32), nn.ReLU(), nn.Linear(32, 8))

"""Register the built-in handlers for transformers' classes the first time a crawl meets one.

The package never imports ``transformers`` itself: a model whose modules come from it has
already imported it, so loading ``integrations.hf_handlers`` then costs no new dependency.
Each transformers class is resolved once, by its family (see that module); the handler goes
into the one registry, where ``custom_modules`` still wins. A user's subclass of one of
transformers' classes (``class MyAttention(LlamaAttention)``) is resolved through its
bases, so it gets the family handler even when its parent class never runs in the model.
"""

from __future__ import annotations

import importlib
from typing import Any

from torch import nn

_module: list[Any] = []
_from_transformers: dict[type, bool] = {}  # per class: does any base come from transformers?


def _derives_from_transformers(module_type: type) -> bool:
    found = _from_transformers.get(module_type)
    if found is None:
        found = any(c.__module__.startswith("transformers.") for c in module_type.__mro__)
        _from_transformers[module_type] = found
    return found


def register_for(module: nn.Module) -> None:
    """Register the family handler of ``module``'s class when it is, or derives from, one of
    transformers' classes."""
    if not _derives_from_transformers(type(module)):
        return
    if not _module:
        _module.append(importlib.import_module("torchscan_stages.integrations.hf_handlers"))
    _module[0].register_transformers_class(module)

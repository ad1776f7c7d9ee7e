"""Register the built-in handlers for transformers' classes the first time a crawl meets one.

The package never imports ``transformers`` itself: a model whose modules come from it has
already imported it, so loading ``integrations.hf_handlers`` then costs no new dependency.
Each transformers class is resolved once, by its family (see that module); the handler goes
into the one registry, where ``custom_modules`` still wins.
"""

from __future__ import annotations

import importlib
from typing import Any

from torch import nn

_module: list[Any] = []


def register_for(module: nn.Module) -> None:
    """Register the family handler of ``module``'s class when it is one of transformers'."""
    if not type(module).__module__.startswith("transformers."):
        return
    if not _module:
        _module.append(importlib.import_module("torchscan_stages.integrations.hf_handlers"))
    _module[0].register_transformers_class(module)

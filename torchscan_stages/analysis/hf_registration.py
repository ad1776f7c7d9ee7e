"""Register the built-in handlers for transformers' classes the first time a crawl meets one.

The package never imports ``transformers`` itself: a model whose modules come from it has
already imported it, so loading ``integrations.hf_handlers`` then costs no new dependency.
"""

from __future__ import annotations

import importlib

_loaded = [False]


def register_for(module_type: type) -> None:
    """Load the transformers handlers when ``module_type`` is one of transformers' classes."""
    if _loaded[0] or not module_type.__module__.startswith("transformers."):
        return
    _loaded[0] = True
    importlib.import_module("torchscan_stages.integrations.hf_handlers")

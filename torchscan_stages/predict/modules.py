"""The innermost running module, named by its full dotted path from the outermost module.

Built on ``analysis.operators._ModuleStack`` (forward hooks, and gradient hooks that follow
the backward pass), with two differences a memory prediction needs:

* every descendant is named when its outermost ancestor first runs, so a block inside a
  ``ModuleList`` is ``Decoder.blocks.0``, not a second root;
* no gradient hook is registered while the backward pass runs. A checkpointed block re-runs
  its forward inside backward; hooks on those recomputed tensors would keep their graph (and
  its saved tensors) alive, and the prediction would count memory the real run frees.
"""

from __future__ import annotations

from typing import Any

import torch

from ..analysis.operators import _ModuleStack


def in_backward() -> bool:
    """True while the autograd engine runs a backward pass in this thread."""
    return bool(torch._C._current_graph_task_id() != -1)


class QualifiedModuleStack(_ModuleStack):
    """``_ModuleStack`` with full paths and no gradient hooks during backward."""

    def _name(self, module: torch.nn.Module) -> str:
        key = id(module)
        if key in self._seen:
            return self._names[key]
        name = self._names.get(key)
        if name is None:
            name = self._names[key] = type(module).__name__
            self._alive.append(module)
        for path, sub in module.named_modules(prefix=name):
            sub_key = id(sub)
            if sub_key not in self._names:
                self._names[sub_key] = path
                self._alive.append(sub)
            self._seen.add(sub_key)
        return name

    def _pre_hook(self, module: torch.nn.Module, inputs: Any) -> None:
        if in_backward():
            self.stack.append(self._name(module))
            return
        super()._pre_hook(module, inputs)

    def _post_hook(self, module: torch.nn.Module, inputs: Any, output: Any) -> None:
        if in_backward():
            self._pop(self._name(module))
            return
        super()._post_hook(module, inputs, output)

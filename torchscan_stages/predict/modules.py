"""The innermost running module, named by its full dotted path from the outermost module.

Built on ``analysis.operators.ModuleStack`` (forward hooks, and gradient hooks that follow
the backward pass), with two differences a memory prediction needs:

* every descendant is named when its outermost ancestor first runs, so a block inside a
  ``ModuleList`` is ``Decoder.blocks.0``, not a second root;
* no gradient hook is registered while the backward pass runs. A checkpointed block re-runs
  its forward inside backward; hooks on those recomputed tensors would keep their graph (and
  its saved tensors) alive, and the prediction would count memory the real run frees;
* the gradient hooks hold no autograd node. torch's ``register_multi_grad_hook`` ("all"
  mode) keeps every hooked tensor's ``grad_fn`` in its closure, which the node's own hook
  table holds: a cycle through C++ that no collector breaks, so a graph the real run drops
  during the forward (Encodec's encoder, whose output only feeds an ``argmin``) stayed
  alive with its saved tensors until the prediction ended (1.64x Encodec's measured peak).
  Here each tensor gets a plain hook and ``fn`` runs on the first gradient that arrives in
  a backward pass ("any" mode), which needs no node.
"""

from __future__ import annotations

import functools
import weakref
from collections.abc import Callable
from typing import Any

import torch

from ..analysis.operators import ModuleStack


def in_backward() -> bool:
    """True while the autograd engine runs a backward pass in this thread."""
    return bool(torch._C._current_graph_task_id() != -1)


class _Handles:
    """The hooks of one module call, removed together."""

    __slots__ = ("handles",)

    def __init__(self, handles: list[Any]) -> None:
        self.handles = handles

    def remove(self) -> None:
        for handle in self.handles:
            handle.remove()


class QualifiedModuleStack(ModuleStack):
    """``ModuleStack`` with full paths and no gradient hooks during backward."""

    def __init__(self) -> None:
        super().__init__()
        self._refs: dict[int, weakref.ref[torch.nn.Module]] = {}

    def _remember(self, module: torch.nn.Module, name: str) -> None:
        """Name a module without keeping it alive: a workload that drops a model frees its
        parameters, and the prediction must see that. The name goes when the module does,
        so a new module reusing its id is named afresh."""
        key = id(module)
        self._names[key] = name
        self._refs[key] = weakref.ref(module, functools.partial(self._forget, key))

    def _forget(self, key: int, _reference: object) -> None:
        self._names.pop(key, None)
        self._seen.discard(key)
        self._refs.pop(key, None)

    def _name(self, module: torch.nn.Module) -> str:
        key = id(module)
        if key in self._seen:
            return self._names[key]
        name = self._names.get(key)
        if name is None:
            name = type(module).__name__
            self._remember(module, name)
        for path, sub in module.named_modules(prefix=name):
            sub_key = id(sub)
            if sub_key not in self._names:
                self._remember(sub, path)
            self._seen.add(sub_key)
        return name

    def __exit__(self, *exc: object) -> None:
        super().__exit__(*exc)
        self._refs.clear()

    def _gradient_hook(self, tensors: list[torch.Tensor], fn: Callable[..., None]) -> Any:
        """``fn`` on the first gradient of ``tensors`` per backward pass, holding no node."""
        ran: set[int] = set()

        def hook(grad: Any) -> None:
            task = torch._C._current_graph_task_id()
            if task not in ran:
                ran.add(task)
                fn(grad)

        return _Handles([tensor.register_hook(hook) for tensor in tensors])

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

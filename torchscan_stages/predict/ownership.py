"""Who owns a storage at the peak: parameters, buffers, gradients, optimizer state.

Global registration hooks see every module that registers a parameter or buffer and every
optimizer that steps while the prediction runs, so ownership is read from the live objects
at the moment of the peak (a ``.to()`` or a fresh ``.grad`` is seen as it is then). All
hooks are removed on exit, also when the workload raises.
"""

from __future__ import annotations

import weakref
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import torch

from .parallelism import ParallelSeen

CATEGORIES = (
    "parameters",
    "buffers",
    "gradients",
    "optimizer_state",
    "activations",
    "temporaries",
    "other",
)


@dataclass(slots=True)
class Owned:
    """Storage keys (``id`` of the storage object) of each owned category at one moment."""

    category: dict[int, str] = field(default_factory=dict)
    owner: dict[int, Any] = field(default_factory=dict)  # module object or "optimizer"
    host_only: set[int] = field(default_factory=set)  # optimizer step counters on the host
    masters: set[int] = field(default_factory=set)  # optimizer-updated tensors no module owns


def _key(tensor: Any) -> int | None:
    if not isinstance(tensor, torch.Tensor):
        return None
    local = getattr(tensor, "_local_tensor", None)  # a DTensor: its memory is the local shard
    if isinstance(local, torch.Tensor):
        tensor = local
    try:
        return id(tensor.untyped_storage())
    except (RuntimeError, NotImplementedError, TypeError):
        return None


class Ownership:
    """Collects modules and optimizers seen during the workload; classifies on demand."""

    def __init__(self) -> None:
        self._modules: weakref.WeakSet[torch.nn.Module] = weakref.WeakSet()
        self._optimizers: weakref.WeakSet[torch.optim.Optimizer] = weakref.WeakSet()
        self._handles: list[Any] = []
        self.in_step = 0
        self.on_step_begin: Callable[[torch.optim.Optimizer], None] | None = None
        self.on_step_end: Callable[[torch.optim.Optimizer], None] | None = None
        self.name_of: Callable[[torch.nn.Module], str] | None = None
        # storage key -> (category, owner name): remembered when a module registers or runs,
        # so a model the workload drops right after the peak is still classified (its
        # storages die after the module itself); the tracker forgets a key when it is freed
        self.labels: dict[int, tuple[str, str]] = {}
        self.parallel = ParallelSeen()  # collectives, subclasses, parallel-package classes

    def _label(self, module: torch.nn.Module, name: str) -> None:
        for tensors, category in ((module._parameters, "parameters"), (module._buffers, "buffers")):
            for tensor in tensors.values():
                key = _key(tensor)
                if key is not None:
                    self.labels[key] = (category, name)

    def _registered(self, module: torch.nn.Module, *_: Any) -> None:
        self._modules.add(module)
        self.parallel.note_object(module)
        self._label(module, type(module).__name__)

    def _module_seen(self, module: torch.nn.Module, *_: Any) -> None:
        self._modules.add(module)
        self._label(module, self.name_of(module) if self.name_of else type(module).__name__)

    def _step_pre(self, optimizer: torch.optim.Optimizer, *_: Any) -> None:
        self._optimizers.add(optimizer)
        self.parallel.note_object(optimizer)
        self.in_step += 1
        if self.in_step == 1 and self.on_step_begin is not None:
            self.on_step_begin(optimizer)

    def _step_post(self, optimizer: torch.optim.Optimizer, *_: Any) -> None:
        self.in_step = max(self.in_step - 1, 0)
        if self.on_step_end is not None:
            self.on_step_end(optimizer)

    def __enter__(self) -> Ownership:
        from torch.nn.modules import module as module_hooks
        from torch.optim import optimizer as optimizer_hooks

        try:
            self._handles += [
                module_hooks.register_module_parameter_registration_hook(self._registered),
                module_hooks.register_module_buffer_registration_hook(self._registered),
                module_hooks.register_module_forward_pre_hook(self._module_seen),
                optimizer_hooks.register_optimizer_step_pre_hook(self._step_pre),
                optimizer_hooks.register_optimizer_step_post_hook(self._step_post),
            ]
        except BaseException:
            self.__exit__()
            raise
        return self

    def __exit__(self, *exc: object) -> None:
        for handle in self._handles:
            handle.remove()
        self._handles.clear()
        self.labels.clear()
        self.in_step = 0

    def grad_owners(self) -> dict[int, Any]:
        """Storage key -> owner (module, or "optimizer" for a master copy) of each gradient.

        Read only at a safe moment (inside an operator, or in a hook): a storage-free
        callback can fire while a ``.grad`` setter tears the old gradient down, and reading
        that ``.grad`` then crashes the interpreter.
        """
        owners: dict[int, Any] = {}
        weights: set[int] = set()
        for module in list(self._modules):
            for param in module._parameters.values():
                if param is None:
                    continue
                weights.add(id(param))
                key = _key(param.grad)
                if key is not None:
                    owners.setdefault(key, module)
        for optimizer in list(self._optimizers):
            for group in optimizer.param_groups:
                for param in group["params"]:
                    key = _key(param.grad) if id(param) not in weights else None
                    if key is not None:
                        owners.setdefault(key, "optimizer")
        return owners

    def snapshot(
        self,
        *,
        host_step_counters: bool,
        grads: dict[int, Any] | None = None,
        owned: Owned | None = None,
    ) -> Owned:
        """Current owners of parameter, buffer, gradient and optimizer-state storages.

        ``host_step_counters``: an optimizer's scalar ``step`` tensors live in host memory on
        an accelerator unless the group is ``capturable`` or ``fused``; when the prediction
        models an accelerator from CPU fake tensors they are marked host-only. ``grads``:
        :meth:`grad_owners` read earlier, for a snapshot taken inside a free callback.
        ``owned``: storages a subclass classified first (FSDP shards); they keep their category.
        """
        owned = Owned() if owned is None else owned
        for module in list(self._modules):
            for param in module._parameters.values():
                self._mark(owned, param, "parameters", module)
            for buffer in module._buffers.values():
                self._mark(owned, buffer, "buffers", module)
        for grad_key, owner in (self.grad_owners() if grads is None else grads).items():
            if grad_key not in owned.category:
                owned.category[grad_key] = "gradients"
                owned.owner[grad_key] = owner
        for optimizer in list(self._optimizers):
            self._mark_masters(owned, optimizer)
            host = self._host_steps(optimizer) if host_step_counters else set()
            for owner_param, state in optimizer.state.items():
                for name, tensor in state.items():
                    key = _key(tensor)
                    if key is None:
                        continue
                    owned.category.setdefault(key, "optimizer_state")
                    owned.owner.setdefault(key, "optimizer")
                    if name == "step" and id(owner_param) in host:
                        owned.host_only.add(key)
        return owned

    @staticmethod
    def _mark_masters(owned: Owned, optimizer: torch.optim.Optimizer) -> None:
        """Tensors the optimizer updates that no module owns: master copies (mixed precision).

        They count as optimizer state, as in the ZeRO paper's 16 bytes per parameter (bf16
        weights and gradients, fp32 master weights and Adam moments); their ``.grad`` is
        among the gradients. Module parameters were marked first and keep their category.
        """
        for group in optimizer.param_groups:
            for param in group["params"]:
                key = _key(param)
                if key is not None and key not in owned.category:
                    owned.category[key] = "optimizer_state"
                    owned.owner[key] = "optimizer"
                    owned.masters.add(key)

    @staticmethod
    def _host_steps(optimizer: torch.optim.Optimizer) -> set[int]:
        return {
            id(param)
            for group in optimizer.param_groups
            if not (group.get("capturable") or group.get("fused"))
            for param in group["params"]
        }

    @staticmethod
    def _mark(owned: Owned, tensor: Any, category: str, module: torch.nn.Module) -> None:
        key = _key(tensor)
        if key is not None and key not in owned.category:
            owned.category[key] = category
            owned.owner[key] = module

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
    try:
        return id(tensor.untyped_storage())
    except (RuntimeError, NotImplementedError, TypeError):
        return None


Assign = Callable[[int, str, Any, bool], None]  # (storage key, category, owner, master)


class Ownership:
    """Collects modules and optimizers seen during the workload and tells the tracker, as it
    happens, which storage took which role (parameter, buffer, gradient, optimizer state):
    each event costs only the tensors it concerns, so the cost of a run stays linear."""

    def __init__(self) -> None:
        self._modules: weakref.WeakSet[torch.nn.Module] = weakref.WeakSet()
        self._optimizers: weakref.WeakSet[torch.optim.Optimizer] = weakref.WeakSet()
        self._handles: list[Any] = []
        self.in_step = 0
        self.on_step_begin: Callable[[torch.optim.Optimizer], None] | None = None
        self.on_step_end: Callable[[torch.optim.Optimizer], None] | None = None
        self.name_of: Callable[[torch.nn.Module], str] | None = None
        self.assign: Assign | None = None  # set by the tracker
        self._named: weakref.WeakSet[torch.nn.Module] = weakref.WeakSet()
        # id(parameter) -> (parameter, owning module), both weak: tensors cannot be weak
        # keys (their == is elementwise)
        self._params: dict[int, tuple[weakref.ref[torch.Tensor], weakref.ref[torch.nn.Module]]] = {}

    def _owner(self, param: Any) -> torch.nn.Module | None:
        known = self._params.get(id(param))
        if known is None or known[0]() is not param:
            return None
        return known[1]()

    def _role(self, tensor: Any, category: str, owner: Any, master: bool = False) -> None:
        key = _key(tensor)
        if key is not None and self.assign is not None:
            self.assign(key, category, owner, master)

    def _adopt(self, module: torch.nn.Module, name: str, tensor: Any, category: str) -> None:
        """A parameter or buffer of ``module``: its role now, its gradient when it is ready."""
        if not isinstance(tensor, torch.Tensor):
            return
        self._role(tensor, category, module)
        if category != "parameters":
            return
        if self._owner(tensor) is module:
            return
        self._params[id(tensor)] = (weakref.ref(tensor), weakref.ref(module))
        if tensor.requires_grad and tensor.is_leaf:
            tensor.register_post_accumulate_grad_hook(self._grad_ready)

    def _grad_ready(self, param: torch.Tensor) -> None:
        owner = self._owner(param)
        self._role(param.grad, "gradients", owner if owner is not None else "optimizer")

    def _registered(self, module: torch.nn.Module, name: str, tensor: Any) -> None:
        self._modules.add(module)
        is_param = isinstance(tensor, torch.nn.Parameter) or name in module._parameters
        self._adopt(module, name, tensor, "parameters" if is_param else "buffers")

    def _module_seen(self, module: torch.nn.Module, *_: Any) -> None:
        if module in self._named:  # roles (re)taken under its full name once, when it first runs
            return
        self._named.add(module)
        self._modules.add(module)
        for name, param in module._parameters.items():
            self._adopt(module, name, param, "parameters")
        for name, buffer in module._buffers.items():
            self._adopt(module, name, buffer, "buffers")

    def _grads_of(self, optimizer: torch.optim.Optimizer) -> None:
        """Gradients set by hand (``master.grad = ...``) and master weights no module owns."""
        for group in optimizer.param_groups:
            for param in group["params"]:
                owner = self._owner(param)
                if owner is None:
                    self._role(param, "optimizer_state", "optimizer", True)
                self._role(param.grad, "gradients", owner if owner is not None else "optimizer")

    def scan_gradients(self) -> None:
        """Every known parameter's current ``.grad`` (at the end of a run: safe to read)."""
        for module in list(self._modules):
            for param in module._parameters.values():
                if param is not None:
                    self._role(param.grad, "gradients", module)
        for optimizer in list(self._optimizers):
            self._grads_of(optimizer)

    def _step_pre(self, optimizer: torch.optim.Optimizer, *_: Any) -> None:
        self._optimizers.add(optimizer)
        self.in_step += 1
        if self.in_step == 1:
            self._grads_of(optimizer)
        if self.in_step == 1 and self.on_step_begin is not None:
            self.on_step_begin(optimizer)

    def _step_post(self, optimizer: torch.optim.Optimizer, *_: Any) -> None:
        self.in_step = max(self.in_step - 1, 0)
        for state in optimizer.state.values():
            for tensor in state.values():
                self._role(tensor, "optimizer_state", "optimizer")
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

    def snapshot(self, *, host_step_counters: bool, grads: dict[int, Any] | None = None) -> Owned:
        """Current owners of parameter, buffer, gradient and optimizer-state storages.

        ``host_step_counters``: an optimizer's scalar ``step`` tensors live in host memory on
        an accelerator unless the group is ``capturable`` or ``fused``; when the prediction
        models an accelerator from CPU fake tensors they are marked host-only. ``grads``:
        :meth:`grad_owners` read earlier, for a snapshot taken inside a free callback.
        """
        owned = Owned()
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

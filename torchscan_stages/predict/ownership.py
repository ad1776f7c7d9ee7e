"""Who owns a storage: parameters, buffers, gradients, optimizer state, told as it happens.

Global registration hooks see every module that registers a parameter or buffer, forward
pre-hooks every module that runs (a ``.to()`` is seen at its next forward), gradient hooks
every gradient accumulated into a fake parameter, and optimizer hooks every optimizer that
steps while the prediction runs. Each event gives the tracker the roles of the tensors it
concerns (never a walk over all of them), so the prediction's cost stays linear in the
step. All hooks are removed on exit, also when the workload raises.
"""

from __future__ import annotations

import weakref
from collections.abc import Callable
from typing import Any

import torch
from torch._subclasses.fake_tensor import FakeTensor

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


# the tracker's ``assign_role(key, category, owner, owner's name, *, timed, keep, rank, master)``
Assign = Callable[..., None]


def _ignore(key: int, category: str, owner: Any, name: str, **_: Any) -> None:
    """No tracker listens (an Ownership used on its own)."""


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
        self.assign: Assign = _ignore  # set by the tracker
        # id(parameter) -> (parameter, owning module), both weak: tensors cannot be weak
        # keys (their == is elementwise); a parameter in it has its gradient hook
        self._params: dict[int, tuple[weakref.ref[torch.Tensor], weakref.ref[torch.nn.Module]]] = {}
        self.parallel = ParallelSeen()  # collectives, subclasses, parallel-package classes
        self._named: weakref.WeakSet[torch.nn.Module] = weakref.WeakSet()

    def role(self, tensor: Any, category: str, owner: Any, name: str, **how: Any) -> None:
        """Tell the tracker that ``tensor``'s storage is ``category`` of ``owner``."""
        key = _key(tensor)
        if key is not None:
            self.assign(key, category, owner, name, **how)

    def _owner(self, param: Any) -> torch.nn.Module | None:
        known = self._params.get(id(param))
        if known is None or known[0]() is not param:
            return None
        return known[1]()

    def _adopt(self, module: torch.nn.Module, name: str, param: Any) -> None:
        """A parameter of ``module``: its role now, its gradient's when it is accumulated.

        A parameter two modules share (tied weights) stays with the first that held it.
        """
        if not isinstance(param, torch.Tensor):
            return
        known = self._params.get(id(param))
        if known is not None and known[0]() is param:
            owner = known[1]()
            if owner is not None and owner is not module:
                return
            self._params[id(param)] = (known[0], weakref.ref(module))
            self.role(param, "parameters", module, name)
            return
        self.role(param, "parameters", module, name)
        self._params[id(param)] = (weakref.ref(param), weakref.ref(module))
        if param.requires_grad and param.is_leaf and isinstance(param, FakeTensor):
            # only fake parameters: a hook left on a real one would change the user's tensor
            self._handles.append(param.register_post_accumulate_grad_hook(self._grad_ready))

    def _grad_ready(self, param: torch.Tensor) -> None:
        owner = self._owner(param)
        if owner is not None:
            self.role(param.grad, "gradients", owner, self._name(owner), timed=True)

    def _name(self, module: torch.nn.Module) -> str:
        return self.name_of(module) if self.name_of else type(module).__name__

    def _param_registered(self, module: torch.nn.Module, _name: str, param: Any) -> None:
        self._modules.add(module)
        self.parallel.note_object(module)
        self._adopt(module, type(module).__name__, param)

    def _buffer_registered(self, module: torch.nn.Module, _name: str, buffer: Any) -> None:
        self._modules.add(module)
        self.parallel.note_object(module)
        self.role(buffer, "buffers", module, type(module).__name__)

    def _module_seen(self, module: torch.nn.Module, *_: Any) -> None:
        """Roles (re)taken under the module's full name each time it runs: O(its tensors).

        The first time a model runs, its descendants get their full names too (once per
        module: a submodule whose forward never runs, as ``MultiheadAttention.out_proj``,
        is named after its place, not its type)."""
        if module in self._named:
            self._own(module)
            return
        for sub in module.modules():
            if sub not in self._named:
                self._named.add(sub)
                self._own(sub)

    def _own(self, module: torch.nn.Module) -> None:
        self._modules.add(module)
        name = self._name(module)
        for param in module._parameters.values():
            self._adopt(module, name, param)
        for buffer in module._buffers.values():
            self.role(buffer, "buffers", module, name)

    def _optimizer_roles(self, optimizer: torch.optim.Optimizer, grads: bool = True) -> None:
        """Master weights no module owns, the gradients of its parameters, its state."""
        for group in optimizer.param_groups:
            for param in group["params"]:
                owner = self._owner(param)
                if owner is None:
                    self.role(param, "optimizer_state", None, "optimizer", keep=True, master=True)
                if grads:
                    holder, name = (owner, self._name(owner)) if owner else (None, "optimizer")
                    self.role(param.grad, "gradients", holder, name, keep=True)
        for state in optimizer.state.values():
            for tensor in state.values():
                self.role(tensor, "optimizer_state", None, "optimizer", keep=True)

    def scan(self) -> None:
        """Every known parameter's ``.grad`` and every optimizer's roles (at the end of a run,
        where ``.grad`` is safe to read): roles no event announced keep no timing."""
        for module in list(self._modules):
            for param in module._parameters.values():
                if param is not None:
                    self.role(param.grad, "gradients", module, self._name(module), keep=True)
        for optimizer in list(self._optimizers):
            self._optimizer_roles(optimizer)

    def _step_pre(self, optimizer: torch.optim.Optimizer, *_: Any) -> None:
        self._optimizers.add(optimizer)
        self.parallel.note_object(optimizer)
        self.in_step += 1
        if self.in_step == 1:
            self._optimizer_roles(optimizer)
        if self.in_step == 1 and self.on_step_begin is not None:
            self.on_step_begin(optimizer)

    def _step_post(self, optimizer: torch.optim.Optimizer, *_: Any) -> None:
        self.in_step = max(self.in_step - 1, 0)
        self._optimizer_roles(optimizer, grads=False)
        if self.on_step_end is not None:
            self.on_step_end(optimizer)

    def __enter__(self) -> Ownership:
        from torch.nn.modules import module as module_hooks
        from torch.optim import optimizer as optimizer_hooks

        try:
            self._handles += [
                module_hooks.register_module_parameter_registration_hook(self._param_registered),
                module_hooks.register_module_buffer_registration_hook(self._buffer_registered),
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
        self._params.clear()
        self.in_step = 0

    def host_only(self, host_step_counters: bool) -> set[int]:
        """Storage keys of optimizer ``step`` tensors that live in host memory.

        On an accelerator an optimizer's scalar ``step`` tensors stay on the host unless the
        group is ``capturable`` or ``fused``; when the prediction models an accelerator from
        CPU fake tensors (``host_step_counters``) they are host-only.
        """
        keys: set[int] = set()
        if not host_step_counters:
            return keys
        for optimizer in list(self._optimizers):
            host = self._host_steps(optimizer)
            for owner_param, state in optimizer.state.items():
                key = _key(state.get("step")) if id(owner_param) in host else None
                if key is not None:
                    keys.add(key)
        return keys

    @staticmethod
    def _host_steps(optimizer: torch.optim.Optimizer) -> set[int]:
        return {
            id(param)
            for group in optimizer.param_groups
            if not (group.get("capturable") or group.get("fused"))
            for param in group["params"]
        }

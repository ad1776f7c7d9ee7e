"""The module stack: which module is running (forward and backward), by dotted name."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch

from .._walk import named_modules
from .lookup import OwnerKey

_grad_enabled = torch.is_grad_enabled


class StackOwner:
    """An ``owner`` that is the last key of a list its caller keeps (None when empty).

    The counter reads the list itself: no Python call per operator. measure_flops passes its
    module stack this way, the crawl its call keys; the caller pushes and pops keys in place
    (never rebinds the list).
    """

    __slots__ = ("stack",)

    def __init__(self, stack: list[OwnerKey]) -> None:
        self.stack = stack

    def __call__(self) -> OwnerKey | None:
        return self.stack[-1] if self.stack else None


class ModuleStack:
    """Innermost running module, forward and (best effort) backward, by dotted name.

    Modelled on torch's ModuleTracker, but keeps an ordered stack so the innermost module is
    known in O(1). Names are ``RootClass.child.grandchild`` because ``measure_flops`` is not
    told which module is the root. Global hooks and gradient hooks are removed on exit.
    """

    def __init__(self) -> None:
        self.stack: list[str] = []
        # keyed by id(); ``_alive`` keeps each named module alive while the tracker is active,
        # so an id cannot be reused by another module (cleared on exit). ``_seen``: modules
        # whose subtree is named. (predict.modules.QualifiedModuleStack builds on both.)
        self._names: dict[int, str] = {}
        self._seen: set[int] = set()
        self._alive: list[torch.nn.Module] = []
        self._handles: list[Any] = []
        self._grad_handles: list[Any] = []
        self._callback_queued = False

    def current(self) -> str | None:
        stack = self.stack
        return stack[-1] if stack else None

    def _name(self, module: torch.nn.Module) -> str:
        """The module's dotted name; a module met first (a root) also names its subtree.

        The whole subtree is named at once (``named_modules``: a module registered twice keeps
        its first path), so modules inside containers that are never called themselves
        (``ModuleList``, ``ModuleDict``) still get their full path, and every later hook call
        is one set and one dict lookup.
        """
        key = id(module)
        names, seen = self._names, self._seen
        if key in seen:
            return names[key]
        name = names.get(key) or type(module).__name__
        alive = self._alive
        # _walk: named_modules' paths in its order, one loop instead of a generator per module
        for path, sub in named_modules(module, prefix=name):
            sub_key = id(sub)
            if sub_key not in names:
                names[sub_key] = path
                alive.append(sub)
            seen.add(sub_key)
        return name

    def _push(self, name: str) -> None:
        self.stack.append(name)

    def _pop(self, name: str) -> None:
        stack = self.stack
        if stack and stack[-1] == name:  # the common case: properly nested
            stack.pop()
            return
        for index in range(len(stack) - 1, -1, -1):
            if stack[index] == name:
                del stack[index]
                return

    def _backward_push(self, name: str) -> Callable[..., None]:
        def push(*_: Any) -> None:
            if not self._callback_queued:
                self._callback_queued = True
                torch.autograd.Variable._execution_engine.queue_callback(self._end_backward)
            self._push(name)

        return push

    def _backward_pop(self, name: str) -> Callable[..., None]:
        def pop(*_: Any) -> None:
            self._pop(name)

        return pop

    def _end_backward(self) -> None:
        self._callback_queued = False
        self.stack.clear()

    @staticmethod
    def _grad_tensors(value: Any) -> list[torch.Tensor]:
        flat, _ = torch.utils._pytree.tree_flatten(value)
        return [t for t in flat if isinstance(t, torch.Tensor) and t.requires_grad]

    def _gradient_hook(self, tensors: list[torch.Tensor], fn: Callable[..., None]) -> Any:
        """Call ``fn`` once the gradients of ``tensors`` are computed; returns the handle."""
        return torch.autograd.graph.register_multi_grad_hook(tensors, fn)

    def _pre_hook(self, module: torch.nn.Module, inputs: Any) -> None:
        # every named module is also seen (a subtree is named whole): one lookup per call
        name = self._names.get(id(module)) or self._name(module)
        self.stack.append(name)
        if _grad_enabled():
            tensors = self._grad_tensors(inputs)
            if tensors:
                self._grad_handles.append(self._gradient_hook(tensors, self._backward_pop(name)))

    def _post_hook(self, module: torch.nn.Module, inputs: Any, output: Any) -> None:
        # every named module is also seen (a subtree is named whole): one lookup per call
        name = self._names.get(id(module)) or self._name(module)
        stack = self.stack
        if stack and stack[-1] == name:  # the common case: properly nested
            stack.pop()
        else:
            self._pop(name)
        if _grad_enabled():
            tensors = self._grad_tensors(output)
            if tensors:
                self._grad_handles.append(self._gradient_hook(tensors, self._backward_push(name)))

    def __enter__(self) -> ModuleStack:
        from torch.nn.modules.module import (
            register_module_forward_hook,
            register_module_forward_pre_hook,
        )

        self._handles.append(register_module_forward_pre_hook(self._pre_hook))
        try:
            self._handles.append(register_module_forward_hook(self._post_hook, always_call=True))
        except BaseException:
            self.__exit__()
            raise
        return self

    def __exit__(self, *exc: object) -> None:
        for handle in (*self._handles, *self._grad_handles):
            handle.remove()
        self._handles.clear()
        self._grad_handles.clear()
        self.stack.clear()
        self._names.clear()
        self._seen.clear()
        self._alive.clear()

"""The crawl's two global module hooks and the call tree they record (the hot path).

One :class:`Call` per module call of the crawled model on the crawling thread: its place in
the tree, its input and output metadata and, in ``full`` mode, its handler's raw result,
taken while the call's tensors are alive. Nothing is summed here: records are built after
the forward (``layer_records``).
"""

from __future__ import annotations

import functools
import threading
from collections.abc import Mapping
from typing import Any

from torch import nn
from torch.utils._python_dispatch import _disable_current_modes

from ._walk import named_modules
from .call_tree import Call
from .handlers import (
    DECLINED,
    HANDLERS,
    CallContext,
    ModuleHandler,
    OwnOperators,
    lookup_handler,
)
from .hf_registration import register_for
from .operators import OperatorCounter
from .parametrized import inside_parametrizations, with_parametrizations
from .tensor_meta import call_meta, meta_of

_get_ident = threading.get_ident
_new_context = object.__new__
_set_dict = object.__setattr__


def _checks_structure(
    module_type: type[nn.Module], custom: Mapping[type[nn.Module], ModuleHandler]
) -> bool:
    """Does any candidate handler of ``module_type`` check each module's structure? (Then
    the lookup runs per module: two instances of a class can differ in what they hold.)"""
    for cls in module_type.__mro__:
        for handler in (custom.get(cls) if custom else None, HANDLERS.get(cls)):
            if handler is not None and handler.accepts is not None:
                return True
        if cls is nn.Module:
            break
    return False


class Recorder:
    """The crawl's two global hooks and the call tree they build (crawling thread only).

    One global pre-hook and one global hook (filtered to this model's modules and to the
    thread that crawls) instead of two handles per module: registration stays O(1), and
    PyTorch's fused fast paths, which refuse modules that carry their own hooks, run as in
    a plain forward. The hooks are the hot path: one dict lookup, one Call, one capture each.
    """

    def __init__(
        self, module: nn.Module, full: bool, custom: Mapping[type[nn.Module], ModuleHandler]
    ) -> None:
        self.full = full
        self.thread = _get_ident()
        self.calls: list[Call] = []
        self.roots: list[int] = []  # calls made outside any recorded call (the model's own)
        self.stack: list[int] = []
        self.keys: list[str] = []
        self.inclusive_depth = 0
        self.counter: OperatorCounter | None = None
        # id(module) -> [module, path, handler, is_custom, calls so far]; the entry holds the
        # module, so while this recorder lives no other object can have a key's id
        self.known: dict[int, list[Any]] = {}
        named = named_modules(module)  # _walk: the same pairs, one loop
        self.modules = [sub for _, sub in named]
        hidden = inside_parametrizations(named)  # weight_norm & co: part of their owner's call
        if hidden:
            named = [(path, sub) for path, sub in named if id(sub) not in hidden]
        if not full:  # a structure crawl looks up no handler
            self.known = {id(sub): [sub, path, None, False, 0] for path, sub in named}
            return
        first_of_type = {type(sub): sub for sub in reversed(self.modules)}
        for sub in first_of_type.values():  # before any lookup: a subclass resolves to them
            register_for(sub)  # transformers' classes: built-in handlers, lazily
        by_type: dict[type[nn.Module], tuple[ModuleHandler | None, bool]] = {}
        for path, sub in named:
            found = by_type.get(type(sub))
            if found is None:  # one MRO walk per module type, not per module
                handler = lookup_handler(type(sub), custom, sub)
                is_custom = handler is not None and any(handler is h for h in custom.values())
                found = (handler, is_custom)
                if not _checks_structure(type(sub), custom):  # else: per instance
                    by_type[type(sub)] = found
            self.known[id(sub)] = [sub, path, found[0], found[1], 0]

    def own_operators(self, key: str) -> OwnOperators | None:
        counter = self.counter
        ops = counter.live_owner_ops(key) if counter is not None else None
        if ops is None:
            return OwnOperators(0, 0, True, True, ()) if counter is not None else None
        calls = {**ops.counted_calls, **ops.uncounted_calls}
        return OwnOperators(
            ops.flops,
            ops.product_flops,
            ops.complete,
            ops.complete and not ops.unclassified_calls,
            tuple(sorted(calls)),
            calls,
        )

    def pre_hook(self, mod: nn.Module, hook_args: tuple[Any, ...]) -> None:
        entry = self.known.get(id(mod))
        if entry is None or _get_ident() != self.thread:
            return
        # _open, inline: one Python frame fewer on the hot path of every module call
        path, index = entry[1], entry[4]
        entry[4] = index + 1
        stack, calls = self.stack, self.calls
        position = len(calls)
        key = path if index == 0 else f"{path}#{index}"
        parent: int | None = None
        if stack:
            parent = top = stack[-1]
            siblings = calls[top].children
            if isinstance(siblings, list):
                siblings.append(position)
            else:
                calls[top].children = [position]
        else:
            self.roots.append(position)
        handler = entry[2]
        call = Call(mod, path, index, parent, handler, key, meta_of(hook_args))
        calls.append(call)
        stack.append(position)
        self.keys.append(key)
        if self.inclusive_depth:
            call.inside_inclusive = True
        if handler is not None and handler.inclusive:
            self.inclusive_depth += 1

    def post_hook(
        self, mod: nn.Module, hook_args: tuple[Any, ...], hook_kwargs: dict[str, Any], output: Any
    ) -> None:
        entry = self.known.get(id(mod))
        if entry is None or not self.stack or _get_ident() != self.thread:
            return
        call = self.calls[self.stack.pop()]
        self.keys.pop()
        call.output = meta_of(output)
        if hook_kwargs:
            call.inputs = call_meta(hook_args, hook_kwargs)
        handler = entry[2]
        if handler is not None:
            self._estimate(call, handler, entry[3], hook_args, hook_kwargs, output)

    def structure_pre_hook(self, mod: nn.Module, hook_args: tuple[Any, ...]) -> None:
        """``pre_hook`` for mode='structure': no handler, no operator owner (a structure crawl
        is mostly this hook)."""
        entry = self.known.get(id(mod))
        if entry is None or _get_ident() != self.thread:
            return
        path, index = entry[1], entry[4]
        entry[4] = index + 1
        stack, calls = self.stack, self.calls
        position = len(calls)
        parent: int | None = None
        if stack:
            parent = top = stack[-1]
            siblings = calls[top].children
            if isinstance(siblings, list):
                siblings.append(position)
            else:
                calls[top].children = [position]
        else:
            self.roots.append(position)
        key = path if index == 0 else f"{path}#{index}"
        calls.append(Call(mod, path, index, parent, None, key, meta_of(hook_args)))
        stack.append(position)

    def structure_post_hook(
        self, mod: nn.Module, hook_args: tuple[Any, ...], hook_kwargs: dict[str, Any], output: Any
    ) -> None:
        entry = self.known.get(id(mod))
        if entry is None or not self.stack or _get_ident() != self.thread:
            return
        call = self.calls[self.stack.pop()]
        call.output = meta_of(output)
        if hook_kwargs:
            call.inputs = call_meta(hook_args, hook_kwargs)

    def _estimate(
        self,
        call: Call,
        handler: ModuleHandler,
        is_custom: bool,
        hook_args: tuple[Any, ...],
        hook_kwargs: dict[str, Any],
        output: Any,
    ) -> None:
        """Run the call's handler while its tensors are alive (a failure is kept, not raised)."""
        if handler.inclusive:
            self.inclusive_depth -= 1
        # CallContext is a frozen dataclass: giving it its __dict__ at once skips its seven
        # object.__setattr__ calls (the same instance, equal to one built by __init__)
        context = _new_context(CallContext)
        _set_dict(
            context,
            "__dict__",
            {
                "module": call.module,
                "path": call.path,
                "call_index": call.call_index,
                "args": hook_args,
                "kwargs": hook_kwargs,
                "output": output,
                "operators": functools.partial(self.own_operators, call.key),
            },
        )
        try:
            if is_custom:  # user code: keep its tensor work out of the operator count
                with _disable_current_modes():
                    call.result = handler.callback(context)
            else:
                call.result = handler.callback(context)
            if call.result is DECLINED:  # a subclass that ran other work: no handler after all
                call.handler, call.result = None, None
                return
            if "parametrizations" in call.module._modules:
                call.result = with_parametrizations(call.result, call.module, call.path)
        except Exception as error:  # a failing estimate must not break the forward
            text = str(error).strip() or "(no message)"
            call.error = f"{type(error).__name__}: {text}"

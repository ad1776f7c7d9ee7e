"""Leave every user object as the prediction found it: the Python side of a step.

The fake run executes the user's own code, which mutates what it reaches: a GradScaler
stores its ``_scale`` and per-optimizer ``found_inf`` tensors (fake ones, under the fake
mode), an LR scheduler advances ``last_epoch`` and ``_last_lr``, a step appends its loss to a
list, bumps a ``nonlocal`` counter or a global, registers a hook. ``resident.py`` swaps the
tensors of modules and optimizers for fake copies and puts them back; this module saves,
before the run, the *containers and attributes* of everything the workload reaches (closure
cells, named globals, object ``__dict__``s, dicts, lists, sets, every submodule's dicts, the
optimizers' groups and state, tensors' ``.grad`` and ``requires_grad``) and torch's global
module hooks and the Python and NumPy random states, and puts them back afterwards, also when
the step raises or is interrupted. Saved shallowly, restored in place: a restored object is
the same object, holding the same references it held before.

Not restorable, and said in the docs: state outside Python objects (a C iterator such as a
DataLoader's worker iterator advanced by ``next()``, files written, network calls).
"""

from __future__ import annotations

import functools
import random
import sys
import types
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import torch

from ..report import Diagnostic

_MAX_OBJECTS = 50_000  # the walk stops here (and says so): a step reaching a whole program
_MAX_DEPTH = 8
_SKIP = (types.ModuleType, type, str, bytes, int, float, complex, bool, type(None))
_MODULE_HOOK_DICTS = (
    "_global_backward_pre_hooks", "_global_backward_hooks", "_global_forward_pre_hooks",
    "_global_forward_hooks", "_global_forward_hooks_always_called",
    "_global_forward_hooks_with_kwargs", "_global_buffer_registration_hooks",
    "_global_module_registration_hooks", "_global_parameter_registration_hooks",
)  # fmt: skip


def _filled(cell: types.CellType) -> bool:
    try:
        cell.cell_contents  # noqa: B018 - an empty cell raises ValueError
    except ValueError:
        return False
    return True


def _global_names(code: types.CodeType) -> set[str]:
    names = set(code.co_names)
    for const in code.co_consts:
        if isinstance(const, types.CodeType):
            names |= _global_names(const)
    return names


@dataclass(slots=True)
class UserObjects:
    """What the workload reaches, saved before the fake run; :meth:`restore` puts it back."""

    attributes: list[tuple[Any, dict[str, Any]]] = field(default_factory=list)
    mappings: list[tuple[dict[Any, Any], list[tuple[Any, Any]]]] = field(default_factory=list)
    sequences: list[tuple[list[Any], list[Any]]] = field(default_factory=list)
    sets: list[tuple[set[Any], set[Any]]] = field(default_factory=list)
    cells: list[tuple[types.CellType, bool, Any]] = field(default_factory=list)
    globals_: list[tuple[dict[str, Any], str, bool, Any]] = field(default_factory=list)
    tensors: list[tuple[torch.Tensor, bool, torch.Tensor | None]] = field(default_factory=list)
    random_states: list[Callable[[], None]] = field(default_factory=list)
    truncated: bool = False  # the walk hit _MAX_OBJECTS

    @classmethod
    def capture(cls, workload: Callable[[], Any]) -> UserObjects:
        """Save what ``workload`` can reach, torch's global module hooks and the RNGs."""
        saved = cls()
        saved._walk(workload)
        from torch.nn.modules import module as module_globals

        for name in _MODULE_HOOK_DICTS:
            hooks = getattr(module_globals, name, None)
            if isinstance(hooks, dict):
                saved.mappings.append((hooks, list(hooks.items())))
        saved._save_random_states()
        return saved

    def _save_random_states(self) -> None:
        state = random.getstate()
        self.random_states.append(lambda: random.setstate(state))
        numpy = sys.modules.get("numpy")
        if numpy is not None:
            numpy_state = numpy.random.get_state()
            self.random_states.append(lambda: numpy.random.set_state(numpy_state))
        if torch.cuda.is_available() and torch.cuda.is_initialized():
            cuda_states = torch.cuda.get_rng_state_all()
            self.random_states.append(lambda: torch.cuda.set_rng_state_all(cuda_states))

    def _walk(self, root: Any) -> None:
        seen: set[int] = set()
        frontier: list[tuple[Any, int]] = [(root, 0)]
        while frontier:
            obj, depth = frontier.pop()
            if id(obj) in seen or isinstance(obj, _SKIP):
                continue
            if len(seen) >= _MAX_OBJECTS:
                self.truncated = True
                return
            seen.add(id(obj))
            children = self._save(obj)
            if depth < _MAX_DEPTH:
                # a module's submodules are its own parts, not a step deeper into the program
                step = 0 if isinstance(obj, (torch.nn.Module, dict)) else 1
                frontier += [(child, depth + step) for child in children]

    def _save(self, obj: Any) -> list[Any]:
        """Save ``obj``'s mutable parts; return what it refers to, to walk next."""
        if isinstance(obj, torch.Tensor):
            if obj.is_leaf:
                self.tensors.append((obj, obj.requires_grad, obj.grad))
            return []  # tensors' data: resident.py's fake copies keep it unchanged
        if isinstance(obj, dict):
            self.mappings.append((obj, list(obj.items())))
            return list(obj.values())
        if isinstance(obj, list):
            self.sequences.append((obj, list(obj)))
            return list(obj)
        if isinstance(obj, set):
            self.sets.append((obj, set(obj)))
            return list(obj)
        if isinstance(obj, (tuple, frozenset)):
            return list(obj)
        if isinstance(obj, types.FunctionType):
            return self._save_function(obj)
        if isinstance(obj, types.MethodType):
            return [obj.__self__, obj.__func__]
        children: list[Any] = []
        if isinstance(obj, functools.partial):
            children += [obj.func, *obj.args, *obj.keywords.values()]
        attributes = getattr(obj, "__dict__", None)
        if isinstance(attributes, dict):
            self.attributes.append((obj, dict(attributes)))
            children += list(attributes.values())
            call = type(obj).__dict__.get("__call__")
            if isinstance(call, types.FunctionType):
                children.append(call)
        return children

    def _save_function(self, function: types.FunctionType) -> list[Any]:
        children: list[Any] = []
        for cell in function.__closure__ or ():
            filled = _filled(cell)
            value = cell.cell_contents if filled else None
            self.cells.append((cell, filled, value))
            if filled:
                children.append(value)
        children += list(function.__defaults__ or ())
        children += list((function.__kwdefaults__ or {}).values())
        namespace = function.__globals__
        for name in _global_names(function.__code__):
            present = name in namespace
            if present and isinstance(namespace[name], (types.ModuleType, type)):
                continue
            self.globals_.append((namespace, name, present, namespace.get(name)))
            if present:
                children.append(namespace[name])
        return children

    def notes(self) -> list[Diagnostic]:
        """Say when the walk stopped before it had saved everything the step reaches."""
        if not self.truncated:
            return []
        return [
            Diagnostic(
                code="user_objects_not_all_saved",
                severity="warning",
                message=f"the workload reaches more than {_MAX_OBJECTS:,} Python objects; the "
                "prediction saved and restored the first ones only, so an object beyond them that "
                "the step mutates may be left changed (its tensors are never changed)",
            )
        ]

    def restore(self) -> None:
        """Put every saved container, attribute, cell, global, ``.grad`` and RNG back."""
        for obj, attributes in self.attributes:
            current = obj.__dict__
            if current.keys() != attributes.keys() or any(
                current[k] is not v for k, v in attributes.items()
            ):
                current.clear()
                current.update(attributes)
        for mapping, items in self.mappings:
            if len(mapping) != len(items) or any(
                mapping.get(k, _MISSING) is not v for k, v in items
            ):
                mapping.clear()
                mapping.update(items)
        for sequence, values in self.sequences:
            same = len(sequence) == len(values)
            if not same or any(a is not b for a, b in zip(sequence, values, strict=True)):
                sequence[:] = values
        for members, kept in self.sets:
            if members != kept:
                members.clear()
                members.update(kept)
        for cell, filled, value in self.cells:
            _put_cell(cell, filled, value)
        for namespace, name, present, value in self.globals_:
            if present:
                namespace[name] = value
            else:
                namespace.pop(name, None)
        for tensor, requires_grad, grad in self.tensors:
            if tensor.grad is not grad:
                tensor.grad = grad
            if tensor.requires_grad != requires_grad:
                tensor.requires_grad_(requires_grad)
        for put_back in self.random_states:
            put_back()


class _Missing:
    pass


_MISSING = _Missing()


def _put_cell(cell: types.CellType, filled: bool, value: Any) -> None:
    if filled:
        if not _filled(cell) or cell.cell_contents is not value:
            cell.cell_contents = value
    elif _filled(cell):
        del cell.cell_contents

"""Tensors that exist before the step: seen through fake copies, never changed, counted once.

A workload that closes over a model, an optimizer or inputs built outside the prediction
reaches real tensors. Handing those to ``FakeTensorMode`` is not safe: operators that take
Python numbers with no fake argument (``param.mul_(1 - lr * wd)``, ``step += 1``) run for
real there, and autograd writes fake gradients into real ``.grad``. So before the workload
runs, everything it reaches (closure cells, the globals it names, bound ``self``,
``functools.partial`` arguments, attributes of those objects) is searched for modules,
optimizers and tensors; modules' parameters and buffers and optimizers' parameter groups
and state are swapped for fake copies and put back afterwards. Any other real tensor an
operator receives is replaced by its fake copy before the fake mode sees it. Scalar tensors
(AdamW's ``step``) get a *constant* fake made from a clone, so ``.item()`` reads the real
value and an in-place update changes the clone only.

Resident storages are counted once, in their own categories, beside the step's peak; they
are never new allocations (``measure_peak_memory`` counts only what the call creates).
Quantized modules' packed weights (``quantize_dynamic``), which live in TorchBind objects
and not in ``_parameters``, are parameters by their storage bytes, as ``crawl_module``'s
``parameter_bytes`` counts them (``analysis/packed_params.py``).
"""

from __future__ import annotations

import dis
import functools
import types
from collections import defaultdict
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

import torch
from torch._subclasses.fake_tensor import FakeTensor, FakeTensorMode

from ..analysis.packed_params import (
    holds_packed_weights,
    inner_storages,
    packed_tensors,
    storage_bytes,
)
from ..report import Diagnostic
from .allocator import AllocatorModel

RESIDENT_CATEGORIES = ("parameters", "buffers", "gradients", "optimizer_state", "inputs")
_MAX_OBJECTS = 20_000  # the search stops here: a closure reaching a whole program is not a step
_MAX_DEPTH = 6
_NOT_RESIDENT = frozenset({"DeviceMesh"})
_LOADS_GLOBAL = frozenset({"LOAD_GLOBAL", "LOAD_NAME", "LOAD_FROM_DICT_OR_GLOBALS"})


@dataclass(slots=True)
class Reached:
    """Modules, optimizers and free tensors a workload reaches before it runs."""

    modules: list[torch.nn.Module] = field(default_factory=list)
    optimizers: list[torch.optim.Optimizer] = field(default_factory=list)
    tensors: list[torch.Tensor] = field(default_factory=list)
    cells: list[tuple[types.CellType, torch.Tensor]] = field(default_factory=list)


def _children(obj: Any) -> Iterator[Any]:
    """What an object refers to that a step may use (no Python modules, no classes)."""
    if isinstance(obj, functools.partial):
        yield obj.func
        yield from obj.args
        yield from obj.keywords.values()
        return
    if isinstance(obj, types.MethodType):
        yield obj.__self__
        yield obj.__func__
        return
    if isinstance(obj, types.FunctionType):
        yield from (cell.cell_contents for cell in obj.__closure__ or () if _filled(cell))
        yield from obj.__defaults__ or ()
        yield from (obj.__kwdefaults__ or {}).values()
        names = _global_names(obj.__code__)
        yield from (obj.__globals__[n] for n in names if n in obj.__globals__)
        return
    if isinstance(obj, dict):
        yield from obj.values()
        return
    if isinstance(obj, (list, tuple, set, frozenset)):
        yield from obj
        return
    attributes = getattr(obj, "__dict__", None)
    if isinstance(attributes, dict) and not isinstance(obj, type):
        yield from attributes.values()
        call = type(obj).__dict__.get("__call__")
        if isinstance(call, types.FunctionType):
            yield call


def _filled(cell: types.CellType) -> bool:
    try:
        cell.cell_contents  # noqa: B018 - an empty cell raises ValueError
    except ValueError:
        return False
    return True


@functools.lru_cache(maxsize=4096)
def _global_names(code: types.CodeType) -> frozenset[str]:
    """The globals a code object (and the functions nested in it) loads: its LOAD_GLOBAL and
    LOAD_NAME names, not ``co_names`` (which holds attribute names too: ``optimizer.step()``
    would reach an unrelated global called ``step``)."""
    names = {str(op.argval) for op in dis.get_instructions(code) if op.opname in _LOADS_GLOBAL}
    for const in code.co_consts:
        if isinstance(const, types.CodeType):
            names |= _global_names(const)
    return frozenset(names)


def reach(workload: Callable[[], Any]) -> Reached:
    """Breadth-first search from the workload for what it can touch before it runs."""
    found = Reached()
    seen: set[int] = set()
    frontier: list[tuple[Any, int]] = [(workload, 0)]
    if isinstance(workload, types.FunctionType):
        for cell in workload.__closure__ or ():
            if _filled(cell) and isinstance(cell.cell_contents, torch.Tensor):
                found.cells.append((cell, cell.cell_contents))
    while frontier and len(seen) < _MAX_OBJECTS:
        obj, depth = frontier.pop(0)
        if id(obj) in seen or isinstance(obj, (types.ModuleType, type, str, bytes, int, float)):
            continue
        if type(obj).__name__ in _NOT_RESIDENT:  # the prediction's own fake-world mesh
            continue
        seen.add(id(obj))
        if isinstance(obj, torch.nn.Module):
            found.modules.append(obj)
            continue  # its parameters and buffers are swapped whole
        if isinstance(obj, torch.optim.Optimizer):
            found.optimizers.append(obj)
            continue
        if isinstance(obj, torch.Tensor):
            found.tensors.append(obj)
            continue
        if depth < _MAX_DEPTH:
            try:
                frontier += [(child, depth + 1) for child in _children(obj)]
            except (TypeError, RuntimeError, KeyError, AttributeError):
                continue  # an object that refuses to be walked: its tensors convert lazily
    return found


def _plain(tensor: torch.Tensor) -> bool:
    """A real tensor of torch's own types: the only kind a fake copy stands in for (a
    ``Parameter`` whose class is ``Parameter`` also when it wraps a plain tensor)."""
    return type(tensor) in (torch.Tensor, torch.nn.Parameter) and not isinstance(tensor, FakeTensor)


class Residents:
    """Fake copies of real tensors, their resident bytes by category, and the restore list."""

    def __init__(self, mode: FakeTensorMode, allocator: AllocatorModel) -> None:
        self.mode = mode
        self.allocator = allocator
        self._fakes: dict[int, tuple[torch.Tensor, torch.Tensor]] = {}  # id(real) -> (real, fake)
        self.storages: dict[int, tuple[str, int, Any]] = {}  # fake storage id -> category, bytes
        self._undo: list[Callable[[], None]] = []
        self._leaf_grads: dict[int, tuple[torch.Tensor, torch.Tensor | None]] = {}
        self._swapped: set[int] = set()
        self.packed_modules: list[str] = []  # class names of quantized modules counted by value
        self.packed_bytes = 0  # their packed weights' bytes, resident parameters

    # ---------------------------------------------------------------------- fake copies
    def fake_of(self, real: torch.Tensor, category: str = "inputs") -> torch.Tensor:
        """The one fake copy of ``real`` (memoised; views share their fake storage)."""
        if not _plain(real) or real.device.type == "meta":
            for inner in inner_storages(real):  # a quantized subclass (torchao) stays real;
                self.fake_of(inner, category)  # its int8/fp8 storages are counted as its own
            return real  # fake already, or a subclass (DTensor...) that does its own dispatch
        known = self._fakes.get(id(real))
        if known is not None and known[0] is real:
            return known[1]
        if real.numel() <= 1 and not real.requires_grad and real._base is None:
            # a constant fake of a clone: .item() sees the real value, writes hit the clone
            converter = self.mode.fake_tensor_converter
            fake = converter.from_real_tensor(self.mode, real.detach().clone(), make_constant=True)
        else:
            fake = self.mode.from_tensor(real)
            if real.requires_grad and real.is_leaf:
                self._leaf_grads.setdefault(id(real), (real, real.grad))
        self._fakes[id(real)] = (real, fake)
        self._count(fake, category)
        if isinstance(real, torch.nn.Parameter) and real.grad is not None:
            fake.grad = self.fake_of(real.grad, "gradients")
        return fake

    def _count(self, fake: torch.Tensor, category: str) -> None:
        storage = fake.untyped_storage()
        if id(storage) not in self.storages:
            nbytes = self.allocator.rounded(storage.nbytes())
            self.storages[id(storage)] = (category, nbytes, storage)

    def _count_packed(self, module: torch.nn.Module) -> None:
        """A quantized module's packed weights and biases, as frozen parameters, by their
        bytes plus a per-channel tensor's scales and zero points (once per module: a module
        is swapped once). They stay real (the quantized operators read them through
        TorchBind, which no fake copy reaches); the unpacked copies are not kept."""
        self.packed_modules.append(type(module).__name__)
        for tensor in packed_tensors(module):
            extra = storage_bytes(tensor) - tensor.numel() * tensor.element_size()
            self.packed_bytes += self.allocator.rounded(tensor.untyped_storage().nbytes()) + extra

    def notes(self) -> list[Diagnostic]:
        """Say how packed quantized weights were counted, when some were."""
        if not self.packed_modules:
            return []
        kinds = ", ".join(sorted(set(self.packed_modules)))
        return [
            Diagnostic(
                code="packed_weights_by_value",
                severity="info",
                metric="resident_bytes",
                count=len(self.packed_modules),
                message=f"{len(self.packed_modules)} quantized module(s) ({kinds}) keep packed "
                "weights in the quantized backend's buffers, not torch storages; they are "
                "resident parameters by their values' storage bytes (1 per int8 weight, "
                "per-channel scales and zero points, the float bias), the figure "
                "crawl_module's parameter_bytes gives; the backend's packing overhead (block "
                "padding, column offsets) is not included",
            )
        ]

    def by_category(self) -> dict[str, int]:
        """Resident bytes per category, each storage once (after the host-counter rule)."""
        totals = dict.fromkeys(RESIDENT_CATEGORIES, 0)
        totals["parameters"] = self.packed_bytes
        for category, nbytes, _ in self.storages.values():
            totals[category] += nbytes
        return totals

    # ---------------------------------------------------------------------------- swaps
    def swap(self, reached: Reached) -> None:
        """Put fake copies where the workload will look; :meth:`restore` undoes it."""
        for module in reached.modules:
            for sub in module.modules():
                self._swap_module(sub)
        for optimizer in reached.optimizers:
            self._swap_optimizer(optimizer)
        for tensor in reached.tensors:
            self.fake_of(tensor)
        for cell, tensor in reached.cells:
            cell.cell_contents = self.fake_of(tensor)
            self._undo.append(functools.partial(setattr, cell, "cell_contents", tensor))

    def _swap_module(self, module: torch.nn.Module) -> None:
        if id(module) in self._swapped:
            return
        self._swapped.add(id(module))
        parameters, buffers, training = (
            dict(module._parameters),
            dict(module._buffers),
            module.training,
        )
        for name, param in parameters.items():
            if param is not None:
                module._parameters[name] = self.fake_of(param, "parameters")  # type: ignore[assignment]
        for name, buffer in buffers.items():
            if buffer is not None:
                module._buffers[name] = self.fake_of(buffer, "buffers")
        if holds_packed_weights(module):
            self._count_packed(module)

        def undo() -> None:
            module._parameters.clear()
            module._parameters.update(parameters)
            module._buffers.clear()
            module._buffers.update(buffers)
            module.training = training

        self._undo.append(undo)

    def _swap_optimizer(self, optimizer: torch.optim.Optimizer) -> None:
        groups, state = optimizer.param_groups, optimizer.state
        optimizer.param_groups = [
            dict(group, params=[self.fake_of(p, "optimizer_state") for p in group["params"]])
            for group in groups
        ]
        # on an accelerator a non-capturable, non-fused group keeps `step` in host memory
        host = {
            id(p)
            for group in groups
            if self.allocator.device_type != "cpu"
            and not (group.get("capturable") or group.get("fused"))
            for p in group["params"]
        }
        fake_state: defaultdict[Any, Any] = defaultdict(dict)
        for param, entries in state.items():
            fake_param = (
                self.fake_of(param, "optimizer_state") if isinstance(param, torch.Tensor) else param
            )
            fake_state[fake_param] = {}
            for key, value in entries.items():
                if isinstance(value, torch.Tensor):
                    value = self.fake_of(value, "optimizer_state")
                    if key == "step" and value.dim() == 0 and id(param) in host:
                        storage = value.untyped_storage()
                        self.storages[id(storage)] = ("optimizer_state", 0, storage)
                fake_state[fake_param][key] = value
        optimizer.state = fake_state

        def undo() -> None:
            optimizer.param_groups, optimizer.state = groups, state

        self._undo.append(undo)

    def grew_gradients(self) -> bool:
        """Whether a resident leaf that had no ``.grad`` holds one now (on its fake copy): a
        step that only accumulates gradients leaves them for the next call."""
        for real, grad in self._leaf_grads.values():
            known = self._fakes.get(id(real))
            if grad is None and known is not None and known[1].grad is not None:
                return True
        return False

    def restore(self) -> None:
        """Put every real object back, also the ``.grad`` autograd wrote onto a real leaf."""
        while self._undo:
            self._undo.pop()()
        self._swapped.clear()
        for real, grad in self._leaf_grads.values():
            if real.grad is not grad:
                real.grad = grad
        self._leaf_grads.clear()

    def convert(self, value: Any) -> Any:
        """``value`` with every real tensor replaced by its fake copy (for one operator)."""
        if isinstance(value, torch.Tensor) and _plain(value):
            return self.fake_of(value)
        return value


@dataclass(frozen=True, slots=True)
class TorchGlobals:
    """torch's process-wide settings a workload may change; a prediction puts them back."""

    rng: torch.Tensor
    default_dtype: torch.dtype
    default_device: torch.device
    grad_enabled: bool
    deterministic: bool
    threads: int

    @classmethod
    def capture(cls) -> TorchGlobals:
        return cls(
            rng=torch.get_rng_state(),
            default_dtype=torch.get_default_dtype(),
            default_device=torch.get_default_device(),
            grad_enabled=torch.is_grad_enabled(),
            deterministic=torch.are_deterministic_algorithms_enabled(),
            threads=torch.get_num_threads(),
        )

    def restore(self) -> None:
        torch.set_rng_state(self.rng)
        torch.set_default_dtype(self.default_dtype)
        if torch.get_default_device() != self.default_device:
            cpu = self.default_device == torch.device("cpu")
            torch.set_default_device(None if cpu else self.default_device)
        torch.set_grad_enabled(self.grad_enabled)
        torch.use_deterministic_algorithms(self.deterministic)
        if torch.get_num_threads() != self.threads:
            torch.set_num_threads(self.threads)

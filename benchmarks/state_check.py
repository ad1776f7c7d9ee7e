"""Was the model (and torch's global state) left exactly as found? Snapshot, call, diff.

Covers per module: training flag, every hook dict (forward/pre/backward/state-dict hooks,
compared by handle id and function identity), ``__dict__`` keys (attributes added or removed),
parameters and buffers (names, object identity, requires_grad, exact values). Globally: the
module-level global hooks, grad/inference mode, thread count, dispatch and function-mode
stacks, the MHA fast-path flag, default dtype, the CPU RNG state and the identity of every
callable in ``torch``, ``torch.nn.functional`` and ``torch.Tensor`` (tools that patch them).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import torch

# torch rebinds a few of its own callables (e.g. torch.manual_seed) the first time
# torch._dynamo is imported, which FlopCounterMode and others do lazily. Import it now so
# that one-time rebinding is never reported as a tool's leftover.
import torch._dynamo
import torch.nn.functional as F
from torch import nn
from torch.nn.modules import module as _module_mod

_HOOK_DICTS = (
    "_forward_hooks",
    "_forward_hooks_with_kwargs",
    "_forward_hooks_always_called",
    "_forward_pre_hooks",
    "_forward_pre_hooks_with_kwargs",
    "_backward_hooks",
    "_backward_pre_hooks",
    "_state_dict_hooks",
    "_state_dict_pre_hooks",
    "_load_state_dict_pre_hooks",
    "_load_state_dict_post_hooks",
)
_GLOBAL_HOOKS = (
    "_global_forward_hooks",
    "_global_forward_hooks_with_kwargs",
    "_global_forward_hooks_always_called",
    "_global_forward_pre_hooks",
    "_global_backward_hooks",
    "_global_backward_pre_hooks",
    "_global_module_registration_hooks",
    "_global_parameter_registration_hooks",
    "_global_buffer_registration_hooks",
)


@dataclass
class ModelState:
    """Everything compared; tensors are cloned so later in-place changes show."""

    training: dict[str, bool]
    hooks: dict[str, dict[str, tuple[tuple[Any, int], ...]]]
    dict_keys: dict[str, frozenset[str]]
    params: dict[str, tuple[int, bool, torch.Tensor]]
    buffers: dict[str, tuple[int, torch.Tensor]]
    global_state: dict[str, Any] = field(default_factory=dict)


def _hook_items(obj: Any) -> tuple[tuple[Any, int], ...]:
    if not isinstance(obj, dict):
        return (("<not a dict>", id(obj)),)
    return tuple((key, id(value)) for key, value in obj.items())


def _callables(namespace: Any) -> dict[str, int]:
    return {k: id(v) for k, v in vars(namespace).items() if callable(v)}


def global_state() -> dict[str, Any]:
    """Torch-wide state that an analysis tool could leave changed."""
    state: dict[str, Any] = {
        f"hooks.{name}": _hook_items(getattr(_module_mod, name, {})) for name in _GLOBAL_HOOKS
    }
    state["grad_enabled"] = torch.is_grad_enabled()
    state["inference_mode"] = torch.is_inference_mode_enabled()
    state["num_threads"] = torch.get_num_threads()
    state["default_dtype"] = torch.get_default_dtype()
    state["mha_fastpath"] = torch.backends.mha.get_fastpath_enabled()
    state["mkldnn_enabled"] = torch.backends.mkldnn.enabled
    state["dispatch_stack_len"] = torch._C._len_torch_dispatch_stack()
    state["function_stack_len"] = torch._C._len_torch_function_stack()
    state["rng_state"] = torch.random.get_rng_state()
    state["callables.torch.nn.functional"] = _callables(F)
    state["callables.torch.Tensor"] = _callables(torch.Tensor)
    state["callables.torch"] = _callables(torch)
    return state


def snapshot(model: nn.Module) -> ModelState:
    """Capture the model's and torch's state (clones of parameters and buffers)."""
    named = list(model.named_modules(remove_duplicate=False))
    with torch.no_grad():
        params = {
            name: (id(p), p.requires_grad, p.detach().clone())
            for name, p in model.named_parameters(remove_duplicate=False)
        }
        buffers = {
            name: (id(b), b.detach().clone())
            for name, b in model.named_buffers(remove_duplicate=False)
        }
    return ModelState(
        training={path: m.training for path, m in named},
        hooks={path: {h: _hook_items(getattr(m, h, {})) for h in _HOOK_DICTS} for path, m in named},
        dict_keys={path: frozenset(vars(m)) for path, m in named},
        params=params,
        buffers=buffers,
        global_state=global_state(),
    )


def _name(path: str) -> str:
    return path or "<root>"


def _tensor_diff(kind: str, name: str, a: torch.Tensor, b: torch.Tensor) -> str | None:
    if a.shape != b.shape or a.dtype != b.dtype:
        return (
            f"{kind} {name}: shape/dtype {tuple(a.shape)}/{a.dtype} -> {tuple(b.shape)}/{b.dtype}"
        )
    if not torch.equal(a, b):
        return f"{kind} {name}: values changed"
    return None


def diff(before: ModelState, after: ModelState, *, limit: int = 20) -> list[str]:
    """Human-readable differences (empty list = left exactly as found), at most ``limit``."""
    out: list[str] = []
    if set(before.training) != set(after.training):
        out.append(f"module tree changed: {sorted(set(after.training) ^ set(before.training))[:5]}")
    flipped = [
        f"{_name(path)}: {flag} -> {after.training[path]}"
        for path, flag in before.training.items()
        if path in after.training and after.training[path] != flag
    ]
    if flipped:
        out.append(f"training flags changed on {len(flipped)} modules, e.g. {flipped[:3]}")
    for path, hooks in before.hooks.items():
        for kind, items in hooks.items():
            other = after.hooks.get(path, {}).get(kind, items)
            if other != items:
                out.append(f"{kind} on {_name(path)}: {len(items)} -> {len(other)} hooks")
    for path, keys in before.dict_keys.items():
        other_keys = after.dict_keys.get(path, keys)
        if other_keys != keys:
            added, removed = sorted(other_keys - keys), sorted(keys - other_keys)
            out.append(f"attributes of {_name(path)}: added {added}, removed {removed}")
    b_map: dict[str, Any]
    a_map: dict[str, Any]
    for kind, b_map, a_map in (
        ("parameter", before.params, after.params),
        ("buffer", before.buffers, after.buffers),
    ):
        if set(b_map) != set(a_map):
            added, removed = sorted(set(a_map) - set(b_map)), sorted(set(b_map) - set(a_map))
            out.append(f"{kind}s: added {added[:5]}, removed {removed[:5]}")
        for name, b_entry in b_map.items():
            a_entry = a_map.get(name)
            if a_entry is None:
                continue
            if a_entry[0] != b_entry[0]:
                out.append(f"{kind} {name}: replaced by another tensor object")
            if kind == "parameter" and a_entry[1] != b_entry[1]:
                out.append(f"parameter {name}: requires_grad {b_entry[1]} -> {a_entry[1]}")
            message = _tensor_diff(kind, name, b_entry[-1], a_entry[-1])
            if message:
                out.append(message)
    for key, value in before.global_state.items():
        now: Any = after.global_state.get(key)
        if isinstance(value, torch.Tensor):
            same = isinstance(now, torch.Tensor) and torch.equal(value, now)
        elif isinstance(value, dict):
            changed = sorted(
                k for k in set(value) | set(now or {}) if value.get(k) != (now or {}).get(k)
            )
            same = not changed
            if not same:
                out.append(f"global {key}: {changed[:5]} changed")
                continue
        else:
            same = value == now
        if not same:
            out.append(f"global {key}: {value!r:.60} -> {now!r:.60}")
    return out[:limit]

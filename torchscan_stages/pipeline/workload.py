"""Config → model, inputs, device, precision → one zero-argument workload.

Every stage, the rss child and a notebook user rebuild a stage's workload with
:func:`build_workload`, so they all measure the same thing. Threads are process-global, so
they are applied by :func:`thread_settings` (restored on exit), not by the builder.
"""

from __future__ import annotations

import contextlib
import inspect
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from ..targets import import_target
from .precision import Precision, applied
from .precision import torch_dtype as torch_dtype  # re-exported: its first home
from .schema import (
    CandidateConfig,
    ConfigError,
    DeviceConfig,
    FactoryConfig,
    PipelineConfig,
    PrecisionConfig,
)

if TYPE_CHECKING:
    import torch


def resolve_target(target: str, key: str) -> Callable[..., Any]:
    """Import ``package.module.attr`` (or ``package.module:attr``); a failure names the
    config key and the target."""
    try:
        return import_target(target)
    except ValueError as error:
        raise ConfigError(f"{key} = {target!r}: {error}") from None


def _call_factory(spec: FactoryConfig, key: str) -> Any:
    factory = resolve_target(spec.target, f"{key}._target_")
    unchecked: list[str] = []
    try:
        signature = inspect.signature(factory)
    except ValueError:  # no signature available (builtins): let the call decide
        signature = None
    if signature is not None:
        _refuse_unknown(signature, spec, key)
        try:
            signature.bind(**spec.kwargs)
        except TypeError as error:
            raise ConfigError(
                f"{key}.kwargs = {spec.kwargs!r}: {spec.target} refuses them ({error})"
            ) from None
        unchecked = _through_var_keyword(signature, spec.kwargs)
    try:
        return factory(**spec.kwargs)
    except (Exception, SystemExit) as error:  # also SystemExit: a factory must not exit
        # A factory with **kwargs checks those names itself (or not at all): say which
        # keys went through unchecked, so a typo there is found from this one line.
        hidden = f"; keys {unchecked} reach its **kwargs unchecked" if unchecked else ""
        message = " ".join(str(error).split())[:500] or repr(error)
        arguments = ", ".join(f"{name}={value!r}" for name, value in spec.kwargs.items())
        raise ConfigError(
            f"{key}.kwargs: {spec.target} refused them ({type(error).__name__}: {message}; "
            f"called as {spec.target}({arguments[:300]})){hidden}"
        ) from None


def _refuse_unknown(signature: inspect.Signature, spec: FactoryConfig, key: str) -> None:
    """A key the factory has no parameter for (and no ``**kwargs``): name it, suggest one."""
    import difflib

    parameters = signature.parameters
    if any(p.kind is inspect.Parameter.VAR_KEYWORD for p in parameters.values()):
        return
    named = [n for n, p in parameters.items() if p.kind is not inspect.Parameter.VAR_POSITIONAL]
    for name in spec.kwargs:
        if name not in named:
            close = difflib.get_close_matches(name, named, n=1, cutoff=0.6)
            hint = f" (did you mean {close[0]!r}?)" if close else ""
            raise ConfigError(
                f"{key}.kwargs.{name}: {spec.target} has no parameter {name!r}{hint}; "
                f"it takes {', '.join(named) or 'no arguments'}"
            )


def _through_var_keyword(signature: inspect.Signature, kwargs: dict[str, Any]) -> list[str]:
    """Keys that bind only to a ``**kwargs`` parameter (names the signature cannot check)."""
    parameters = signature.parameters
    if not any(p.kind is inspect.Parameter.VAR_KEYWORD for p in parameters.values()):
        return []
    named = {
        name
        for name, p in parameters.items()
        if p.kind in (inspect.Parameter.POSITIONAL_OR_KEYWORD, inspect.Parameter.KEYWORD_ONLY)
    }
    return sorted(set(kwargs) - named)


def configured_device(device: DeviceConfig) -> torch.device:
    """The configured device through the library's one resolver, as a ConfigError naming
    the config key when it is absent (never a silent fallback)."""
    from ..devices import resolve_device

    spec = device.type if device.index is None else f"{device.type}:{device.index}"
    try:
        return resolve_device(spec)
    except (TypeError, ValueError) as error:
        raise ConfigError(f"device.type = {device.type!r}: {error}") from error


@dataclass
class BuiltWorkload:
    """A zero-argument callable plus what it was built from; call it to run one forward."""

    fn: Callable[[], Any]
    model: Any
    eager_model: Any
    inputs: tuple[Any, ...]
    device: torch.device
    precision: PrecisionConfig
    work_units: float
    unit: str
    name: str
    candidate: str | None = None
    applied: Precision | None = None  # the precision routine's reading of ``precision``
    kwargs: dict[str, Any] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)

    def __call__(self) -> Any:
        return self.fn()

    def precision_context(self) -> contextlib.AbstractContextManager[Any]:
        """The autocast region of this workload (a no-op for cast precision)."""
        if self.applied is None:
            return contextlib.nullcontext()
        return self.applied.region(self.device.type)


def workload_name(cfg: PipelineConfig, precision: PrecisionConfig | None = None) -> str:
    """A configured workload's report name: ``MODEL-INPUT-PRECISION``."""
    return f"{cfg.model.name}-{cfg.input.name}-{(precision or cfg.precision).name}"


def _split_inputs(value: Any) -> tuple[tuple[Any, ...], dict[str, Any]]:
    """Positional inputs (a tuple, or one value) or keyword inputs (a dict, e.g. HF's)."""
    if isinstance(value, dict):
        return (), {str(key): item for key, item in value.items()}
    return (value if isinstance(value, tuple) else (value,)), {}


def build_model_and_inputs(
    cfg: PipelineConfig,
) -> tuple[Any, tuple[Any, ...], dict[str, Any]]:
    """Model (eval mode, CPU), positional and keyword inputs, seeded without leaking RNG."""
    import torch

    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(cfg.seed)
        model = _call_factory(cfg.model, "model")
        inputs, keyword_inputs = _split_inputs(_call_factory(cfg.input, "input"))
    if not isinstance(model, torch.nn.Module):
        raise ConfigError(
            f"model._target_ = {cfg.model.target!r}: returned {type(model).__name__}, "
            "expected a torch.nn.Module"
        )
    return model.eval(), inputs, keyword_inputs


def build_workload(
    cfg: PipelineConfig, *, candidate: CandidateConfig | None = None
) -> BuiltWorkload:
    """The baseline workload of ``cfg`` or, with ``candidate``, the optimised one.

    The workload runs one evaluation forward under ``torch.no_grad`` (or
    ``torch.inference_mode`` for such a candidate), in the configured precision, on the
    configured device, and returns the model output.
    """
    import torch

    device = configured_device(cfg.device)
    precision = cfg.precision
    if candidate is not None and candidate.precision is not None:
        precision = candidate.precision
    model, inputs, keyword_inputs = build_model_and_inputs(cfg)
    applied_precision = applied(precision)
    model = model.to(device)
    channels_last = candidate is not None and candidate.channels_last
    if applied_precision.cast:
        model = model.to(applied_precision.dtype)
    if channels_last:
        model = model.to(memory_format=torch.channels_last)

    def place(t: Any) -> Any:
        if not isinstance(t, torch.Tensor):
            return t
        t = applied_precision.tensor(t.to(device))
        if channels_last and t.dim() == 4:
            t = t.contiguous(memory_format=torch.channels_last)
        return t

    moved = tuple(place(t) for t in inputs)
    moved_kwargs = {key: place(t) for key, t in keyword_inputs.items()}
    eager_model = model
    called: Any = model
    if candidate is not None and candidate.compile is not None:
        spec = candidate.compile
        called = torch.compile(
            model,
            backend=spec.backend,
            mode=spec.mode,
            fullgraph=spec.fullgraph,
            dynamic=spec.dynamic,
        )
    inference = candidate is not None and candidate.inference_mode
    device_type = device.type

    def workload() -> Any:
        grad = torch.inference_mode() if inference else torch.no_grad()
        with grad, applied_precision.region(device_type):
            return called(*moved, **moved_kwargs)

    name = workload_name(cfg, precision)
    if candidate is not None:
        name = f"{name}+{candidate.name}"
    return BuiltWorkload(
        fn=workload,
        model=called,
        eager_model=eager_model,
        inputs=moved,
        kwargs=moved_kwargs,
        device=device,
        precision=precision,
        work_units=cfg.input.work_units,
        unit=cfg.input.unit,
        name=name,
        candidate=candidate.name if candidate is not None else None,
        applied=applied_precision,
    )


@contextlib.contextmanager
def thread_settings(threads: int) -> Iterator[None]:
    """Set torch's intra-op threads for a measurement and restore them afterwards."""
    import torch

    check_threads(threads)
    before = torch.get_num_threads()
    torch.set_num_threads(threads)
    try:
        yield
    finally:
        torch.set_num_threads(before)


def usable_cpus() -> int:
    """Logical CPUs this process may run on (its affinity mask where the OS has one)."""
    import os

    if hasattr(os, "sched_getaffinity"):
        return len(os.sched_getaffinity(0))
    return os.cpu_count() or 1


def check_threads(threads: int) -> None:
    """``threads`` no higher than this host can run: more intra-op threads than CPUs measure
    oversubscription, and a value such as 2**31 reaches torch as an overflow."""
    limit = usable_cpus()
    if threads > limit:
        raise ConfigError(
            f"invalid config: threads = {threads}: this host can run at most {limit} "
            f"thread(s) ({limit} logical CPU(s) available to this process)"
        )

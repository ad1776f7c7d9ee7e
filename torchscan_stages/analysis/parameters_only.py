"""The report of a model crawled without input: its parameters, nothing that needs a forward.

``crawl_module(model)`` / ``summary(model)`` with no ``input_shape``, ``args`` or ``kwargs``
(torchinfo's ``summary(model)``): one record per module in ``named_modules()`` order (each
module once, call_index 0), with its own parameters, trainable/frozen split, buffers and
shared tensors counted once; the model's totals of the same. No forward runs, so it works
for a model without ``forward`` (a ``ModuleList``, a bag of parameters) and changes nothing.
Every input-dependent number (module FLOPs, MACs, DMAs, receptive field, operator FLOPs,
shapes) is ``unavailable``, said once by a ``no_input`` diagnostic.
"""

from __future__ import annotations

from torch import nn

from ..provenance import build_provenance
from ..report import AnalysisReport, Diagnostic, MetricResult, ValueMeta
from ._walk import named_modules
from .call_tree import Call
from .handlers import SCOPE
from .layer_records import Mode, build
from .parametrized import inside_parametrizations
from .totals import lazy_diagnostic, lazy_paths, model_totals

NOT_RUN = ValueMeta(kind="other", type_name="no input")
NO_INPUT = Diagnostic(
    code="no_input",
    severity="info",
    metric="module_flops,macs,dmas,receptive_field,operator_flops",
    message="no input given (input_shape, args or kwargs): a parameters-only report, one record "
    "per module with its parameters and buffers; module FLOPs, MACs, DMAs, receptive field, "
    "operator FLOPs and shapes need one forward call and are unavailable (give input_shape, "
    "or args/kwargs, to measure them)",
)


def _calls(module: nn.Module) -> list[Call]:
    """One Call per module (never run), each nested under its nearest ancestor path."""
    named = named_modules(module)
    hidden = inside_parametrizations(named)  # weight_norm & co: counted by their owner
    index: dict[str, int] = {}
    calls: list[Call] = []
    for path, sub in named:
        if id(sub) in hidden:
            continue
        parent, ancestor = None, path
        while ancestor and parent is None:
            ancestor = ancestor.rpartition(".")[0]
            parent = index.get(ancestor)
        index[path] = len(calls)
        calls.append(Call(sub, path, 0, parent, None, path, NOT_RUN))
    return calls


def parameters_only(module: nn.Module, mode: Mode) -> AnalysisReport:
    """The parameters-only report of ``module`` (nothing runs, nothing is changed)."""
    calls = _calls(module)
    built = build(calls, "structure", None, False)  # every record's metrics unavailable
    modules = list(module.modules())
    lazy = lazy_paths(module, modules)
    operator_total = MetricResult.unavailable(unit="FLOPs", scope=SCOPE, method="operator_dispatch")
    diagnostics = [NO_INPUT]
    lazy_note = lazy_diagnostic(*lazy)
    if lazy_note is not None:
        diagnostics.append(lazy_note)
    return AnalysisReport(
        provenance=build_provenance(),
        model_type=type(module).__name__,
        mode=mode,
        inputs=NOT_RUN,
        layers=built.records,
        totals=model_totals(modules, built, [], operator_total, lazy),
        operator_flops=None,
        conventions={},
        diagnostics=diagnostics,
    )

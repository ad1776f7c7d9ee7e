"""``generation_cost``: one counted ``generate`` run, split into prefill and decode steps.

An LLM's generation is a sequence of forward calls of the same model: the first reads the
prompt (prefill), each later one reads the one token the step before produced (decode),
with the keys and values of earlier tokens in a cache. Serving cost questions are per
phase: how many FLOPs does the prompt cost, how many each output token, how many weight and
cache bytes a decode step reads. This module answers them from *one* counted run of the
user's own generate call (a view of ``measure_flops``' count, not a re-estimate): the
operator counter files every operator under the index of the model's forward call it ran
in (``forward[i]``; operators outside any call, such as logits processing, sampling and
the stopping criteria, under ``outside``), and ``generation_reads`` records what each call
read. Call 0 is the prefill; calls 1.. are decode steps.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, replace
from typing import Any

from torch import nn

from .._gc import gc_paused
from ..analysis.operators import OperatorCounter, OwnerOps, StackOwner, classify_custom_mapping
from ..report import Diagnostic, FlopReport, MetricResult
from ..workloads import eager_compiled_code
from .generation_reads import CallReads, CallRecord, expert_field, weight_bytes

METHOD_FLOPS = "operator_dispatch"
METHOD_READS = "forward_call_hooks"


@dataclass(frozen=True)
class ForwardCallCost:
    """One forward call of the model inside the generate run (0: prefill, then decode)."""

    index: int
    input_tokens: int | None  # tokens per sequence this call took in (1 for a cached decode)
    flops: MetricResult
    product_flops: MetricResult
    weight_bytes: MetricResult
    kv_cache_bytes: MetricResult
    recurrent_state_bytes: MetricResult  # linear-attention / Mamba layers' state, read too


@dataclass(frozen=True)
class GenerationCost:
    """Prefill against decode, from one counted generate call.

    ``total`` is the whole call's count (what ``measure_flops`` gives for the same call):
    the forward calls' FLOPs plus ``outside_flops``. The per-token figures are means over
    the decode steps, per output token: a step makes one token for each of the
    ``batch_size`` sequences, so a step's weight bytes are shared by that many tokens.
    """

    batch_size: int | None
    prompt_tokens: int | None
    calls: tuple[ForwardCallCost, ...]
    total: MetricResult
    outside_flops: MetricResult
    prefill_flops: MetricResult
    decode_flops_per_token: MetricResult
    weight_bytes_per_token: MetricResult
    kv_cache_bytes_per_token: MetricResult
    diagnostics: tuple[Diagnostic, ...]
    flops_report: FlopReport

    @property
    def prefill(self) -> ForwardCallCost:
        return self.calls[0]

    @property
    def decode_steps(self) -> tuple[ForwardCallCost, ...]:
        return self.calls[1:]


def generation_cost(
    model: nn.Module,
    workload: Callable[[], Any],
    *,
    custom_mapping: Mapping[Any, Callable[..., int]] | None = None,
    name: str | None = None,
) -> GenerationCost:
    """Count ``workload()`` (e.g. ``lambda: model.generate(**inputs, max_new_tokens=32)``)
    once and split it by ``model``'s forward calls: call 0 the prefill, the rest decode.

    ``model`` is the module whose calls are the steps (the causal LM ``generate`` calls).
    The model and torch's global state are left as found; an error from the workload
    propagates after every hook is removed.
    """
    if not isinstance(model, nn.Module):
        raise TypeError(f"model must be an nn.Module (the causal LM), got {type(model).__name__}")
    if not callable(workload):
        raise TypeError(f"workload must be a zero-argument callable, got {type(workload).__name__}")
    custom = classify_custom_mapping(custom_mapping)
    stack: list[str] = []
    counter = OperatorCounter(custom, owner=StackOwner(stack))
    reads = CallReads(model, stack)
    with gc_paused(), eager_compiled_code() as compiled_notes, reads, counter:
        workload()
    if not reads.records:
        raise ValueError(
            f"workload never called the model ({type(model).__name__}): pass the module whose "
            "forward generate calls, e.g. generation_cost(model, lambda: model.generate(...))"
        )
    report = counter.report(name=name, scope="workload")
    report = report.model_copy(update={"by_module": {}})
    report.diagnostics[:0] = compiled_notes
    cost = _assemble(model, counter.owner_ops(), reads.records, report)
    if getattr(getattr(model, "config", None), "is_encoder_decoder", False) is True:
        note = Diagnostic(
            code="encoder_outside_forward_calls",
            severity="info",
            metric="generation_cost",
            message="an encoder-decoder: generate runs the encoder once before the first "
            "forward call, so its FLOPs are in outside_flops; calls are decoder steps",
        )
        cost = replace(cost, diagnostics=(*cost.diagnostics, note))
    return cost


def _flops(ops: OwnerOps | None, scope: str) -> tuple[MetricResult, MetricResult]:
    """(total, products) of one owner; an owner that dispatched nothing did 0."""
    ops = ops or OwnerOps()
    build = MetricResult.complete if ops.complete else MetricResult.partial
    known_share = ops.complete and not ops.unclassified_calls
    products_build = MetricResult.complete if known_share else MetricResult.partial
    return (
        build(ops.flops, unit="FLOPs", scope=scope, method=METHOD_FLOPS),
        products_build(ops.product_flops, unit="FLOPs", scope=scope, method=METHOD_FLOPS),
    )


def _call_cost(
    index: int, record: CallRecord, ops: OwnerOps | None, experts: str | None
) -> ForwardCallCost:
    scope = "prefill" if index == 0 else "decode_step"
    flops, products = _flops(ops, scope)
    if experts is None:
        weights = MetricResult.complete(
            weight_bytes(record), unit="bytes", scope=scope, method=METHOD_READS
        )
    else:
        weights = MetricResult.unavailable(unit="bytes", scope=scope, method=METHOD_READS)
    held = record.cache
    if held.kv is None:
        cache = MetricResult.unavailable(unit="bytes", scope=scope, method=METHOD_READS)
        state = MetricResult.unavailable(unit="bytes", scope=scope, method=METHOD_READS)
    else:
        cache = MetricResult.complete(held.kv, unit="bytes", scope=scope, method=METHOD_READS)
        state = MetricResult.complete(held.state, unit="bytes", scope=scope, method=METHOD_READS)
    return ForwardCallCost(index, record.tokens, flops, products, weights, cache, state)


def _per_token(
    steps: tuple[ForwardCallCost, ...], field: str, batch: int | None, unit: str
) -> MetricResult:
    """The mean of ``field`` over the decode steps, per output token (step / batch)."""
    scope = "decode_mean_per_output_token"
    results: list[MetricResult] = [getattr(step, field) for step in steps]
    if not results or not batch or any(r.status == "unavailable" for r in results):
        return MetricResult.unavailable(unit=unit, scope=scope, method=_method(field))
    mean = sum(r.known_value or 0 for r in results) / (len(results) * batch)
    if all(r.is_complete for r in results):
        return MetricResult.complete(mean, unit=unit, scope=scope, method=_method(field))
    return MetricResult.partial(mean, unit=unit, scope=scope, method=_method(field))


def _method(field: str) -> str:
    return METHOD_FLOPS if field == "flops" else METHOD_READS


def _assemble(
    model: nn.Module,
    owners: dict[str | None, OwnerOps],
    records: list[CallRecord],
    report: FlopReport,
) -> GenerationCost:
    experts = expert_field(model)
    calls = tuple(
        _call_cost(i, record, owners.get(f"forward[{i}]"), experts)
        for i, record in enumerate(records)
    )
    first = records[0]
    outside, _ = _flops(owners.get(None), "generate_outside_forward_calls")
    steps = calls[1:]
    return GenerationCost(
        batch_size=first.batch,
        prompt_tokens=first.tokens,
        calls=calls,
        total=report.total,
        outside_flops=outside,
        prefill_flops=calls[0].flops,
        decode_flops_per_token=_per_token(steps, "flops", first.batch, "FLOPs/token"),
        weight_bytes_per_token=_per_token(steps, "weight_bytes", first.batch, "bytes/token"),
        kv_cache_bytes_per_token=_per_token(steps, "kv_cache_bytes", first.batch, "bytes/token"),
        diagnostics=tuple(_diagnostics(records, experts, report)),
        flops_report=report,
    )


def _diagnostics(
    records: list[CallRecord], experts: str | None, report: FlopReport
) -> list[Diagnostic]:
    found = list(report.diagnostics)
    if len(records) == 1:
        found.append(
            Diagnostic(
                code="no_decode_steps",
                severity="warning",
                metric="generation_cost",
                message="the model ran once (the prefill): no decode step to average; "
                "generate at least 2 new tokens (max_new_tokens >= 2)",
            )
        )
    if experts is not None:
        found.append(
            Diagnostic(
                code="routed_expert_weights",
                severity="warning",
                metric="weight_bytes",
                message=f"a mixture of experts ({experts}): a step reads only its routed "
                "experts' weights, which the modules that ran cannot tell, so weight bytes "
                "are unavailable",
            )
        )
    recomputed = [i for i, r in enumerate(records) if i and r.cache.kv == 0 and (r.tokens or 0) > 1]
    if recomputed:
        found.append(
            Diagnostic(
                code="decode_without_cache",
                severity="info",
                metric="kv_cache_bytes",
                count=len(recomputed),
                message=f"{len(recomputed)} decode call(s) (from forward[{recomputed[0]}]) took "
                "more than 1 token per sequence with an empty cache: each recomputes its "
                "prefix (no KV cache, use_cache=False?), so it reads no cache",
            )
        )
    unreadable = [(i, r.cache.note) for i, r in enumerate(records) if r.cache.kv is None]
    if unreadable:
        first, note = unreadable[0]
        found.append(
            Diagnostic(
                code="kv_cache_unreadable",
                severity="warning",
                metric="kv_cache_bytes",
                count=len(unreadable),
                message=f"{len(unreadable)} call(s) (from forward[{first}]): {note}; their "
                "KV-cache bytes are unavailable",
            )
        )
    return found

"""One adapter per tool: FLOPs in one convention, the tool's own completeness signal, wall time.

Convention: FLOPs with a multiply-add = 2 FLOPs. Tools that report MACs / multiply-adds
(fvcore, ptflops, thop, torchinfo) are multiplied by 2; tools that report FLOPs are taken as
they are. This project reports both conventions, so its rows give the reference's (tensor
products: ``crawl_module``'s MACs x 2, ``measure_flops``'s ``product_flops``) and keep its
count of all work (pointwise, normalisation, softmax included) in ``extra["all_work"]``.
``complete`` is what the *tool* says: True/False where it has a signal (a status, a
list of skipped operators, a printed "zero-op"/"no rule" warning about a leaf module), None
where it has none (it never says when it skipped something).

Every adapter calls its tool the way its documentation shows for one input tensor ``x``;
none adds ``model.eval()`` or ``torch.no_grad()`` unless the tool's own usage requires the
caller to (FlopCounterMode and measure_flops count whatever the caller runs, so the caller's
inference workload is ``no_grad``). Peers are imported lazily: they exist only in the
benchmark venv.
"""

from __future__ import annotations

import contextlib
import importlib.metadata as md
import io
import re
import time
import warnings
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import torch
from torch import nn
from torch.nn.attention import SDPBackend, sdpa_kernel
from torch.nn.modules.module import (
    register_module_forward_hook,
    register_module_forward_pre_hook,
)
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils.flop_counter import FlopCounterMode


@dataclass
class PeerResult:
    """One tool call. ``flops`` is None when the tool produced no number."""

    flops: float | None
    complete: bool | None
    wall_s: float
    detail: str = ""
    extra: dict[str, Any] = field(default_factory=dict)


@dataclass
class Peer:
    name: str
    package: str  # distribution whose version is reported ("" = this project / torch)
    convention: str
    run: Callable[[nn.Module, torch.Tensor], PeerResult]
    scaling_only: bool = False
    floor: bool = False  # a mechanism with no counting: overhead context, never a "peer"


def _leaf_type_names(model: nn.Module) -> set[str]:
    return {type(m).__name__ for m in model.modules() if next(m.children(), None) is None}


@contextlib.contextmanager
def _quiet() -> Any:
    """Swallow what a tool prints (tables, warnings) so the run log stays readable."""
    buf = io.StringIO()
    with (
        contextlib.redirect_stdout(buf),
        contextlib.redirect_stderr(buf),
        warnings.catch_warnings(record=True) as caught,
    ):
        warnings.simplefilter("always")
        yield buf, caught


# ------------------------------------------------------------------------ reference


def reference_flops(model: nn.Module, x: torch.Tensor) -> dict[str, Any]:
    """torch FlopCounterMode, eval + no_grad, CPU fast paths off: MHA fast path, oneDNN, SDPA.

    Why three switches: the fused ``_transformer_encoder_layer_fwd``, ``mkldnn_rnn_layer`` and
    ``_scaled_dot_product_flash_attention_for_cpu`` kernels have no FlopCounterMode formula, so
    with them on the reference would count 0 for those layers (SDPA is forced to the math
    backend, which decomposes into counted ``bmm``). Every switch and training flag is
    restored afterwards.
    """
    flags = [(m, m.training) for m in model.modules()]
    fastpath = torch.backends.mha.get_fastpath_enabled()
    torch.backends.mha.set_fastpath_enabled(False)
    try:
        model.eval()
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # oneDNN's TF32 notice when its flags are toggled
            with (
                torch.backends.mkldnn.flags(enabled=False),
                sdpa_kernel(SDPBackend.MATH),
                torch.no_grad(),
                FlopCounterMode(display=False) as counter,
            ):
                model(x)
    finally:
        torch.backends.mha.set_fastpath_enabled(fastpath)
        for module, flag in flags:
            module.training = flag
    by_op = {str(k): int(v) for k, v in counter.get_flop_counts().get("Global", {}).items()}
    return {"flops": int(counter.get_total_flops()), "by_operator": by_op}


# ------------------------------------------------------------------------ adapters


_LAST_CPU_S: list[float] = [0.0]


def _timed(fn: Callable[[], Any]) -> tuple[Any, float]:
    """Wall seconds of the tool call; its process CPU seconds are kept for last_cpu_s()."""
    cpu = time.process_time()
    start = time.perf_counter()
    out = fn()
    wall = time.perf_counter() - start
    _LAST_CPU_S[0] = time.process_time() - cpu
    return out, wall


def last_cpu_s() -> float:
    """Process CPU seconds of the last timed tool call (the region its wall_s covers): CPU
    time does not grow while other jobs hold the core, so its overhead ratio reproduces on
    a loaded host where the wall-clock one does not."""
    return _LAST_CPU_S[0]


def run_flop_counter_mode(model: nn.Module, x: torch.Tensor) -> PeerResult:
    """torch's FlopCounterMode as a user calls it (default fast paths)."""

    def call() -> int:
        with torch.no_grad(), FlopCounterMode(display=False) as counter:
            model(x)
        return int(counter.get_total_flops())

    flops, wall = _timed(call)
    return PeerResult(float(flops), None, wall, "no completeness signal")


def _metric(result: Any) -> tuple[float | None, bool | None, str]:
    """(value or lower bound, complete?, status) of a MetricResult (pydantic or dict)."""
    data = result if isinstance(result, dict) else result.model_dump()
    status = data["status"]
    number = data["value"] if status == "complete" else data.get("known_value")
    return (None if number is None else float(number)), status == "complete", status


def _all_work(result: Any) -> dict[str, Any]:
    flops, complete, status = _metric(result)
    return {"flops": flops, "complete": complete, "status": status}


def run_crawl_module(model: nn.Module, x: torch.Tensor) -> PeerResult:
    """This project: crawl_module(..., args=(x,)); totals.macs x 2 (module formulas).

    MACs x 2 is the reference's convention (products only); ``totals.module_flops`` (all
    work, bias adds, norms and activations included) is kept as ``all_work``.
    """
    from torchscan_stages.analysis.crawl import crawl_module

    report, wall = _timed(lambda: crawl_module(model, args=(x,)))
    macs, complete, status = _metric(report.totals.macs)
    op_flops, _op_complete, op_status = _metric(report.totals.operator_flops)
    codes = sorted({d.code for d in report.diagnostics})
    unsupported = sorted(
        {
            d.message.split(" has ")[0]
            for d in report.diagnostics
            if d.code == "unsupported_module" and "macs" in (d.metric or "").split(",")
        }
    )
    extra = {
        "all_work": _all_work(report.totals.module_flops),
        "operator_flops": op_flops,
        "operator_flops_status": op_status,
        "diagnostics": codes,
        "unsupported": unsupported,
    }
    if unsupported:
        status += f": {len(unsupported)} unsupported, e.g. {unsupported[0]}"
    return PeerResult(None if macs is None else 2 * macs, complete, wall, status, extra)


def run_crawl_structure(model: nn.Module, x: torch.Tensor) -> PeerResult:
    """This project: crawl_module(..., mode="structure"): shapes and parameters, no FLOPs."""
    from torchscan_stages.analysis.crawl import crawl_module

    report, wall = _timed(lambda: crawl_module(model, args=(x,), mode="structure"))
    return PeerResult(None, None, wall, f"structure only: {len(report.layers)} layer records")


def run_measure_flops(model: nn.Module, x: torch.Tensor) -> PeerResult:
    """This project: measure_flops over a no_grad forward workload (operator dispatch)."""
    from torchscan_stages.analysis.operators import measure_flops

    def workload() -> Any:
        with torch.no_grad():
            return model(x)

    report, wall = _timed(lambda: measure_flops(workload))
    flops, complete, status = _metric(report.product_flops)
    by_op = {}
    for op, count in report.by_operator.items():
        value, _, _ = _metric(count.flops)
        by_op[op] = value
    uncounted = sorted(
        d.operator or "" for d in report.diagnostics if d.code == "uncounted_operator"
    )
    extra = {"by_operator": by_op, "uncounted": uncounted, "all_work": _all_work(report.total)}
    return PeerResult(flops, complete, wall, status, extra)


class _EmptyDispatchMode(TorchDispatchMode):
    def __torch_dispatch__(
        self, func: Any, types: Any, args: tuple[Any, ...] = (), kwargs: Any = None
    ) -> Any:
        return func(*args, **(kwargs or {}))


def run_empty_dispatch(model: nn.Module, x: torch.Tensor) -> PeerResult:
    """Floor of operator-level counting: the forward under a dispatch mode that does nothing."""

    def call() -> None:
        with torch.no_grad(), _EmptyDispatchMode():
            model(x)

    _, wall = _timed(call)
    return PeerResult(None, None, wall, "floor: every operator through an empty dispatch mode")


def run_empty_hooks(model: nn.Module, x: torch.Tensor) -> PeerResult:
    """Floor of module-level counting: global pre/post forward hooks that do nothing."""

    def call() -> None:
        handles = [
            register_module_forward_pre_hook(lambda module, args: None),
            register_module_forward_hook(lambda module, args, out: None),
        ]
        try:
            with torch.no_grad():
                model(x)
        finally:
            for handle in handles:
                handle.remove()

    _, wall = _timed(call)
    return PeerResult(None, None, wall, "floor: every module call through empty global hooks")


def run_torchscan(model: nn.Module, x: torch.Tensor) -> PeerResult:
    """torchscan 0.2: crawl_module(model, args=(x,)); totals.module_flops, as it reports it."""
    import torchscan

    with _quiet():
        report, wall = _timed(lambda: torchscan.crawl_module(model, args=(x,)))
    flops, complete, status = _metric(report["totals"]["module_flops"])
    op_flops, _, op_status = _metric(report["totals"]["operator_flops"])
    macs, _, _ = _metric(report["totals"]["macs"])
    extra = {
        "operator_flops": op_flops,
        "operator_flops_status": op_status,
        "macs_x2": None if macs is None else 2 * macs,
        "diagnostics": sorted({d["code"] for d in report["diagnostics"]}),
    }
    return PeerResult(flops, complete, wall, status, extra)


def run_fvcore(model: nn.Module, x: torch.Tensor) -> PeerResult:
    """fvcore FlopCountAnalysis (jit trace); reports MACs ("flops" = multiply-adds), x2."""
    from fvcore.nn import FlopCountAnalysis

    def call() -> tuple[int, dict[str, int]]:
        analysis = FlopCountAnalysis(model, (x,))
        analysis.unsupported_ops_warnings(False).uncalled_modules_warnings(False)
        analysis.tracer_warnings("none")
        return int(analysis.total()), dict(analysis.unsupported_ops())

    with _quiet():
        (macs, skipped), wall = _timed(call)
    detail = f"skipped ops: {sorted(skipped)}" if skipped else "no skipped ops"
    return PeerResult(2.0 * macs, not skipped, wall, detail, {"unsupported_ops": skipped})


_PTFLOPS_ZERO = re.compile(r"Warning: module (\w+) is treated as a zero-op")


def run_ptflops(model: nn.Module, x: torch.Tensor) -> PeerResult:
    """ptflops get_model_complexity_info, default (pytorch) backend; MACs x2.

    Complete = it printed no "treated as a zero-op" warning (verbose=True) for a leaf type.
    """
    from ptflops import get_model_complexity_info

    with _quiet() as (buf, _):
        (macs, _params), wall = _timed(
            lambda: get_model_complexity_info(
                model,
                tuple(x.shape[1:]),
                input_constructor=lambda _res: x,
                as_strings=False,
                print_per_layer_stat=False,
                verbose=True,
                ost=buf,
            )
        )
    text = buf.getvalue()
    if macs is None:
        # ptflops catches the model's exception, prints it and returns (None, None).
        last = text.strip().splitlines()[-1:] or [""]
        return PeerResult(None, None, wall, f"returned None (caught: {last[0][:80]})")
    zero = sorted(set(_PTFLOPS_ZERO.findall(text)) & _leaf_type_names(model))
    detail = f"zero-op leaf modules: {zero}" if zero else "no zero-op warning"
    return PeerResult(2.0 * macs, not zero, wall, detail, {"zero_op_modules": zero})


_THOP_MISSING = re.compile(r"Cannot find rule for <class '([\w.]+)'>")


def run_thop(model: nn.Module, x: torch.Tensor) -> PeerResult:
    """thop profile(report_missing=True); MACs x2. Complete = no missing rule for a leaf type."""
    from thop import profile

    with _quiet() as (buf, _):
        (macs, _params), wall = _timed(lambda: profile(model, inputs=(x,), report_missing=True))
    missing = {name.rsplit(".", 1)[-1] for name in _THOP_MISSING.findall(buf.getvalue())}
    zero = sorted(missing & _leaf_type_names(model))
    detail = f"no rule for leaf modules: {zero}" if zero else "no missing rule"
    return PeerResult(2.0 * float(macs), not zero, wall, detail, {"missing_rules": zero})


def run_torchinfo(model: nn.Module, x: torch.Tensor) -> PeerResult:
    """torchinfo summary(input_data=[x], verbose=0); total_mult_adds x2; no signal."""
    from torchinfo import summary

    with _quiet():
        stats, wall = _timed(lambda: summary(model, input_data=[x], verbose=0))
    return PeerResult(2.0 * float(stats.total_mult_adds), None, wall, "no completeness signal")


PEERS: list[Peer] = [
    Peer("crawl_module", "torchscan_stages", "module formulas, MACs x 2", run_crawl_module),
    Peer(
        "measure_flops",
        "torchscan_stages",
        "operator dispatch, product_flops",
        run_measure_flops,
    ),
    Peer("crawl_module[structure]", "torchscan_stages", "no FLOPs", run_crawl_structure, True),
    Peer(
        "torch FlopCounterMode",
        "torch",
        "FLOPs (matmul/conv/attention only)",
        run_flop_counter_mode,
    ),
    Peer("torchscan 0.2", "torchscan", "module formulas, FLOPs", run_torchscan),
    Peer("fvcore", "fvcore", "MACs x 2", run_fvcore),
    Peer("ptflops", "ptflops", "MACs x 2", run_ptflops),
    Peer("thop", "thop", "MACs x 2", run_thop),
    Peer("torchinfo", "torchinfo", "mult-adds x 2", run_torchinfo),
    Peer("floor: empty dispatch mode", "", "no FLOPs", run_empty_dispatch, floor=True),
    Peer("floor: empty module hooks", "", "no FLOPs", run_empty_hooks, floor=True),
]

PROJECT_PEERS = ("crawl_module", "measure_flops", "crawl_module[structure]")
FLOORS = tuple(peer.name for peer in PEERS if peer.floor)


def versions() -> dict[str, str]:
    """Installed versions of torch, this project and every peer."""
    out: dict[str, str] = {}
    for dist in (
        "torch",
        "torchscan_stages",
        "torchscan",
        "fvcore",
        "ptflops",
        "thop",
        "torchinfo",
        "iopath",
    ):
        try:
            out[dist] = md.version(dist)
        except md.PackageNotFoundError:
            out[dist] = "not installed"
    return out

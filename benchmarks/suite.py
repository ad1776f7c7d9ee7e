"""The benchmark runner: FLOPs accuracy, overhead and state per model x tool, then latency.

Everything runs in ONE process, single-threaded (``torch.set_num_threads(1)``: the bench
machine has 2 shared cores; one thread keeps the plain forward and the tool call comparable).
Overhead = tool call process CPU time / plain ``no_grad`` forward's, measured in interleaved
rounds (plain block and tool call, order drawn at random per round), median over rounds,
spread as the IQR of the per-round ratios (see :func:`overhead_rounds`).
A plain forward is a block average (enough calls for >= 2 ms) so that
microsecond forwards are not dominated by timer noise.
"""

from __future__ import annotations

import datetime as dt
import gc
import json
import os
import platform
import random
import resource
import statistics
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import torch
from models import BenchModel, model_set, set_mixed_modes
from peers import PEERS, Peer, PeerResult, last_cpu_s, reference_flops, versions
from state_check import diff, snapshot
from torch import nn

THREADS = 1
REPEATS = {"main": 9, "scaling": 5}
QUICK_REPEATS = {"main": 2, "scaling": 1}
# A tool whose single call would exceed this many CPU seconds (predicted from its measured
# CPU time on the next smaller scaling model, linear in blocks) is not run there; the cell
# says so. CPU, not wall: a rerun on a loaded host must make the same choices.
MAX_CALL_S = 20.0
# Above this many CPU seconds, one timed call is all the overhead estimate gets.
SLOW_CALL_S = 4.0
# Per overhead cell: more rounds than ``repeats`` while the cell has taken less than this.
OVERHEAD_BUDGET_S = 1.5
OVERHEAD_MAX_ROUNDS = 41
LATENCY_MODELS = ("mlp", "token_conv", "transformer")
LATENCY_ROUNDS = 3
ADAPTIVE_MAX_RUN_S = 5.0  # = measure_latency's default max_run_time, for a like-for-like cap


def log(message: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {message}", flush=True)


def quantiles(values: list[float]) -> dict[str, float | None]:
    """Median, q1, q3 and IQR (inclusive quartiles); IQR None for fewer than 2 samples."""
    if not values:
        return {"median": None, "q1": None, "q3": None, "iqr": None}
    med = statistics.median(values)
    if len(values) < 2:
        return {"median": med, "q1": None, "q3": None, "iqr": None}
    q1, _, q3 = statistics.quantiles(values, n=4, method="inclusive")
    return {"median": med, "q1": q1, "q3": q3, "iqr": q3 - q1}


def plain_forward(model: nn.Module, x: torch.Tensor) -> Callable[[], tuple[float, float]]:
    """A timer of the plain no_grad forward: per-call (wall, process CPU) seconds over a
    >= 2 ms block."""
    with torch.no_grad():
        model(x)
        start = time.perf_counter()
        model(x)
        one = time.perf_counter() - start
    calls = max(1, min(1000, int(0.002 / max(one, 1e-7)) + 1))

    def timed() -> tuple[float, float]:
        with torch.no_grad():
            cpu = time.process_time()
            start = time.perf_counter()
            for _ in range(calls):
                model(x)
            wall = time.perf_counter() - start
            return wall / calls, (time.process_time() - cpu) / calls

    return timed


def _call(peer: Peer, model: nn.Module, x: torch.Tensor) -> tuple[PeerResult | None, str | None]:
    try:
        return peer.run(model, x), None
    except Exception as error:  # a peer failing on a model is a result, not a crash
        return (
            None,
            f"{type(error).__name__}: {str(error).splitlines()[0][:160] if str(error) else ''}",
        )


# The overhead rounds run with Python's cyclic GC off inside each timed call, collected
# before each round (timeit turns it off while timing too): a collection's cost grows with
# every object alive in the process, so with it on a cell's ratio depended on what the
# process had built before (bench_cpu_inflation.py, GC on: once the same cell 13.6 first,
# 16.5 later in one quiet process; GC off: 12.10 and 12.26). The collections count in
# OVERHEAD_BUDGET_S (about 0.15 s each with every peer loaded), so most cells run their
# minimum of rounds; gc.freeze() once per cell would make them cheap (not done: the
# committed table is this method's).
GC_OFF_WHILE_TIMING = True


@contextmanager
def _timed_region() -> Iterator[None]:
    """The cyclic GC off for one timed call (when GC_OFF_WHILE_TIMING), as it was after."""
    enabled = gc.isenabled()
    if GC_OFF_WHILE_TIMING:
        gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()


def _switches() -> int:
    """Involuntary context switches of this process so far (the host took the CPU away)."""
    return resource.getrusage(resource.RUSAGE_SELF).ru_nivcsw


def overhead_rounds(
    peer: Peer, model: nn.Module, x: torch.Tensor, repeats: int, *, seed: int
) -> dict[str, Any]:
    """Tool call against a plain forward in interleaved rounds, each side's order drawn at
    random per round (a fixed order can line up with the host's load), at least
    ``repeats`` rounds and more while the cell's time stays under OVERHEAD_BUDGET_S (up to
    OVERHEAD_MAX_ROUNDS): the ratio is each round's process CPU time of the call over the
    plain forward's per call, the cell the median of rounds with its IQR as the spread.
    Why CPU time: it does not grow while other jobs hold the core; why more rounds: a
    median of 9 moved by more than its IQR between two loaded runs."""
    plain = plain_forward(model, x)
    rng = random.Random(seed)
    plain_s: list[float] = []
    tool_s: list[float] = []
    tool_cpu_s: list[float] = []
    wall_ratios: list[float] = []
    ratios: list[float] = []
    switches: list[int] = []
    begun = time.perf_counter()
    while len(ratios) < repeats or (
        time.perf_counter() - begun < OVERHEAD_BUDGET_S and len(ratios) < OVERHEAD_MAX_ROUNDS
    ):
        # the order matters: the second of two back-to-back forwards reuses the allocator's
        # freshly freed memory, which would favour one side
        if GC_OFF_WHILE_TIMING:
            gc.collect()  # every round starts from the same heap, outside the timed calls
        before = _switches()
        if rng.random() < 0.5:
            with _timed_region():
                p, p_cpu = plain()
            with _timed_region():
                again, _ = _call(peer, model, x)
            tool_cpu = last_cpu_s()
        else:
            with _timed_region():
                again, _ = _call(peer, model, x)
            tool_cpu = last_cpu_s()
            with _timed_region():
                p, p_cpu = plain()
        if again is None:
            break
        switches.append(_switches() - before)
        plain_s.append(p)
        tool_s.append(again.wall_s)
        tool_cpu_s.append(tool_cpu)
        wall_ratios.append(again.wall_s / p)
        ratios.append(tool_cpu / p_cpu if p_cpu > 0 else again.wall_s / p)
    return {
        "repeats": len(ratios),
        "method": "process_cpu_time",  # ratio: CPU seconds of the call / of a forward
        "order": "random_per_round",
        "gc": "off_in_timed_calls" if GC_OFF_WHILE_TIMING else "on",
        "plain_forward_s": quantiles(plain_s),
        "tool_s": quantiles(tool_s),
        "tool_cpu_s": quantiles(tool_cpu_s),
        "ratio": quantiles(ratios),
        "ratios": ratios,
        "wall_ratio": quantiles(wall_ratios),
        "involuntary_switches": switches,
    }


def measure_cell(
    bm: BenchModel, peer: Peer, x: torch.Tensor, bad: torch.Tensor, repeats: int
) -> dict[str, Any]:
    """One model x tool: FLOPs, completeness, state after ok/failing call, overhead."""
    model = set_mixed_modes(bm.build())
    before = snapshot(model)
    result, error = _call(peer, model, x)
    first_cpu_s = last_cpu_s()
    ok_diff = diff(before, snapshot(model))
    cell: dict[str, Any] = {
        "model": bm.name,
        "tool": peer.name,
        "error": error,
        "flops": None if result is None else result.flops,
        "complete": None if result is None else result.complete,
        "detail": None if result is None else result.detail,
        "extra": {} if result is None else result.extra,
        "first_call_s": None if result is None else result.wall_s,
        "first_call_cpu_s": None if result is None else first_cpu_s,
        "state_after_ok": ok_diff,
    }
    if result is not None:
        if first_cpu_s > SLOW_CALL_S:  # CPU, not wall: a loaded rerun makes the same choice
            repeats = 1
        cell["overhead"] = overhead_rounds(peer, model, x, repeats, seed=len(bm.name))
    before = snapshot(model)
    bad_result, bad_error = _call(peer, model, bad)
    cell["failing_call"] = {
        "raised": bad_error,
        "returned": None if bad_result is None else (bad_result.detail or "a result"),
        "state": diff(before, snapshot(model)),
    }
    return cell


def run_accuracy(models: list[BenchModel], repeats: dict[str, int]) -> dict[str, Any]:
    references: dict[str, Any] = {}
    cells: list[dict[str, Any]] = []
    last_scaling_time: dict[str, tuple[int, float]] = {}
    for bm in models:
        x, bad = bm.make_input(), bm.make_bad_input()
        started = time.perf_counter()
        ref_model = set_mixed_modes(bm.build())
        references[bm.name] = {**reference_flops(ref_model, x), "description": bm.description}
        plain = plain_forward(ref_model, x)
        references[bm.name]["plain_forward_s"] = quantiles([plain()[0] for _ in range(3)])
        del ref_model
        for peer in PEERS:
            if peer.scaling_only and bm.family != "scaling":
                continue
            if bm.family == "scaling" and bm.blocks and peer.name in last_scaling_time:
                prev_blocks, prev_s = last_scaling_time[peer.name]
                predicted = prev_s * bm.blocks / prev_blocks
                if predicted > MAX_CALL_S:
                    cells.append(
                        {
                            "model": bm.name,
                            "tool": peer.name,
                            "skipped": f"not run: {prev_s:.1f} CPU-s measured at {prev_blocks} "
                            f"blocks predicts {predicted:.0f} CPU-s > {MAX_CALL_S:.0f} s a call",
                        }
                    )
                    log(f"{bm.name:18s} {peer.name:24s} skipped (predicted {predicted:.0f} s)")
                    continue
            cell = measure_cell(bm, peer, x, bad, repeats[bm.family])
            cells.append(cell)
            if bm.family == "scaling" and bm.blocks and cell["first_call_cpu_s"] is not None:
                # CPU seconds: a rerun on a loaded host skips the same cells
                tool_med = cell.get("overhead", {}).get("tool_cpu_s", {}).get("median")
                last_scaling_time[peer.name] = (bm.blocks, tool_med or cell["first_call_cpu_s"])
            ratio = cell.get("overhead", {}).get("ratio", {}).get("median")
            ref = references[bm.name]["flops"]
            flops = cell["flops"]
            acc = f"{flops / ref:.4f}" if flops is not None and ref else "-"
            log(
                f"{bm.name:18s} {peer.name:24s} flops/ref {acc:>8s} "
                f"complete={cell['complete']!s:5s} overhead {ratio or float('nan'):8.2f}x "
                f"state ok/fail {len(cell['state_after_ok'])}/{len(cell['failing_call']['state'])}"
                + (f" ERROR {cell['error']}" if cell["error"] else "")
            )
        log(f"{bm.name}: {time.perf_counter() - started:.1f} s")
    return {"references": references, "cells": cells}


# ------------------------------------------------------------------------------ latency


def _latency_one(method: str, workload: Callable[[], Any]) -> dict[str, Any]:
    from torch.utils.benchmark import Timer

    from torchscan_stages.measure.latency import measure_latency

    start = time.perf_counter()
    if method == "measure_latency":
        report = measure_latency(workload)
        spent = time.perf_counter() - start
        assert report.latency is not None and report.latency.stats is not None
        st = report.latency.stats
        return {
            "median_s": st.median,
            "iqr_s": st.iqr,
            "samples": st.blocks,
            "calls": st.blocks * st.calls_per_block + st.warmup_calls + st.calibration_calls + 1,
            "spent_s": spent,
            "first_call_s": report.latency.first_call.value,
            "stop_reason": st.stop_reason,
        }
    timer = Timer(stmt="fn()", globals={"fn": workload}, num_threads=THREADS)
    if method == "blocked_autorange":
        measurement = timer.blocked_autorange()
    else:
        measurement = timer.adaptive_autorange(max_run_time=ADAPTIVE_MAX_RUN_S)
    spent = time.perf_counter() - start
    return {
        "median_s": measurement.median,
        "iqr_s": measurement.iqr,
        "samples": len(measurement.times),
        "calls": len(measurement.times) * measurement.number_per_run,
        "spent_s": spent,
        "first_call_s": None,
        "stop_reason": None,
    }


LATENCY_METHODS = ("measure_latency", "blocked_autorange", "adaptive_autorange")


def run_latency(models: list[BenchModel], rounds: int) -> list[dict[str, Any]]:
    """Each method on the same workload, rounds interleaved (method order rotates)."""
    rows: list[dict[str, Any]] = []
    for bm in models:
        if bm.name not in LATENCY_MODELS:
            continue
        model = set_mixed_modes(bm.build())
        x = bm.make_input()

        def workload(model: nn.Module = model, x: torch.Tensor = x) -> Any:
            with torch.no_grad():
                return model(x)

        runs: dict[str, list[dict[str, Any]]] = {m: [] for m in LATENCY_METHODS}
        for r in range(rounds):
            order = LATENCY_METHODS[r % 3 :] + LATENCY_METHODS[: r % 3]
            for method in order:
                runs[method].append(_latency_one(method, workload))
        for method, results in runs.items():
            medians = [res["median_s"] for res in results]
            row = {
                "model": bm.name,
                "method": method,
                "rounds": results,
                "median_of_medians_s": statistics.median(medians),
                "median_iqr_s": statistics.median(res["iqr_s"] for res in results),
                "round_spread": (max(medians) - min(medians)) / statistics.median(medians),
                "spent_s": statistics.median(res["spent_s"] for res in results),
            }
            rows.append(row)
            log(
                f"latency {bm.name:12s} {method:19s} "
                f"median {row['median_of_medians_s'] * 1e3:9.4f} ms"
                f" IQR {row['median_iqr_s'] * 1e3:8.4f} ms spread {row['round_spread']:.1%}"
                f" spent {row['spent_s']:.2f} s"
            )
    return rows


# ------------------------------------------------------------------------------ driver


def machine() -> dict[str, Any]:
    from torchscan_stages.provenance import environment_info

    env = environment_info().model_dump()
    return {
        "cpu_model": env.get("cpu_model"),
        "cpu_count_logical": env.get("cpu_count_logical"),
        "cpu_count_physical": env.get("cpu_count_physical"),
        "platform": platform.platform(),
        "python": platform.python_version(),
        "torch_threads": THREADS,
        "load_average_at_start": list(os.getloadavg()),
        "psi_cpu_at_start": _psi(),
    }


def _psi() -> dict[str, float] | None:
    """/proc/pressure/cpu's "some" line (avg10, avg60 in percent; total in us), if any."""
    try:
        with open("/proc/pressure/cpu", encoding="ascii") as handle:
            fields = dict(item.split("=") for item in handle.readline().split()[1:])
    except (OSError, ValueError):
        return None
    return {key: float(value) for key, value in fields.items()}


def host_pressure(start: dict[str, float] | None, wall_s: float) -> dict[str, Any]:
    """The pressure recorded beside each table: load average now and the share of the run
    in which runnable tasks waited for a CPU (PSI some, from the totals)."""
    end = _psi()
    share = None
    if start and end and wall_s > 0:
        share = (end["total"] - start["total"]) / (wall_s * 1e6)
    return {"load_average": list(os.getloadavg()), "psi_some_share": share, "psi_end": end}


def run_suite(*, quick: bool, only: str | None, results_path: Path, doc_path: Path) -> None:
    from tables import write_doc

    torch.set_num_threads(THREADS)
    started = time.perf_counter()
    models = model_set("full")
    data: dict[str, Any] = {
        "schema": 1,
        "date": dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds"),
        "quick": quick,
        "machine": machine(),
        "versions": versions(),
        "settings": {
            "repeats": QUICK_REPEATS if quick else REPEATS,
            "max_call_s": MAX_CALL_S,
            "latency_rounds": 1 if quick else LATENCY_ROUNDS,
            "adaptive_max_run_time_s": ADAPTIVE_MAX_RUN_S,
        },
        "models": {bm.name: bm.description for bm in models},
    }
    if only in (None, "accuracy"):
        psi, begun = _psi(), time.perf_counter()
        data["accuracy"] = run_accuracy(models, QUICK_REPEATS if quick else REPEATS)
        data["accuracy_pressure"] = host_pressure(psi, time.perf_counter() - begun)
    if only in (None, "latency"):
        psi, begun = _psi(), time.perf_counter()
        data["latency"] = run_latency(models, 1 if quick else LATENCY_ROUNDS)
        data["latency_pressure"] = host_pressure(psi, time.perf_counter() - begun)
    data["machine"]["load_average_at_end"] = list(os.getloadavg())
    data["total_s"] = time.perf_counter() - started
    results_path.parent.mkdir(parents=True, exist_ok=True)
    tmp = results_path.with_suffix(".json.tmp")
    tmp.write_text(json.dumps(data, indent=1, default=str) + "\n")
    os.replace(tmp, results_path)
    write_doc(data, doc_path)
    log(f"done in {data['total_s']:.0f} s: {results_path} and {doc_path}")

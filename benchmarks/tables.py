"""Render benchmarks/results/results.json as docs/benchmarks.md (the whole file is generated).

Cells: FLOPs as ratio to the reference, with the tool's own completeness signal
(``✓`` complete, ``✗`` tool says incomplete / lower bound, ``·`` tool gives no signal);
overhead as median ratio over a plain forward with [IQR]; state as ``ok``/``CHANGED``.
The "behind" list is computed from the numbers, not written by hand.
"""

from __future__ import annotations

import os
import re
from pathlib import Path
from typing import Any

PROJECT = ("crawl_module", "measure_flops", "crawl_module[structure]")
LARGE = ("resnet50", "transformer", "scaling_1000", "scaling_5000")
TOLERANCE = 0.01


def _is_floor(tool: str) -> bool:
    return tool.startswith("floor:")


def _tools(cells: list[dict[str, Any]]) -> list[str]:
    seen: list[str] = []
    for c in cells:
        if c["tool"] not in seen:
            seen.append(c["tool"])
    return seen


def _index(cells: list[dict[str, Any]]) -> dict[tuple[str, str], dict[str, Any]]:
    return {(c["model"], c["tool"]): c for c in cells}


def _mark(complete: bool | None) -> str:
    return {True: "✓", False: "✗", None: "·"}[complete]


def _flops_cell(cell: dict[str, Any] | None, ref: float) -> str:
    if cell is None:
        return ""
    if "skipped" in cell:
        return "skipped"
    if cell.get("error"):
        return "error"
    flops = cell.get("flops")
    if flops is None:
        return "n/a" if cell["tool"] == "crawl_module[structure]" else f"none {_mark(False)}"
    if not ref:
        return f"{flops:.3g} {_mark(cell['complete'])}"
    return f"{flops / ref:.3f} {_mark(cell['complete'])}"


def _ratio(cell: dict[str, Any] | None) -> float | None:
    if not cell or "overhead" not in cell:
        return None
    value = cell["overhead"]["ratio"]["median"]
    return None if value is None else float(value)


def _quartile(cell: dict[str, Any], name: str) -> float:
    """q1/q3 of the overhead ratio; the median where a cell has one repeat."""
    ratio = cell["overhead"]["ratio"]
    value = ratio[name] if ratio[name] is not None else ratio["median"]
    return float(value)


def _overhead_verdict(ours: dict[str, Any], best: dict[str, Any]) -> str:
    """ "behind" when our whole IQR is above the best peer's, "level" when the IQRs overlap."""
    if _quartile(ours, "q1") > _quartile(best, "q3"):
        return "behind"
    if _quartile(ours, "q3") < _quartile(best, "q1"):
        return "ahead"
    return "level"


def _all_work_cell(cell: dict[str, Any] | None, ref: float) -> str:
    work = (cell or {}).get("extra", {}).get("all_work")
    if not work or work["flops"] is None or not ref:
        return ""
    return f"{work['flops'] / ref:.3f} {_mark(work['complete'])}"


def _overhead_cell(cell: dict[str, Any] | None) -> str:
    if cell is None:
        return ""
    if "skipped" in cell:
        return "skipped"
    ratio = _ratio(cell)
    if ratio is None:
        return "error" if cell.get("error") else "-"
    iqr = cell["overhead"]["ratio"]["iqr"]
    noise = f" [{iqr:.2g}]" if iqr is not None else " [1 run]"
    return f"{ratio:.3g}{noise}"


def pressure_line(pressure: dict[str, Any] | None) -> str:
    """The host pressure measured while a table's numbers were taken."""
    if not pressure:
        return "Host pressure: not recorded (results from before it was)."
    load = pressure.get("load_average") or [float("nan")]
    share = pressure.get("psi_some_share")
    psi = "n/a" if share is None else f"{share:.0%} of the run"
    return (
        f"Host pressure while measuring: 1-minute load average {load[0]:.2f} at the end, "
        f"CPU pressure (PSI some: runnable tasks waiting for a CPU) {psi}."
    )


def _overhead_basis(data: dict[str, Any]) -> str:
    """What the ratios are made of, and the pressure they were measured under."""
    cells = data.get("accuracy", {}).get("cells", [])
    on_cpu = any(c.get("overhead", {}).get("method") == "process_cpu_time" for c in cells)
    gc_off = any(c.get("overhead", {}).get("gc") == "off_in_timed_calls" for c in cells)
    basis = (
        "Ratios are of **process CPU time** (the call's CPU seconds over a plain forward's; "
        "CPU time does not count the time other jobs hold the core; how far a rerun under "
        "load reproduces is the section 'Does the overhead table reproduce under load?' "
        "below; wall-clock ratios stay in results.json as `wall_ratio`), "
        + (
            "Python's cyclic GC off inside each timed call (as timeit has it) and a full "
            "collection before each round, counted in the round budget below, so most cells "
            "ran their minimum of rounds, "
            if gc_off
            else ""
        )
        + "one ratio "
        "per round of a plain block and a tool call in an order drawn at random per round, "
        "at least 9 rounds (5 on the scaling models) and more within 1.5 s a cell, up to 41; "
        "the IQR in brackets is the spread over rounds (`1 run`: a call over 4 CPU-s, "
        "timed once). The plain forward column is wall clock, so it shows the load."
        if on_cpu
        else "Ratios are of wall-clock time (results from before CPU time was recorded)."
    )
    return basis + " " + pressure_line(data.get("accuracy_pressure"))


def _state_cell(cell: dict[str, Any] | None) -> str:
    if cell is None or "skipped" in cell:
        return ""
    ok = "ok" if not cell["state_after_ok"] else "CHANGED"
    fail = "ok" if not cell["failing_call"]["state"] else "CHANGED"
    if cell["failing_call"]["raised"] is None:
        fail += " (no error)"
    return f"{ok} / {fail}"


def _table(header: list[str], rows: list[list[str]]) -> list[str]:
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(row) + " |" for row in rows]
    return lines


def _same_ops(cell: dict[str, Any], ref: dict[str, Any]) -> str:
    """For measure_flops: its FLOPs on exactly the operators the reference counted."""
    ours = cell.get("extra", {}).get("by_operator")
    if not ours or not ref.get("by_operator"):
        return ""
    shared = [op for op in ref["by_operator"] if op in ours]
    if len(shared) != len(ref["by_operator"]):
        return ""
    mine = sum(ours[op] or 0 for op in shared)
    if abs(mine / ref["flops"] - 1) > TOLERANCE:
        return ""  # kernels differ (e.g. fused SDPA vs the reference's math bmm): no claim
    others = sorted(op for op in ours if op not in ref["by_operator"])
    return (
        f"; on the reference's own operators ({', '.join(shared)}) it gives "
        f"{mine / ref['flops']:.4f} x, the rest is {', '.join(others)}, which the reference "
        "does not count"
    )


def _behind(data: dict[str, Any]) -> list[str]:
    """Where this project's rows miss the issue's bar or trail the best peer (computed)."""
    acc = data.get("accuracy")
    if not acc:
        return []
    refs, idx = acc["references"], _index(acc["cells"])
    tools = _tools(acc["cells"])
    peers = [t for t in tools if t not in PROJECT and not _is_floor(t)]
    out: list[str] = []
    for tool in ("measure_flops", "crawl_module"):
        for model, ref in refs.items():
            cell = idx.get((model, tool))
            if not cell or "skipped" in cell:
                continue
            if cell.get("error"):
                out.append(f"`{tool}` raised on `{model}`: {cell['error']}")
                continue
            work = cell.get("extra", {}).get("all_work")
            if cell["complete"] is not True:
                out.append(f"`{tool}` is not complete on `{model}` ({cell['detail']}).")
            elif work and work["complete"] is not True:
                out.append(
                    f"`{tool}`'s count of all work is {work['status']} on `{model}`: a module "
                    "without a formula computes in its own forward (`unsupported_module`); its "
                    "products-only count above is complete."
                )
            elif ref["flops"] and abs(cell["flops"] / ref["flops"] - 1) > TOLERANCE:
                out.append(
                    f"`{tool}` on `{model}`: {cell['flops'] / ref['flops']:.3f} x the reference "
                    f"(outside ±1%){_same_ops(cell, ref)}."
                )
    for tool in PROJECT:
        dirty = [
            m
            for (m, t), c in idx.items()
            if t == tool
            and "skipped" not in c
            and (c["state_after_ok"] or c["failing_call"]["state"])
        ]
        if dirty:
            example = idx[(dirty[0], tool)]
            what = (example["state_after_ok"] or example["failing_call"]["state"])[0]
            out.append(
                f"`{tool}` did not leave everything as found on {len(dirty)} model(s), "
                f"e.g. `{dirty[0]}`: {what}"
            )
    for model in LARGE:
        if model not in refs:
            continue
        theirs = {t: _ratio(idx.get((model, t))) for t in peers}
        theirs_known = {t: r for t, r in theirs.items() if r is not None}
        if not theirs_known:
            continue
        best_tool = min(theirs_known, key=lambda t: theirs_known[t])
        best = idx[(model, best_tool)]
        floors = [
            f"`{t}` {r:.3g}x"
            for t in tools
            if _is_floor(t) and (r := _ratio(idx.get((model, t)))) is not None
        ]
        context = f" (mechanism floors on this model: {', '.join(floors)})" if floors else ""
        for tool in ("measure_flops", "crawl_module"):
            cell = idx.get((model, tool))
            ratio = _ratio(cell)
            if cell is None or ratio is None:
                continue
            verdict = _overhead_verdict(cell, best)
            if verdict == "ahead":
                continue
            where = (
                "behind: its IQR lies above the peer's"
                if verdict == "behind"
                else "level within the noise: the IQRs overlap"
            )
            out.append(
                f"Overhead on `{model}`: `{tool}` {ratio:.3g}x vs best peer `{best_tool}` "
                f"{theirs_known[best_tool]:.3g}x, {where}{context}."
            )
    return out


def render(data: dict[str, Any]) -> str:
    m, v = data["machine"], data["versions"]
    lines = [
        "# Benchmarks against the field",
        "",
        "<!-- Generated by `make bench` (benchmarks/run_all.py -> benchmarks/tables.py). "
        "Do not edit by hand; rerun. Raw numbers: benchmarks/results/results.json. -->",
        "",
        f"Run: {data['date']}{' (QUICK run: fewer repeats)' if data.get('quick') else ''}, "
        f"{data.get('total_s', 0):.0f} s in total.",
        f"Machine: {m['cpu_model']}, {m['cpu_count_logical']} logical cores "
        f"({m['platform']}), Python {m['python']}, torch threads = {m['torch_threads']}; "
        f"load average {m['load_average_at_start'][0]:.2f} at start, "
        f"{m.get('load_average_at_end', [float('nan')])[0]:.2f} at end (the machine was shared).",
        "Versions: " + ", ".join(f"{k} {val}" for k, val in v.items()) + ".",
        "",
        "How to read it, and the conventions: see `benchmarks/README.md`. In short: FLOPs are "
        "divided by the reference (torch `FlopCounterMode`, eval + no_grad, CPU fast paths "
        "off: MHA fast path, oneDNN, SDPA math backend), which counts only matmul, convolution "
        "and attention products. MAC-reporting tools are multiplied by 2; tools that also "
        "count pointwise/normalisation work land above 1. This project reports both "
        "conventions, so its rows use the reference's (`crawl_module`: `totals.macs` x 2; "
        "`measure_flops`: `product_flops`) and its count of all work has a table of its own. "
        "✓ = the tool reports its number complete, ✗ = the tool says it is incomplete (a lower "
        "bound or skipped work), · = the tool has no completeness signal.",
        "",
    ]
    acc = data.get("accuracy")
    if acc:
        refs, cells = acc["references"], acc["cells"]
        idx, tools = _index(cells), _tools(cells)
        main = [n for n in refs if not n.startswith("scaling_")]
        scaling = [n for n in refs if n.startswith("scaling_")]
        counting = [t for t in tools if not _is_floor(t)]
        lines += ["## FLOPs in the reference's convention: ratio to the reference", ""]
        header = ["model", "reference FLOPs", *[f"`{t}`" for t in counting]]
        rows = [
            [
                f"`{n}`",
                f"{refs[n]['flops']:,}",
                *[_flops_cell(idx.get((n, t)), refs[n]["flops"]) for t in counting],
            ]
            for n in main + scaling
        ]
        lines += [*_table(header, rows), ""]
        lines += [
            "## This project's count of all work: ratio to the reference",
            "",
            "Pointwise, normalisation, softmax and pooling work included (bias adds too, in "
            "`crawl_module`'s module formulas), so above 1 by design: `crawl_module` = "
            "`totals.module_flops`, `measure_flops` = `total`.",
            "",
        ]
        ours = [t for t in ("crawl_module", "measure_flops") if t in tools]
        rows = [
            [f"`{n}`", *[_all_work_cell(idx.get((n, t)), refs[n]["flops"]) for t in ours]]
            for n in main + scaling
        ]
        lines += [*_table(["model", *[f"`{t}`" for t in ours]], rows), ""]
        lines += ["Models:", ""] + [f"* `{n}`: {refs[n]['description']}" for n in refs] + [""]
        lines += [
            "## Overhead: tool call / plain no_grad forward (median [IQR] over interleaved rounds)",
            "",
            _overhead_basis(data),
            "",
            "The two `floor:` columns count nothing: they time the bare mechanism a counter is "
            "built on (every operator through an empty Python dispatch mode; every module call "
            "through empty global hooks), so an operator-level tool cannot go below the first "
            "and a module-level one below the second.",
            "",
        ]
        header = ["model", "plain forward", *[f"`{t}`" for t in tools]]
        rows = []
        for n in main + scaling:
            plain = refs[n]["plain_forward_s"]["median"]
            rows.append(
                [
                    f"`{n}`",
                    f"{plain * 1e3:.3g} ms",
                    *[_overhead_cell(idx.get((n, t))) for t in tools],
                ]
            )
        lines += [*_table(header, rows), ""]
        if scaling:
            lines += ["## Scaling: seconds per call and per block", ""]
            header = ["tool", *[f"`{n}` s/call" for n in scaling], "µs/block (largest run)"]
            rows = []
            for t in tools:
                row, per_block = [f"`{t}`"], "-"
                for n in scaling:
                    c = idx.get((n, t))
                    if c is None or "skipped" in c:
                        row.append("skipped" if c else "")
                        continue
                    sec = c.get("overhead", {}).get("tool_s", {}).get("median")
                    sec = sec if sec is not None else c.get("first_call_s")
                    row.append("error" if sec is None else f"{sec:.3g}")
                    if sec is not None:
                        per_block = f"{sec / int(n.split('_')[1]) * 1e6:.1f}"
                row.append(per_block)
                rows.append(row)
            lines += [*_table(header, rows), ""]
        lines += [
            "## Model left as found: after a successful call / after a failing call",
            "",
            "Failing call = the same tool on an input of the wrong shape (or float token ids). "
            "`(no error)` = the tool swallowed the model's exception and returned.",
            "",
        ]
        header = ["model", *[f"`{t}`" for t in counting]]
        rows = [
            [f"`{n}`", *[_state_cell(idx.get((n, t))) for t in counting]] for n in main + scaling
        ]
        lines += [*_table(header, rows), ""]
        lines += ["What changed (first model where each tool changed something):", ""]
        for t in counting:
            for n in main + scaling:
                c = idx.get((n, t))
                if c and "skipped" not in c and (c["state_after_ok"] or c["failing_call"]["state"]):
                    ok = "; ".join(c["state_after_ok"][:2]) or "nothing"
                    bad = "; ".join(c["failing_call"]["state"][:2]) or "nothing"
                    lines.append(
                        f"* `{t}` on `{n}`: after ok call: {ok}. After failing call: {bad}."
                    )
                    break
        lines.append("")
    lat = data.get("latency")
    if lat:
        lines += [
            "## Latency: measure_latency vs torch.utils.benchmark on the same workloads",
            "",
            pressure_line(data.get("latency_pressure")),
            "",
            f"Median over {data['settings']['latency_rounds']} interleaved rounds of each "
            "method's median; IQR = median of the per-round IQRs; spread = (max - min) / median "
            "of the round medians; spent = wall time of one measurement (median).",
            "",
        ]
        header = ["workload", "method", "median", "IQR", "spread", "samples", "calls", "spent"]
        rows = []
        for r in lat:
            first = r["rounds"][0]
            rows.append(
                [
                    f"`{r['model']}`",
                    f"`{r['method']}`",
                    f"{r['median_of_medians_s'] * 1e3:.4g} ms",
                    f"{r['median_iqr_s'] * 1e3:.3g} ms",
                    f"{r['round_spread']:.1%}",
                    str(first["samples"]),
                    str(first["calls"]),
                    f"{r['spent_s']:.2f} s",
                ]
            )
        lines += [*_table(header, rows), ""]
    lines += ["## Where this project is behind (computed from the numbers above)", ""]
    behind = _behind(data)
    lines += [f"* {b}" for b in behind] if behind else ["* Nowhere on this run."]
    lines.append("")
    return "\n".join(lines)


def _kept_sections(path: Path) -> str:
    """Sections other scripts own on the page (bench_hf.py's, bench_flops.py --floors'),
    each between its own markers."""
    if not path.exists():
        return ""
    pattern = r"<!-- (bench_\w+):begin -->.*?<!-- \1:end -->\n?"
    return "".join(
        "\n" + match.group(0) for match in re.finditer(pattern, path.read_text(), re.DOTALL)
    )


def write_doc(data: dict[str, Any], path: Path) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".md.tmp")
    tmp.write_text(render(data) + _kept_sections(path))
    os.replace(tmp, path)

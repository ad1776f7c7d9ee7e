"""The gate cannot be fooled: an edited comparison is refused (at load, or when its latency
delta is recomputed from its own blocks), and the owner's check sees copies."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import torch
from latency_reports import BASE, latency_report

from torchscan_stages import compare_benchmarks, load_report
from torchscan_stages.commands.compare import main
from torchscan_stages.compare.checks import run_check

NEAR = [1.01 * t for t in BASE]  # 1% slower: within --max-slowdown 1.05
SLOW = [3 * t for t in BASE]  # 3x slower


def _comparison(tmp_path: Path, cand: list[float]) -> dict[str, Any]:
    result = compare_benchmarks(latency_report(BASE, "base"), latency_report(cand, "cand"))
    return json.loads(result.model_dump_json())


def _gate(tmp_path: Path, document: dict[str, Any]) -> int:
    path = tmp_path / "cmp.json"
    path.write_text(json.dumps(document), encoding="utf-8")
    return main([str(path), "--max-slowdown", "1.05"])


def _latency(document: dict[str, Any]) -> dict[str, Any]:
    (delta,) = [d for d in document["deltas"] if d["metric"] == "latency.warmed"]
    return delta


def test_an_unedited_saved_comparison_gates_as_computed(tmp_path: Path) -> None:
    assert _gate(tmp_path, _comparison(tmp_path, NEAR)) == 0  # passes, as it did fresh
    assert _gate(tmp_path, _comparison(tmp_path, SLOW)) == 1  # 3x slower fails


def test_an_unordered_interval_is_refused_at_load(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    document = _comparison(tmp_path, SLOW)
    _latency(document).update(ci_low=0.5, ci_high=0.4, verdict="faster")  # once "Gate: passed"
    assert _gate(tmp_path, document) == 2
    err = capsys.readouterr().err
    assert "latency.warmed: ci_low 0.5 is above ci_high 0.4" in err and err.count("\n") == 1


def test_a_ratio_its_values_do_not_give_is_refused_at_load(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    document = _comparison(tmp_path, SLOW)
    # ratio 1.0 in [0.99, 1.01] while the recorded lower deciles stay 3x apart
    _latency(document).update(ratio=1.0, ci_low=0.99, ci_high=1.01, verdict="no_difference")
    assert _gate(tmp_path, document) == 2
    assert "ratio 1.0 is not candidate / baseline" in capsys.readouterr().err


def test_a_consistent_looking_edit_is_refused_by_the_recomputation(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    document = _comparison(tmp_path, NEAR)
    delta = _latency(document)
    # keep the ratio (it matches the values), narrow nothing but widen nothing: move the
    # interval so the edit is self-consistent yet not what the blocks give
    delta.update(ci_low=delta["ratio"] * 0.999, ci_high=delta["ratio"] * 1.001)
    for throughput in [d for d in document["deltas"] if d["metric"] == "throughput"]:
        document["deltas"].remove(throughput)
    assert load_report(json.dumps(document)) is not None  # every field is consistent
    assert _gate(tmp_path, document) == 2
    assert "does not follow from its own block times" in capsys.readouterr().err


def test_a_comparison_without_blocks_cannot_pass(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    document = _comparison(tmp_path, NEAR)
    document["baseline"] = document["candidate"] = None
    assert _gate(tmp_path, document) == 3  # CANNOT VERIFY, never "Gate: passed"
    assert "records no raw block times" in capsys.readouterr().out


def test_a_check_that_zeroes_its_inputs_cannot_pass() -> None:
    base, cand = torch.ones(4), torch.ones(4) + 1e-3  # they differ by 1e-3

    def zeroing(a: torch.Tensor, b: torch.Tensor) -> bool:
        a.zero_()
        b.zero_()
        return torch.equal(a, b)

    result = run_check(zeroing, base, cand)
    assert result.passed is False and "changed the outputs it was given" in (result.error or "")
    assert torch.equal(base, torch.ones(4))  # the real outputs are untouched


def test_a_check_that_reads_only_passes() -> None:
    result = run_check(lambda a, b: torch.equal(a, b), torch.ones(3), torch.ones(3))
    assert result.passed is True


def test_an_interleaved_comparison_recomputes_to_itself(tmp_path: Path, sim_clock: Any) -> None:
    # interleaved rounds (paired bootstrap): the saved blocks give back the same delta
    result = compare_benchmarks(
        sim_clock.workload(1e-3, noise=0.01, seed=1),
        sim_clock.workload(3e-3, noise=0.01, seed=2),
        check=lambda a, b: True,
        options={"clock": sim_clock},
    )
    assert _gate(tmp_path, json.loads(result.model_dump_json())) == 1  # 3x slower: FAILED

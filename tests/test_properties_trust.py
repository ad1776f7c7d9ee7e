"""Fuzzing saved comparisons: a mutated field is refused (at load or by the gate's
recomputation) or leaves the decisive latency delta exactly as computed. The compact-report
side is tests/report/test_report_codec.py's
test_damaged_columns_load_like_pydantic_or_fail_in_one_line (its slow path runs the same
consistency rules). Long mode: TORCHSCAN_LONG_PROPERTIES=1."""

from __future__ import annotations

import copy
import json
from typing import Any

from hypothesis import event, given
from hypothesis import strategies as st
from latency_reports import BASE, latency_report
from property_settings import property_settings

from torchscan_stages import compare_benchmarks, load_report
from torchscan_stages.compare.recheck import recheck_saved

NEAR = [1.01 * t for t in BASE]
SAVED = json.loads(
    compare_benchmarks(latency_report(BASE, "b"), latency_report(NEAR, "c")).model_dump_json()
)
FIELDS = ["ratio", "ci_low", "ci_high", "verdict", ("baseline", "value"), ("candidate", "value")]
VALUES = (
    st.floats(0.0, 10.0)
    | st.sampled_from(["faster", "slower", "no_difference", "inconclusive"])
    | st.integers(0, 3)
    | st.none()
)


def _latency(document: dict[str, Any]) -> dict[str, Any]:
    return next(d for d in document["deltas"] if d["metric"] == "latency.warmed")


@property_settings(ci_examples=60)
@given(st.data())
def test_a_mutated_comparison_never_gates_on_altered_numbers(data: st.DataObject) -> None:
    document = copy.deepcopy(SAVED)
    for _ in range(data.draw(st.integers(1, 3))):
        delta = data.draw(st.sampled_from(document["deltas"]))
        field = data.draw(st.sampled_from(FIELDS))
        value = data.draw(VALUES)
        if isinstance(field, tuple):
            delta[field[0]].update(value=value, known_value=value)
        else:
            delta[field] = value
    try:
        loaded = load_report(json.dumps(document))
        recheck_saved(loaded, "<fuzz>")  # type: ignore[arg-type]
    except ValueError as error:
        event("refused")
        assert "\n" not in str(error)
        return
    event("accepted")
    kept = _latency(json.loads(loaded.model_dump_json()))
    original = _latency(SAVED)
    for key in ("ratio", "ci_low", "ci_high", "verdict"):
        assert kept[key] == original[key], (key, kept[key], original[key])

"""The pure readers of benchmarks/peer_suites.py: a peer's table and asserts, and the verdicts.

The table below is written for this test in the layout torchinfo prints (no peer output is
kept in this repository).
"""

from __future__ import annotations

from benchmarks.peer_outputs import (
    Case,
    Check,
    Row,
    compare_figure,
    literal_asserts,
    parse_block,
    parse_rows,
    split_blocks,
    tally,
)

RULE = "=" * 72
TABLE = f"""{RULE}
Layer (type:depth-idx)        Output Shape       Param #      Mult-Adds
{RULE}
Net                           [[2, 3], [4]]      --           --
├─Linear: 1-1                 [2, 3]             15           30
│    └─weight                                    ├─12
├─Block: 1-2                  [4]                --           --
│    └─Conv1d: 2-1            [4]                1,234        2,468
{RULE}
Total params: 1,249
Trainable params: 1,200
Non-trainable params: 49
Total mult-adds (M): 0.00
{RULE}
"""


def test_a_table_gives_its_totals_and_the_exact_column_sum() -> None:
    (block,) = split_blocks("noise before\n" + TABLE)
    figures = parse_block(block)
    assert figures["total_params"] == 1249  # "1,249" with its comma
    assert (figures["trainable_params"], figures["non_trainable_params"]) == (1200, 49)
    assert figures["mult_adds"] == 30 + 2468  # the column's numbers; "--" rows count 0
    # the printed total is rounded to 0.01 of its unit: kept with the unit for the tolerance
    assert (figures["mult_adds_rounded"], figures["mult_adds_unit"]) == (0.0, 1e6)
    assert len(split_blocks(TABLE + TABLE)) == 2  # one table per printing call


def test_rows_keep_type_depth_shapes_and_leave_out_parameter_rows() -> None:
    (block,) = split_blocks(TABLE)
    assert parse_rows(block) == [
        Row("Net", 0, ((2, 3), (4,)), "--"),  # a dict/list output: several shapes
        Row("Linear", 1, ((2, 3),), "15"),
        Row("Block", 1, ((4,),), "--"),
        Row("Conv1d", 2, ((4,),), "1,234"),
    ]  # "└─weight" (a parameter's row, its count tree-prefixed) is left out


def test_literal_asserts_follow_the_summary_call_before_them() -> None:
    source = (
        "def test_a():\n"
        "    r = summary(m)\n"
        "    assert r.total_params == 7\n"
        "    r = summary(m, (1, 2))\n"
        "    assert r.total_mult_adds == 9\n"
        "    assert r.input_size == [1, 2]\n"  # not an int figure: ignored
        "def test_loop():\n"
        "    for d in (1, 2):\n"
        "        assert summary(m).total_params == 3\n"  # run order unknown: skipped
    )
    assert literal_asserts(source) == {
        "test_a": [(0, "total_params", 7), (1, "total_mult_adds", 9)]
    }


def test_verdicts_and_the_tally() -> None:
    assert compare_figure("p", 10, 10, "complete").verdict == "right"
    assert compare_figure("p", 10, 11, "complete").verdict == "wrong"
    assert compare_figure("m", 3.96e6, 3_957_600, "complete", 5e3).verdict == "right"  # +-0.005 M
    assert compare_figure("m", 10, None, "partial").verdict == "partial"
    right = Case("x", "t", 0, [Check("p", 32, 64, "right", "peer's convention")]).finish()
    worst = Case("x", "t", 1, [Check("p", 1, 1, "right"), Check("m", 2, 3, "wrong")]).finish()
    assert (right.verdict, worst.verdict) == ("right", "wrong")  # a case is its worst check
    counts = tally([right, worst, Case("x", "t", 2, error="no GPU").finish()])
    assert counts["x"]["right"] == counts["x"]["wrong"] == counts["x"]["not_runnable"] == 1
    assert counts["x"]["peer_differs"] == 1  # the right case whose peer figure differs

"""Fast checks of the benchmark model set, the state-check helper and the FLOPs reference.

The benchmark modules live in benchmarks/ (not a package); they are loaded by path under
private names so nothing else in the test session can collide with them.
"""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType

import pytest
import torch
from torch import nn

BENCH = Path(__file__).resolve().parents[1] / "benchmarks"


def _load(name: str) -> ModuleType:
    spec = importlib.util.spec_from_file_location(f"_bench_{name}", BENCH / f"{name}.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


models = _load("models")
state_check = _load("state_check")
peers = _load("peers")

TINY = models.model_set("tiny", scaling=(3,))


def test_model_set_names_and_order() -> None:
    names = [bm.name for bm in models.model_set("tiny")]
    assert names == [
        "mlp", "resnet50", "dw_transposed_cnn", "transformer", "recurrent", "functional",
        "shared_leaf", "token_conv", "scaling_100", "scaling_1000", "scaling_5000",
    ]  # fmt: skip
    with pytest.raises(ValueError, match="size"):
        models.model_set("huge")


@pytest.mark.parametrize("bm", TINY, ids=[bm.name for bm in TINY])
def test_every_model_runs_and_bad_input_fails(bm: object) -> None:
    model = models.set_mixed_modes(bm.build())  # type: ignore[attr-defined]
    with torch.no_grad():
        out = model(bm.make_input())  # type: ignore[attr-defined]
        assert torch.isfinite(out).all()
        with pytest.raises((RuntimeError, ValueError, IndexError)):
            model(bm.make_bad_input())  # type: ignore[attr-defined]


def test_models_are_deterministic() -> None:
    bm = TINY[0]
    a, b = bm.build(), bm.build()
    assert all(torch.equal(p, q) for p, q in zip(a.parameters(), b.parameters(), strict=True))
    assert torch.equal(bm.make_input(), bm.make_input())


def test_resnet50_shape_has_16_bottlenecks_and_scaling_counts() -> None:
    net = models.resnet50_shaped(base=4)
    # stages 3 + 4 + 6 + 3 = 16 bottleneck blocks
    assert sum(isinstance(m, models.Bottleneck) for m in net.modules()) == 16
    # root + 3 blocks x (block, fc, act) = 1 + 9 = 10 modules
    assert len(list(models.scaling_model(3).modules())) == 10


def test_mixed_modes_keep_eval_maths() -> None:
    model = models.set_mixed_modes(models.resnet50_shaped(base=4))
    flags = {type(m).__name__: m.training for m in model.modules()}
    assert flags["BatchNorm2d"] is False and flags["Conv2d"] is True
    assert flags["Sequential"] is True


def test_state_check_clean_after_plain_forward() -> None:
    bm = TINY[1]  # resnet-shaped: has BatchNorm buffers
    model = models.set_mixed_modes(bm.build())
    before = state_check.snapshot(model)
    with torch.no_grad():
        model(bm.make_input())
    assert state_check.diff(before, state_check.snapshot(model)) == []


def test_state_check_detects_hook_flag_attribute_buffer_and_global_hook() -> None:
    model = models.set_mixed_modes(TINY[1].build())
    before = state_check.snapshot(model)
    handle = model[0].register_forward_hook(lambda *args: None)
    model[1].training = True  # a BatchNorm flipped to train
    model.__dict__["__flops__"] = 0  # an attribute left behind
    with torch.no_grad():
        model[1].running_mean.add_(1.0)
    global_handle = nn.modules.module.register_module_forward_hook(lambda *args: None)
    try:
        found = state_check.diff(before, state_check.snapshot(model))
    finally:
        handle.remove()
        global_handle.remove()
    text = "\n".join(found)
    assert "_forward_hooks on 0: 0 -> 1 hooks" in text
    assert "training flags changed on 1 modules" in text and "1: False -> True" in text
    assert "__flops__" in text
    assert "buffer 1.running_mean: values changed" in text
    assert "global hooks._global_forward_hooks" in text


def test_reference_flops_counts_and_restores() -> None:
    model = models.set_mixed_modes(TINY[0].build())
    before = state_check.snapshot(model)
    ref = peers.reference_flops(model, TINY[0].make_input())
    # 6 x Linear(16,16) on batch 2: 6 * 2*2*16*16 = 6144; Linear(16,10): 2*2*16*10 = 640
    assert ref["flops"] == 6144 + 640
    assert state_check.diff(before, state_check.snapshot(model)) == []


def test_reference_counts_attention_with_fast_paths_off() -> None:
    bm = next(b for b in TINY if b.name == "functional")  # d=16, 2 heads, 8 tokens, batch 1
    ref = peers.reference_flops(bm.build(), bm.make_input())
    # qkv projection 2*8*16*48 = 12288; SDPA (math backend) two bmm 2 * (2*2*8*8*8) = 4096;
    # two einsums 2 * (2*8*16*16) = 8192 -> 24576
    assert ref["flops"] == 12288 + 4096 + 8192
    assert torch.backends.mha.get_fastpath_enabled() is True


def test_a_script_replaces_only_its_own_docs_block(tmp_path: Path) -> None:
    doc_sections = _load("doc_sections")
    page = tmp_path / "benchmarks.md"
    page.write_text("# page\n<!-- bench_a:begin -->\nold a\n<!-- bench_a:end -->\ntail\n")
    doc_sections.write_section(page, "bench_a", "new a\n")
    doc_sections.write_section(page, "bench_b", "b\n")  # first time: appended
    assert page.read_text() == (
        "# page\n<!-- bench_a:begin -->\nnew a\n<!-- bench_a:end -->\ntail\n"
        "\n<!-- bench_b:begin -->\nb\n<!-- bench_b:end -->\n"
    )


def test_overhead_reproduction_counts_cells_within_the_spread_or_ten_percent(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.syspath_prepend(str(BENCH))  # the script imports its sibling modules
    repro = _load("bench_overhead_repro")
    first = {
        ("m", "a"): {"ratio": {"median": 2.0, "q1": 1.8, "q3": 2.5}},  # rerun 2.4: in the IQR
        ("m", "b"): {"ratio": {"median": 2.0, "q1": 1.95, "q3": 2.05}},  # 2.19: 9.5% off
        ("m", "c"): {"ratio": {"median": 2.0, "q1": 1.95, "q3": 2.05}},  # 2.21: 10.5%, outside
        ("m", "d"): {"ratio": {"median": 2.0, "q1": None, "q3": None}},  # not measured again
    }
    second = {
        ("m", "a"): {"ratio": {"median": 2.4}},
        ("m", "b"): {"ratio": {"median": 2.19}},
        ("m", "c"): {"ratio": {"median": 2.21}},
    }
    result = repro.compare(first, second, "ratio")
    assert (result["reproduced"], result["cells"]) == (2, 4)
    assert [row["ok"] for row in result["rows"]] == [True, True, False, False]


def test_pyperf_compare_to_output_is_read_as_a_verdict_beyond_the_minimum_effect(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """``pyperf compare_to`` prints the ratio line, or hides the benchmark when its t-test
    declines ("Not significant!" after the ratio with -v); bench_noise.py's pyperf column
    reads it as a user would (the 2% minimum effect
    applied to torch.utils.benchmark's column too)."""
    monkeypatch.syspath_prepend(str(BENCH))
    pressure = _load("noise_pressure")
    line = "Mean +- std dev: [base] 1.00 ms +- 0.01 ms -> [cand] {} ms +- 0.02 ms: {}\n"
    assert pressure.pyperf_reading(line.format("1.30", "1.30x slower")) == ("slower", 1.3)
    verdict, ratio = pressure.pyperf_reading(line.format("0.50", "2.00x faster"))
    assert verdict == "faster" and ratio == pytest.approx(0.5)  # 1 / 2.00
    # significant, but 1.01x is inside the 2% minimum effect: no direction claimed
    assert pressure.pyperf_reading(line.format("1.01", "1.01x slower")) == ("inconclusive", 1.01)
    declined = line.format("1.05", "1.05x slower") + "Not significant!\n"  # with -v
    assert pressure.pyperf_reading(declined) == ("inconclusive", 1.0)
    hidden = "Benchmark hidden because not significant (1): busy_loop\n"  # the default
    assert pressure.pyperf_reading(hidden) == ("inconclusive", 1.0)
    assert pressure.pyperf_reading("[base] 1.00 ms -> [cand] 1.00 ms: no change\n")[0] == (
        "inconclusive"
    )

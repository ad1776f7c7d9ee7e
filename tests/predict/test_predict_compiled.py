"""A step that runs torch.compile'd code is predicted as the eager step and is not complete.

The fake run executes compiled code eagerly; the compiled graph's peak differs either way
(issue 37: 0.879x on a decoder, 1.085x on a CNN). Before this, a step compiled before or
inside the prediction got the eager figure as ``complete`` with no diagnostic.
"""

from __future__ import annotations

import warnings
from collections.abc import Callable

import pytest
import torch
from torch import nn

from torchscan_stages.predict import predict_peak_memory


def _model() -> nn.Module:
    return nn.Sequential(nn.Linear(64, 256), nn.GELU(), nn.Linear(256, 64))


def _compiled_outside() -> Callable[[], None]:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # torch warns about global module hooks here
        model = torch.compile(_model())
    x = torch.randn(32, 64)
    return lambda: model(x).pow(2).mean().backward()


def _compiled_in_place() -> Callable[[], None]:
    model, x = _model(), torch.randn(32, 64)
    model.compile()
    return lambda: model(x).pow(2).mean().backward()


def _compiled_inside() -> Callable[[], None]:
    model, x = _model(), torch.randn(32, 64)

    def step() -> None:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            compiled = torch.compile(model)
        compiled(x).pow(2).mean().backward()

    return step


@pytest.mark.parametrize(
    ("make", "named"),
    [(_compiled_outside, "compiled module Sequential"),
     (_compiled_in_place, "compiled module Sequential"),
     (_compiled_inside, "torch.compile() called in the step")],
    ids=["torch_compile_module", "module_compile", "compile_inside_the_step"],
)  # fmt: skip
def test_a_compiled_step_is_the_eager_figure_and_not_complete(
    make: Callable[[], Callable[[], None]], named: str
) -> None:
    report = predict_peak_memory(make(), device="cpu")
    assert report.peak.status == "partial"
    note = next(d for d in report.diagnostics if d.code == "compiled_as_eager")
    assert named in note.message and "EAGER step's peak" in note.message


def test_the_same_step_uncompiled_stays_complete() -> None:
    model, x = _model(), torch.randn(32, 64)
    report = predict_peak_memory(lambda: model(x).pow(2).mean().backward(), device="cpu")
    assert report.peak.status == "complete"
    assert not any(d.code == "compiled_as_eager" for d in report.diagnostics)

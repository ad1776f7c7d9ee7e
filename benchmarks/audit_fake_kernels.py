"""Differential audit: every operator a training step runs, once real and once fake.

Run: ``.venv/bin/python benchmarks/audit_fake_kernels.py [--out FILE]``. Each model of the
benchmark set (``benchmarks/models.model_set("tiny")``), an ``nn.LSTM``, an ``nn.GRU`` and
the prediction tests' Llama-style decoder run one training step (forward, loss, backward,
AdamW step) under a recording dispatch mode. The first call of every (operator, argument
shapes) is replayed under ``FakeTensorMode`` on fake copies of its arguments, and the bytes
of every output storage (outputs, workspaces, the tensors autograd saves are outputs too)
are compared, and so are their strides; both sides run on the same detached copies of the
arguments, and the fake side goes through the predictor's corrections
(``torchscan_stages/predict/kernels.py``) as a prediction does. A row per operator: calls
audited, real and fake output bytes, calls whose output strides differ, and whether the
predictor corrects it. Then the tensors autograd saves for backward: each step runs once
real and once on fake tensors (the model built under the fake mode, the corrections
applied) under ``saved_tensors_hooks``, and the saved tensors are compared in order by
shape, strides, dtype and storage bytes; a row per step. ``--hf`` adds the Hugging Face
survey's families (``integrations/hf_families.py``). Both tables are printed as markdown;
docs/prediction.md carries the committed copy.
"""

from __future__ import annotations

import argparse
import contextlib
import sys
import types
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch
from torch import nn
from torch._subclasses.fake_tensor import FakeTensorMode
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils._pytree import tree_flatten, tree_map

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT), str(ROOT / "tests" / "predict")]

from benchmarks.models import model_set  # noqa: E402
from torchscan_stages.predict import predict_peak_memory  # noqa: E402
from torchscan_stages.predict.kernels import CORRECTED  # noqa: E402


def _strides(out: Any) -> list[tuple[int, ...]]:
    """Each output's strides, those of size-1 dimensions left out (any value is the same
    layout there)."""
    return [
        tuple(stride for size, stride in zip(t.shape, t.stride(), strict=True) if size != 1)
        for t in tree_flatten(out)[0]
        if isinstance(t, torch.Tensor)
    ]


class _Corrected(TorchDispatchMode):
    """Above a FakeTensorMode: the predictor's corrections of fake kernels, as it runs them."""

    def __torch_dispatch__(self, func: Any, types: Any, args: Any = (), kwargs: Any = None) -> Any:
        correction = CORRECTED.get(func)
        if correction is None:
            return func(*args, **(kwargs or {}))
        return correction(func, args, kwargs or {}, lambda op, why: None)


def _bytes(out: Any) -> int:
    total = 0
    for item in tree_flatten(out)[0]:
        if isinstance(item, torch.Tensor):
            try:
                total += item.untyped_storage().nbytes()
            except (RuntimeError, NotImplementedError):
                continue
    return total


def _signature(args: Any) -> tuple[Any, ...]:
    return tuple(
        (tuple(x.shape), x.dtype) if isinstance(x, torch.Tensor) else type(x).__name__
        for x in tree_flatten(args)[0]
    )


class _Recorder(TorchDispatchMode):
    """Keeps a detached copy of the arguments of each new (operator, shapes) call."""

    def __init__(self) -> None:
        super().__init__()
        self.calls: dict[tuple[Any, ...], tuple[Any, Any, Any]] = {}

    def __torch_dispatch__(self, func: Any, types: Any, args: Any = (), kwargs: Any = None) -> Any:
        kwargs = kwargs or {}
        key = (func, _signature((args, kwargs)))
        copied = None
        if key not in self.calls:
            copied = tree_map(
                lambda x: x.detach().clone() if isinstance(x, torch.Tensor) else x, (args, kwargs)
            )
        out = func(*args, **kwargs)
        if copied is not None:
            self.calls[key] = (func, copied[0], copied[1])
        return out


@dataclass
class Row:
    operator: str
    calls: int = 0
    real: int = 0
    fake: int = 0
    fake_errors: int = 0
    stride_diffs: int = 0
    left: int = 0  # calls whose corrected fake output still differs (bytes or strides)


def _replay(
    func: Any, args: Any, kwargs: Any, corrected: bool
) -> tuple[int, list[tuple[int, ...]]] | None:
    """Output bytes and strides of ``func`` on fake copies: the fake kernel as torch has it,
    or (``corrected``) as the predictor runs it."""
    mode = FakeTensorMode(allow_non_fake_inputs=True)
    fake_args, fake_kwargs = tree_map(
        lambda x: mode.from_tensor(x) if isinstance(x, torch.Tensor) else x, (args, kwargs)
    )
    try:
        with mode, _Corrected() if corrected else contextlib.nullcontext():
            out = func(*fake_args, **fake_kwargs)
            return _bytes(out), _strides(out)
    except Exception:
        return None


Saved = tuple[tuple[int, ...], tuple[int, ...], str, int]


def _saved_in(step: Callable[[], None]) -> list[Saved]:
    """Shape, strides, dtype and storage bytes of every tensor autograd saves, in order."""
    saved: list[Saved] = []

    def pack(tensor: torch.Tensor) -> torch.Tensor:
        nbytes = tensor.untyped_storage().nbytes() if tensor.layout == torch.strided else -1
        strides = _strides(tensor)[0]  # size-1 dimensions left out, as for outputs
        saved.append((tuple(tensor.shape), strides, str(tensor.dtype), nbytes))
        return tensor

    with torch.autograd.graph.saved_tensors_hooks(pack, lambda tensor: tensor):
        step()
    return saved


@dataclass
class SavedRow:
    step: str
    real: int = 0  # tensors saved by the real step
    fake: int = 0
    differing: int = 0  # positions whose shape, strides, dtype or bytes differ
    first: str = ""


# what the predicted step saves is written here: a module object, which a prediction
# neither searches nor restores (it puts back the Python objects a step mutates)
_SINK = types.ModuleType("audit_sink")


def audit_saved(name: str, build: Callable[[], nn.Module], make: Callable[[], Any]) -> SavedRow:
    """One step's saved tensors, real against predicted: the same model and inputs built
    outside the step, the fake side run by ``predict_peak_memory`` itself (its corrected
    kernels, the values it keeps, the branches it takes)."""
    torch.manual_seed(0)
    model, x = build(), _batch(make())
    real = _saved_in(lambda: _train(model, x))
    torch.manual_seed(0)
    model, x = build(), _batch(make())
    _SINK.saved = []

    def step() -> None:
        _SINK.saved = _saved_in(lambda: _train(model, x))

    report = predict_peak_memory(step, device="cpu")
    fake: list[Saved] = _SINK.saved
    row = SavedRow(name, len(real), len(fake))
    if report.peak.status != "complete":  # stopped: what it saw is a lower bound, said so
        row.first = f"prediction {report.peak.status}: " + ", ".join(
            sorted({d.code for d in report.diagnostics if d.severity == "error"})
        )
        return row
    for index, (a, b) in enumerate(zip(real, fake, strict=False)):
        if a != b:
            row.differing += 1
            row.first = row.first or f"#{index}: real {a} fake {b}"
    row.differing += abs(len(real) - len(fake))
    return row


def _batch(x: Any) -> Any:
    if isinstance(x, torch.Tensor) and x.dim() > 1 and x.shape[0] == 1:
        return torch.cat([x, x])  # training batch norm needs two rows
    return x


class _Experts(nn.Module):
    """Three fp32 experts through ``torch._grouped_mm``, as transformers 5 routes them."""

    def __init__(self) -> None:
        super().__init__()
        self.weight = nn.Parameter(torch.randn(3, 16, 8))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        offsets = torch.tensor([4, 8, 12], dtype=torch.int32)
        return torch._grouped_mm(x, self.weight, offsets)


Step = tuple[str, Callable[[], nn.Module], Callable[[], Any]]


class _Keywords(nn.Module):
    """A Hugging Face model called with its keyword inputs, first output (logits) returned."""

    def __init__(self, model: nn.Module) -> None:
        super().__init__()
        self.model = model

    def forward(self, inputs: dict[str, torch.Tensor]) -> torch.Tensor:
        out = self.model(**inputs)
        values = out.values() if hasattr(out, "values") else out
        for value in values:  # the first output with a gradient (logits, hidden states...)
            if isinstance(value, torch.Tensor) and value.requires_grad:
                return value
        raise ValueError(f"{type(self.model).__name__}: no output with a gradient")


def _hf_steps() -> list[Step]:
    from torchscan_stages.integrations.hf_families import FAMILIES, PREDICTION_FAMILIES

    found: list[Step] = []
    for name, family in sorted({**FAMILIES, **PREDICTION_FAMILIES}.items()):
        found.append((f"hf:{name}", lambda f=family: _Keywords(f.build()),
                      lambda f=family: f.make_inputs(2)))  # fmt: skip
    return found


def _steps(hf: bool = False) -> list[Step]:
    from predict_models import SMALL, Decoder

    found = [(m.name, m.build, m.make_input) for m in model_set("tiny") if m.family == "main"]
    found.append(("lstm", lambda: nn.LSTM(8, 16, num_layers=2), lambda: torch.randn(5, 2, 8)))
    found.append(("gru", lambda: nn.GRU(8, 16, num_layers=2), lambda: torch.randn(5, 2, 8)))
    found.append(
        ("decoder", lambda: Decoder(SMALL), lambda: torch.randint(0, SMALL.vocab, (2, 16)))
    )
    found.append(("grouped_mm_fp32", _Experts, lambda: torch.randn(12, 16)))
    found.append(("transposed_batch_norm", _TransposedNorm, lambda: torch.randn(8, 32, 16)))
    return found + (_hf_steps() if hf else [])


class _TransposedNorm(nn.Module):
    """PatchTST's layout: BatchNorm over the channels of a (B, L, C) input, then a Linear."""

    def __init__(self) -> None:
        super().__init__()
        self.norm, self.proj = nn.BatchNorm1d(16), nn.Linear(16, 16)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.proj(self.norm(x.transpose(1, 2)).transpose(1, 2))


def _train(model: nn.Module, x: torch.Tensor) -> None:
    optimizer = torch.optim.AdamW(model.parameters())
    out = model(x)
    out = out[0] if isinstance(out, tuple) else out
    out.float().pow(2).mean().backward()
    optimizer.step()


def audit(steps: list[Step]) -> dict[str, Row]:
    """Rows by operator over every model's step."""
    rows: dict[str, Row] = {}
    for name, build, make in steps:
        torch.manual_seed(0)
        model, x = build(), _batch(make())
        recorder = _Recorder()
        try:
            with recorder:
                _train(model, x)
        except (RuntimeError, ValueError) as error:
            print(f"{name}: not audited ({error})", file=sys.stderr)
            continue
        for func, args, kwargs in recorder.calls.values():
            row = rows.setdefault(str(func), Row(str(func)))
            # fake first: the real replay may write its inputs
            fake, fixed = (_replay(func, args, kwargs, corrected) for corrected in (False, True))
            out = func(*args, **kwargs)  # the same (compact) inputs on both sides
            row.calls += 1
            row.real += _bytes(out)
            if fake is None:
                row.fake_errors += 1
            else:
                row.fake += fake[0]
                row.stride_diffs += fake[1] != _strides(out)
            row.left += fixed != (_bytes(out), _strides(out))
    return rows


def table(rows: dict[str, Row]) -> str:
    """Markdown: the divergent operators first, then a count of the agreeing ones."""
    corrected = {str(op) for op in CORRECTED}
    lines = [
        "| operator | calls audited | real output bytes | fake output bytes | calls with other "
        "strides | predictor |",
        "| --- | ---: | ---: | ---: | ---: | --- |",
    ]
    agree = 0
    for row in sorted(rows.values(), key=lambda r: r.operator):
        if row.real == row.fake and not row.fake_errors and not row.stride_diffs:
            agree += 1
            continue
        fake = f"{row.fake:,}" + (f" ({row.fake_errors} refused)" if row.fake_errors else "")
        verdict = "diagnostic (partial)"
        if row.operator in corrected:
            verdict = "corrected" if not row.left else f"corrected, {row.left} call(s) left"
        if row.operator == "aten._local_scalar_dense.default":
            verdict = (
                "values of inputs and constants read for real (values.py); an unknown float "
                "goes on as a placeholder (scalar_reads.py); else the run stops (partial)"
            )
        if row.operator == "aten.nonzero.default":
            verdict = "answered from known values; else routing='worst_case' or a stop (partial)"
        lines.append(
            f"| `{row.operator}` | {row.calls} | {row.real:,} | {fake} | {row.stride_diffs} "
            f"| {verdict} |"
        )
    lines.append("")
    lines.append(
        f"{agree} other operators: real and fake output bytes and strides equal on every call."
    )
    return "\n".join(lines)


def saved_table(rows: list[SavedRow]) -> str:
    """Markdown: per step, the tensors saved for backward, real against fake."""
    lines = [
        "| step | saved (real) | saved (fake) | differing | first difference |",
        "| --- | ---: | ---: | ---: | --- |",
    ]
    for row in rows:
        lines.append(
            f"| {row.step} | {row.real} | {row.fake} | {row.differing} | {row.first or '-'} |"
        )
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, help="also write the tables here")
    parser.add_argument("--hf", action="store_true", help="add the Hugging Face survey")
    options = parser.parse_args()
    steps = _steps(options.hf)
    saved = []
    for name, build, make in steps:
        try:
            saved.append(audit_saved(name, build, make))
        except Exception as error:  # a step the fake mode cannot run: say so, go on
            saved.append(SavedRow(name, first=f"not audited: {type(error).__name__}"))
    text = table(audit(steps)) + "\n\n" + saved_table(saved)
    print(text)
    if options.out is not None:
        options.out.write_text(text + "\n", encoding="utf-8")


if __name__ == "__main__":
    main()

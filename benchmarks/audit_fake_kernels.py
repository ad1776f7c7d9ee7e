"""Differential audit: every operator a training step runs, once real and once fake.

Run: ``.venv/bin/python benchmarks/audit_fake_kernels.py [--out FILE]``. Each model of the
benchmark set (``benchmarks/models.model_set("tiny")``), an ``nn.LSTM``, an ``nn.GRU`` and
the prediction tests' Llama-style decoder run one training step (forward, loss, backward,
AdamW step) under a recording dispatch mode. The first call of every (operator, argument
shapes) is replayed under ``FakeTensorMode`` on fake copies of its arguments, and the bytes
of every output storage (outputs, workspaces, the tensors autograd saves are outputs too)
are compared; both sides run on the same detached copies of the arguments. A row per
operator: calls audited, real and fake output bytes, and whether the predictor corrects it
(``torchscan_stages/predict/kernels.py``). The table is printed as markdown;
docs/prediction.md carries the committed copy.
"""

from __future__ import annotations

import argparse
import sys
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
from torchscan_stages.predict.kernels import CORRECTED  # noqa: E402


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


def _replay(func: Any, args: Any, kwargs: Any) -> int | None:
    mode = FakeTensorMode(allow_non_fake_inputs=True)
    fake_args, fake_kwargs = tree_map(
        lambda x: mode.from_tensor(x) if isinstance(x, torch.Tensor) else x, (args, kwargs)
    )
    try:
        with mode:
            return _bytes(func(*fake_args, **fake_kwargs))
    except Exception:
        return None


class _Experts(nn.Module):
    """Three fp32 experts through ``torch._grouped_mm``, as transformers 5 routes them."""

    def __init__(self) -> None:
        super().__init__()
        self.weight = nn.Parameter(torch.randn(3, 16, 8))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        offsets = torch.tensor([4, 8, 12], dtype=torch.int32)
        return torch._grouped_mm(x, self.weight, offsets)


def _steps() -> list[tuple[str, Callable[[], nn.Module], Callable[[], torch.Tensor]]]:
    from predict_models import SMALL, Decoder

    found = [(m.name, m.build, m.make_input) for m in model_set("tiny") if m.family == "main"]
    found.append(("lstm", lambda: nn.LSTM(8, 16, num_layers=2), lambda: torch.randn(5, 2, 8)))
    found.append(("gru", lambda: nn.GRU(8, 16, num_layers=2), lambda: torch.randn(5, 2, 8)))
    found.append(
        ("decoder", lambda: Decoder(SMALL), lambda: torch.randint(0, SMALL.vocab, (2, 16)))
    )
    found.append(("grouped_mm_fp32", _Experts, lambda: torch.randn(12, 16)))
    return found


def _train(model: nn.Module, x: torch.Tensor) -> None:
    optimizer = torch.optim.AdamW(model.parameters())
    out = model(x)
    out = out[0] if isinstance(out, tuple) else out
    out.float().pow(2).mean().backward()
    optimizer.step()


def audit() -> dict[str, Row]:
    """Rows by operator over every model's step."""
    rows: dict[str, Row] = {}
    for _name, build, make in _steps():
        torch.manual_seed(0)
        model, x = build(), make()
        if x.dim() > 1 and x.shape[0] == 1:  # training batch norm needs two rows
            x = torch.cat([x, x])
        recorder = _Recorder()
        with recorder:
            _train(model, x)
        for func, args, kwargs in recorder.calls.values():
            row = rows.setdefault(str(func), Row(str(func)))
            fake = _replay(func, args, kwargs)  # first: the real replay may write its inputs
            real = _bytes(func(*args, **kwargs))  # the same (compact) inputs on both sides
            row.calls += 1
            row.real += real
            if fake is None:
                row.fake_errors += 1
            else:
                row.fake += fake
    return rows


def table(rows: dict[str, Row]) -> str:
    """Markdown: the divergent operators first, then a count of the agreeing ones."""
    corrected = {str(op) for op in CORRECTED}
    lines = [
        "| operator | calls audited | real output bytes | fake output bytes | predictor |",
        "| --- | ---: | ---: | ---: | --- |",
    ]
    agree = 0
    for row in sorted(rows.values(), key=lambda r: r.operator):
        if row.real == row.fake and not row.fake_errors:
            agree += 1
            continue
        fake = f"{row.fake:,}" + (f" ({row.fake_errors} refused)" if row.fake_errors else "")
        verdict = "corrected" if row.operator in corrected else "diagnostic (partial)"
        if row.operator == "aten._local_scalar_dense.default":
            verdict = "constants read for real; a computed value stops the run (partial)"
        lines.append(f"| `{row.operator}` | {row.calls} | {row.real:,} | {fake} | {verdict} |")
    lines.append("")
    lines.append(f"{agree} other operators: real and fake output bytes equal on every call.")
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, help="also write the table here")
    options = parser.parse_args()
    text = table(audit())
    print(text)
    if options.out is not None:
        options.out.write_text(text + "\n", encoding="utf-8")


if __name__ == "__main__":
    main()

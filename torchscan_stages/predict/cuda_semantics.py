"""device="cuda": follow CUDA where its kernels keep other bytes than the CPU's, else say so.

A prediction runs the step on CPU fake tensors, so every operator takes the CPU's kernel.
Where CUDA's would allocate or save other tensors, ``CudaSemantics`` (a TorchFunctionMode
active during a CUDA prediction) either runs what CUDA would run or records what it could
not follow, with the module path where it ran:

* ``F.scaled_dot_product_attention``: the backend CUDA picks (``cuda_attention.py``), run
  by that backend's own op: its saved logsumexp and philox state instead of the CPU's
  flash or math tensors. Modelled for an assumed GPU, so a warning says which backend, for
  which GPU, and that the fused kernels' transient scratch is not counted.
* ``F.dropout`` in training: CUDA's fused ``native_dropout`` (a 1-byte bool mask saved for
  backward) instead of the CPU's noise tensor in the input's dtype. Exact.
* autocast: CPU autocast under a CUDA prediction uses the CPU's cast lists; the operators
  whose CUDA autocast registration differs are named. ``torch.autocast("cuda")`` is turned
  off by a CPU-only torch (its warning is caught here): the region ran uncast.
* RNN kernels (LSTM, GRU, RNN and their cells): cuDNN's reserve space and fused cell
  workspaces are not the CPU's (oneDNN) tensors; named, not modelled.
"""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import warnings
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any, TextIO

import torch
import torch.nn.functional as F
from torch.overrides import TorchFunctionMode

from ..report import Diagnostic
from . import cuda_attention as attention

CUDA_AUTOCAST_OFF = "CUDA is not available or torch_xla is imported. Disabling autocast"
# functions whose attention (and dropout) run inside them, where this mode cannot see
FUSED_ATTENTION = frozenset(
    {"multi_head_attention_forward", "_native_multi_head_attention",
     "_transformer_encoder_layer_fwd"}
)  # fmt: skip
RNN_FUNCTIONS = frozenset(
    {"lstm", "gru", "rnn_tanh", "rnn_relu", "lstm_cell", "gru_cell", "rnn_tanh_cell",
     "rnn_relu_cell"}
)  # fmt: skip


@functools.cache
def autocast_listing(name: str) -> tuple[bool, bool] | None:
    """(has a CUDA autocast kernel, has a CPU autocast kernel) for aten ``name`` (any
    overload), read from torch's dispatcher; None when ``name`` is no aten operator."""
    packet = getattr(torch.ops.aten, name, None)
    if packet is None or not hasattr(packet, "overloads"):
        return None
    qualified = [f"aten::{name}" + ("" if o == "default" else f".{o}") for o in packet.overloads()]

    def listed(key: str) -> bool:
        return any(torch._C._dispatch_has_kernel_for_dispatch_key(q, key) for q in qualified)

    try:
        return listed("AutocastCUDA"), listed("AutocastCPU")
    except RuntimeError:  # a packet attribute that names no registered operator
        return None


def _aten_name(func: Any) -> str:
    """``linear`` for F.linear, ``matmul`` for Tensor.__matmul__; "" for attribute reads."""
    name = str(getattr(func, "__name__", ""))
    if name in ("__get__", "__set__"):
        return ""
    return name.strip("_") if name.startswith("__") else name


@dataclass(eq=False)
class CudaSemantics(TorchFunctionMode):
    """Runs CUDA's choice where it is modelled; records where and what it is not."""

    modules: Any  # the module stack: current() is the innermost module's dotted path
    attention_calls: Counter[tuple[str, str, str]] = field(default_factory=Counter)
    saved_bytes: int = 0  # logsumexp bytes the fused backends keep (before rounding)
    exact_attention: int = 0  # calls whose backend no sm80+ GPU would choose otherwise
    unmodelled_attention: Counter[tuple[str, str]] = field(default_factory=Counter)
    dropouts: int = 0
    autocast_ops: dict[str, set[str]] = field(default_factory=dict)  # op -> modules
    autocast_regions: set[str] = field(default_factory=set)
    cuda_autocast: list[str] = field(default_factory=list)  # where it was turned off
    rnn: dict[str, set[str]] = field(default_factory=dict)  # function -> modules

    def __post_init__(self) -> None:
        super().__init__()

    def _where(self) -> str:
        return self.modules.current() or "(outside modules)"

    def __torch_function__(
        self, func: Any, types: Any, args: tuple[Any, ...] = (), kwargs: Any = None
    ) -> Any:
        kwargs = kwargs or {}
        if func is F.scaled_dot_product_attention:
            return self._attention(args, kwargs)
        if (func is F.dropout or func is torch.dropout) and self._fused_dropout(args, kwargs):
            self.dropouts += 1
            x = args[0] if args else kwargs["input"]
            return torch.native_dropout(x, _arg(args, kwargs, 1, "p", 0.5), True)[0]
        name = _aten_name(func)
        if name in FUSED_ATTENTION:
            why = f"inside {name} (nn.MultiheadAttention), with its dropout"
            self.unmodelled_attention[(self._where(), why)] += 1
        if name in RNN_FUNCTIONS:
            self.rnn.setdefault(name, set()).add(self._where())
        if name and torch.is_autocast_enabled("cpu"):
            self._autocast(name)
        return func(*args, **kwargs)

    def _attention(self, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
        call = _autocast_cast(attention.call_of(args, kwargs))
        backend, why = attention.choose(call)
        if backend is None:
            self.unmodelled_attention[(self._where(), why)] += 1
            return F.scaled_dot_product_attention(*args, **kwargs)
        training = torch.is_grad_enabled() and any(
            t.requires_grad for t in (call.query, call.key, call.value)
        )
        try:
            out = attention.run(call, backend)
        except RuntimeError as error:  # the backend's meta kernel refused: keep the CPU's
            self.unmodelled_attention[(self._where(), f"{backend} refused: {error}")] += 1
            return F.scaled_dot_product_attention(*args, **kwargs)
        self.attention_calls[(backend, self._where(), why)] += 1
        self.saved_bytes += attention.saved_bytes(call, backend, training)
        if attention.gpu_independent(call, backend) and not call.dropout_p:
            self.exact_attention += 1
        return out

    @staticmethod
    def _fused_dropout(args: tuple[Any, ...], kwargs: dict[str, Any]) -> bool:
        """What CUDA's ``dropout`` runs fused: training, 0 < p < 1, not in place, not empty."""
        p = _arg(args, kwargs, 1, "p", 0.5)
        training = _arg(args, kwargs, 2, "training", kwargs.get("train", True))
        inplace = _arg(args, kwargs, 3, "inplace", False)
        x = args[0] if args else kwargs.get("input")
        return (
            isinstance(x, torch.Tensor) and bool(training) and not inplace and 0 < p < 1
            and x.numel() > 0
        )  # fmt: skip

    def _autocast(self, name: str) -> None:
        self.autocast_regions.add(self._where())
        listing = autocast_listing(name)
        if listing is not None and listing[0] != listing[1]:
            self.autocast_ops.setdefault(name, set()).add(self._where())

    def autocast_turned_off(self, filename: str, lineno: int) -> None:
        """torch.autocast("cuda") was turned off by this torch (no CUDA), at the user's
        line that made it (torch warns with stacklevel 2: the caller of its constructor)."""
        self.cuda_autocast.append(f"{self._where()} at {filename}:{lineno}")

    def assumptions(self) -> list[str]:
        """The CUDA kernels the prediction took in place of the CPU's (report.assumptions)."""
        taken = []
        backends = Counter[str]()
        for (backend, _, _), count in self.attention_calls.items():
            backends[backend] += count
        for backend, count in sorted(backends.items()):
            taken.append(
                f"scaled_dot_product_attention: CUDA's {backend} kernel ({count} call(s)), "
                f"as torch chooses it for {attention.ASSUMED_GPU}"
            )
        if self.dropouts:
            taken.append(
                f"dropout: CUDA's fused native_dropout ({self.dropouts} call(s)), which saves "
                "a 1-byte bool mask (the CPU's dropout saves a mask in the input's dtype)"
            )
        return taken

    def diagnostics(self) -> list[Diagnostic]:
        """What the CUDA prediction followed, and what it did not, as the peak's warnings."""
        found = _attention_diagnostics(self)
        if self.cuda_autocast:
            found.append(
                Diagnostic(
                    code="cuda_autocast_not_run",
                    metric="peak",
                    count=len(self.cuda_autocast),
                    path=self.cuda_autocast[0].split(" at ")[0],
                    message=f"torch.autocast('cuda') was turned off by this CPU-only torch "
                    f"({_few(self.cuda_autocast)}): its region ran in its tensors' own "
                    "dtype, not cast by CUDA's autocast lists, so the region's activations, "
                    "saved tensors and cast weight copies are not CUDA's; the peak can be "
                    "higher or lower. Predict with torch.autocast('cpu', dtype=...) for "
                    "the CPU's lists, or on a CUDA build of torch",
                )
            )
        found += self._autocast_diagnostics()
        if self.rnn:
            names = sorted(self.rnn)
            paths = sorted(set().union(*self.rnn.values()))
            found.append(
                Diagnostic(
                    code="cuda_rnn_not_modelled",
                    metric="peak",
                    operator=", ".join(names),
                    path=paths[0],
                    message=f"{', '.join(names)} ran in {_few(paths)} on the CPU's kernels "
                    "(oneDNN, or the cell decomposition); on CUDA cuDNN keeps a reserve "
                    "space (and fused cells a workspace) of its own size, which is not "
                    "modelled: the peak can be higher or lower",
                )
            )
        return found

    def _autocast_diagnostics(self) -> list[Diagnostic]:
        if not self.autocast_regions:
            return []
        if not self.autocast_ops:
            return [
                Diagnostic(
                    code="cpu_autocast_lists",
                    severity="info",
                    metric="peak",
                    message="CPU autocast ran under a CUDA prediction; every operator it "
                    "ran is on both or neither of CPU's and CUDA's autocast lists (torch's "
                    "dispatcher), so its casts are taken as CUDA's",
                )
            ]
        differing = []
        for name, paths in sorted(self.autocast_ops.items()):
            cuda, _ = autocast_listing(name) or (False, False)
            differing.append(f"{name} ({'CUDA' if cuda else 'CPU'} list only, in {_few(paths)})")
        return [
            Diagnostic(
                code="cpu_autocast_lists",
                metric="peak",
                operator=", ".join(sorted(self.autocast_ops)),
                path=sorted(set().union(*self.autocast_ops.values()))[0],
                message="CPU autocast ran under a CUDA prediction, and these operators are on "
                f"one device's autocast list only (torch's dispatcher): {'; '.join(differing)}"
                ". Their outputs (and the tensors saved from them) take the CPU's dtype here, "
                "which may not be CUDA's (e.g. CUDA runs layer_norm and softmax in fp32): "
                "the peak can be higher or lower",
            )
        ]


def _autocast_cast(call: attention.Call) -> attention.Call:
    """Under CPU autocast, SDPA's inputs cast to its dtype, as both autocast lists do
    (scaled_dot_product_attention is lower precision on both), before a backend is chosen."""
    if not torch.is_autocast_enabled("cpu"):
        return call
    dtype = torch.get_autocast_dtype("cpu")

    def cast(t: Any) -> Any:
        return t.to(dtype) if isinstance(t, torch.Tensor) and t.is_floating_point() else t

    return dataclasses.replace(
        call, query=cast(call.query), key=cast(call.key), value=cast(call.value),
        attn_mask=cast(call.attn_mask),
    )  # fmt: skip


@contextlib.contextmanager
def following_cuda(modules: Any, enabled: bool) -> Iterator[CudaSemantics | None]:
    """The CUDA semantics mode for one fake run (None when the prediction is not CUDA's),
    catching the warning with which a CPU-only torch turns ``torch.autocast("cuda")`` off."""
    if not enabled:
        yield None
        return
    mode = CudaSemantics(modules)
    with warnings.catch_warnings():
        warnings.filterwarnings("always", message=CUDA_AUTOCAST_OFF)
        shown = warnings.showwarning

        def show(
            message: Warning | str,
            category: type[Warning],
            filename: str,
            lineno: int,
            file: TextIO | None = None,
            line: str | None = None,
        ) -> None:
            if str(message).startswith(CUDA_AUTOCAST_OFF):
                mode.autocast_turned_off(filename, lineno)
                return
            shown(message, category, filename, lineno, file, line)

        warnings.showwarning = show
        with mode:
            yield mode


def _arg(args: tuple[Any, ...], kwargs: dict[str, Any], index: int, name: str, default: Any) -> Any:
    return args[index] if len(args) > index else kwargs.get(name, default)


def _few(items: Any, limit: int = 3) -> str:
    listed = sorted(set(items))
    more = f" and {len(listed) - limit} more" if len(listed) > limit else ""
    return ", ".join(listed[:limit]) + more


def _attention_diagnostics(mode: CudaSemantics) -> list[Diagnostic]:
    found: list[Diagnostic] = []
    calls = mode.attention_calls
    total = sum(calls.values())
    if total > mode.exact_attention:
        by_backend = Counter[str]()
        for (backend, _, _), count in calls.items():
            by_backend[backend] += count
        summary = ", ".join(f"{n} x {b}" for b, n in sorted(by_backend.items()))
        reasons = sorted({f"{b} ({why})" for (b, _, why) in calls})
        paths = sorted({path for (_, path, _) in calls})
        found.append(
            Diagnostic(
                code="cuda_attention_backend",
                metric="peak",
                count=total,
                path=paths[0],
                operator="aten.scaled_dot_product_attention",
                message=f"scaled_dot_product_attention ran {total} time(s) in "
                f"{_few(paths)}; modelled as CUDA's {summary} for {attention.ASSUMED_GPU}: "
                f"{'; '.join(reasons)}. Each backend's outputs and saved tensors are "
                f"counted ({mode.saved_bytes:,} bytes of logsumexp in all, before rounding; "
                "the philox seed and offset as device blocks). Not counted: the fused "
                "kernels' transient scratch (e.g. flash backward's fp32 dq accumulator), "
                "so the peak can be higher; another GPU or backend setting may choose "
                "another backend",
            )
        )
    for (path, why), count in sorted(mode.unmodelled_attention.items()):
        found.append(
            Diagnostic(
                code="cuda_attention_not_modelled",
                metric="peak",
                count=count,
                path=path,
                operator="aten.scaled_dot_product_attention",
                message=f"scaled_dot_product_attention ran {count} time(s) in {path} with "
                f"the CPU's kernel ({why}); CUDA's backend keeps other saved tensors, "
                "which are not modelled: the peak can be higher or lower",
            )
        )
    return found

"""The benchmark model set, built in code (no downloads, seeded, locally initialised).

Every model takes ONE positional tensor ``x`` so that every peer can be called the same way
(ptflops' input constructor, thop's ``inputs``, torchinfo's ``input_data``...). Each entry
also carries a *bad* input (wrong shape or dtype) for the failing-call state check.
``size="full"`` is what ``make bench`` runs; ``size="tiny"`` is for the fast unit tests.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import nn

Size = str  # "full" | "tiny"


@dataclass
class BenchModel:
    """One model of the set with its call and a call that must fail."""

    name: str
    description: str
    build: Callable[[], nn.Module]
    make_input: Callable[[], torch.Tensor]
    make_bad_input: Callable[[], torch.Tensor]
    family: str = "main"  # "main" or "scaling"
    blocks: int | None = None  # scaling family only


# ----------------------------------------------------------------------------- models


def mlp(width: int = 512, depth: int = 6) -> nn.Module:
    layers: list[nn.Module] = [nn.Flatten()]
    for _ in range(depth):
        layers += [nn.Linear(width, width), nn.ReLU()]
    layers.append(nn.Linear(width, 10))
    return nn.Sequential(*layers)


class Bottleneck(nn.Module):
    """torchvision's ResNet bottleneck shape (1x1, 3x3 stride, 1x1 expand x4)."""

    def __init__(self, cin: int, width: int, stride: int) -> None:
        super().__init__()
        cout = width * 4
        self.conv1 = nn.Conv2d(cin, width, 1, bias=False)
        self.bn1 = nn.BatchNorm2d(width)
        self.conv2 = nn.Conv2d(width, width, 3, stride, 1, bias=False)
        self.bn2 = nn.BatchNorm2d(width)
        self.conv3 = nn.Conv2d(width, cout, 1, bias=False)
        self.bn3 = nn.BatchNorm2d(cout)
        self.relu = nn.ReLU(inplace=True)
        self.downsample: nn.Module | None = None
        if stride != 1 or cin != cout:
            self.downsample = nn.Sequential(
                nn.Conv2d(cin, cout, 1, stride, bias=False), nn.BatchNorm2d(cout)
            )

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        identity = x if self.downsample is None else self.downsample(x)
        out = self.relu(self.bn1(self.conv1(x)))
        out = self.relu(self.bn2(self.conv2(out)))
        return self.relu(self.bn3(self.conv3(out)) + identity)


def resnet50_shaped(base: int = 64, num_classes: int = 1000) -> nn.Module:
    """Bottleneck stages 3-4-6-3 as ResNet-50; ``base`` scales every width (64 = ResNet-50)."""
    layers: list[nn.Module] = [
        nn.Conv2d(3, base, 7, 2, 3, bias=False),
        nn.BatchNorm2d(base),
        nn.ReLU(inplace=True),
        nn.MaxPool2d(3, 2, 1),
    ]
    cin = base
    for mult, blocks, stride in ((1, 3, 1), (2, 4, 2), (4, 6, 2), (8, 3, 2)):
        width = base * mult
        for i in range(blocks):
            layers.append(Bottleneck(cin, width, stride if i == 0 else 1))
            cin = width * 4
    layers += [nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(cin, num_classes)]
    return nn.Sequential(*layers)


def depthwise_transposed_cnn(channels: int = 32) -> nn.Module:
    """Encoder with depthwise-separable convs, decoder with transposed convs (stride 2)."""
    c = channels
    return nn.Sequential(
        nn.Conv2d(3, c, 3, 2, 1),
        nn.ReLU(),
        nn.Conv2d(c, c, 3, 1, 1, groups=c),  # depthwise
        nn.Conv2d(c, 2 * c, 1),  # pointwise
        nn.BatchNorm2d(2 * c),
        nn.ReLU6(),
        nn.Conv2d(2 * c, 2 * c, 3, 2, 1, groups=2 * c),
        nn.Conv2d(2 * c, 4 * c, 1),
        nn.Hardswish(),
        nn.ConvTranspose2d(4 * c, 2 * c, 4, 2, 1),
        nn.ReLU(),
        nn.ConvTranspose2d(2 * c, c, 3, 2, 1, output_padding=1, groups=c),
        nn.Conv2d(c, 3, 1),
    )


def transformer_encoder(d_model: int = 256, heads: int = 8, layers: int = 4) -> nn.Module:
    layer = nn.TransformerEncoderLayer(d_model, heads, 4 * d_model, dropout=0.1, batch_first=True)
    return nn.TransformerEncoder(layer, layers, enable_nested_tensor=False)


class RecurrentModel(nn.Module):
    """LSTM (2 layers) feeding a GRU, then a linear head on the last step."""

    def __init__(self, features: int = 64, hidden: int = 128) -> None:
        super().__init__()
        self.lstm = nn.LSTM(features, hidden, num_layers=2, batch_first=True)
        self.gru = nn.GRU(hidden, hidden, batch_first=True)
        self.head = nn.Linear(hidden, 10)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        out, _ = self.lstm(x)
        out, _ = self.gru(out)
        return self.head(out[:, -1])


class FunctionalModel(nn.Module):
    """Work done by functional calls, invisible to module hooks: einsum, @, SDPA, layer_norm."""

    def __init__(self, dim: int = 128, heads: int = 4) -> None:
        super().__init__()
        self.heads = heads
        self.w_qkv = nn.Parameter(torch.randn(dim, 3 * dim) / dim**0.5)
        self.w_out = nn.Parameter(torch.randn(dim, dim) / dim**0.5)
        self.gamma = nn.Parameter(torch.ones(dim))
        self.beta = nn.Parameter(torch.zeros(dim))
        self.w_mix = nn.Parameter(torch.randn(dim, dim) / dim**0.5)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        b, t, d = x.shape
        h = F.layer_norm(x, (d,), self.gamma, self.beta)
        q, k, v = (h @ self.w_qkv).chunk(3, dim=-1)
        q, k, v = (z.reshape(b, t, self.heads, d // self.heads).transpose(1, 2) for z in (q, k, v))
        att = F.scaled_dot_product_attention(q, k, v)
        att = att.transpose(1, 2).reshape(b, t, d)
        out = torch.einsum("btd,de->bte", att, self.w_out)
        return x + torch.einsum("bte,ef->btf", out, self.w_mix)


class ScaledResidual(nn.Module):
    """A custom leaf: parameters and arithmetic of its own, no child modules."""

    def __init__(self, dim: int) -> None:
        super().__init__()
        self.weight = nn.Parameter(torch.randn(dim, dim) / dim**0.5)
        self.scale = nn.Parameter(torch.ones(dim))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x + torch.tanh(x @ self.weight) * self.scale


class SharedLeafModel(nn.Module):
    """A custom leaf plus one Linear called three times (a shared module)."""

    def __init__(self, dim: int = 256) -> None:
        super().__init__()
        self.shared = nn.Linear(dim, dim)
        self.custom = ScaledResidual(dim)
        self.act = nn.GELU()
        self.head = nn.Linear(dim, 10)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.act(self.shared(x))
        x = self.custom(x)
        x = self.act(self.shared(x))
        x = self.act(self.shared(x))
        return self.head(x)


class TokenConvModel(nn.Module):
    """Embedding -> Conv1d stack over the sequence -> mean pool -> classifier."""

    def __init__(self, vocab: int = 5000, dim: int = 128, classes: int = 5) -> None:
        super().__init__()
        self.embed = nn.Embedding(vocab, dim)
        self.conv1 = nn.Conv1d(dim, dim, 5, padding=2)
        self.conv2 = nn.Conv1d(dim, dim, 3, padding=1, dilation=1)
        self.act = nn.ReLU()
        self.pool = nn.AdaptiveAvgPool1d(1)
        self.head = nn.Linear(dim, classes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = self.embed(x).transpose(1, 2)
        h = self.act(self.conv2(self.act(self.conv1(h))))
        return self.head(self.pool(h).flatten(1))


class ScalingBlock(nn.Module):
    """The repeated unit of the scaling family: Linear + ReLU in a block."""

    def __init__(self, dim: int) -> None:
        super().__init__()
        self.fc = nn.Linear(dim, dim)
        self.act = nn.ReLU()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.act(self.fc(x))


def scaling_model(blocks: int, dim: int = 16) -> nn.Module:
    return nn.Sequential(*[ScalingBlock(dim) for _ in range(blocks)])


# ----------------------------------------------------------------------------- the set


_FULL = {
    "mlp": dict(width=512, batch=8),
    "resnet50": dict(base=64, res=224),
    "dw_transposed_cnn": dict(channels=32, res=128),
    "transformer": dict(d_model=256, heads=8, layers=4, seq=128),
    "recurrent": dict(features=64, hidden=128, seq=64),
    "functional": dict(dim=128, heads=4, seq=128),
    "shared_leaf": dict(dim=256, batch=16),
    "token_conv": dict(vocab=5000, dim=128, seq=256),
}
_TINY = {
    "mlp": dict(width=16, batch=2),
    "resnet50": dict(base=4, res=32),
    "dw_transposed_cnn": dict(channels=4, res=16),
    "transformer": dict(d_model=16, heads=2, layers=2, seq=8),
    "recurrent": dict(features=8, hidden=8, seq=5),
    "functional": dict(dim=16, heads=2, seq=8),
    "shared_leaf": dict(dim=8, batch=2),
    "token_conv": dict(vocab=50, dim=8, seq=12),
}
SCALING_BLOCKS = (100, 1000, 5000)
SCALING_DIM = 16


def _seeded(fn: Callable[[], nn.Module]) -> Callable[[], nn.Module]:
    def build() -> nn.Module:
        torch.manual_seed(0)
        return fn()

    return build


def _gen(shape: tuple[int, ...], *, seed: int = 1) -> Callable[[], torch.Tensor]:
    def make() -> torch.Tensor:
        return torch.randn(shape, generator=torch.Generator().manual_seed(seed))

    return make


def _tokens(vocab: int, shape: tuple[int, ...]) -> Callable[[], torch.Tensor]:
    def make() -> torch.Tensor:
        return torch.randint(0, vocab, shape, generator=torch.Generator().manual_seed(1))

    return make


def model_set(
    size: Size = "full", *, scaling: tuple[int, ...] = SCALING_BLOCKS
) -> list[BenchModel]:
    """The whole set in a fixed order: the eight main models, then the scaling family."""
    if size not in ("full", "tiny"):
        raise ValueError(f"size must be 'full' or 'tiny', got {size!r}")
    p = _FULL if size == "full" else _TINY
    m, r, d = p["mlp"], p["resnet50"], p["dw_transposed_cnn"]
    t, rec, fn = p["transformer"], p["recurrent"], p["functional"]
    sh, tok = p["shared_leaf"], p["token_conv"]
    models = [
        BenchModel(
            "mlp",
            f"7 Linear ({m['width']} wide) + ReLU, batch {m['batch']}",
            _seeded(lambda: mlp(m["width"])),
            _gen((m["batch"], m["width"])),
            _gen((m["batch"], m["width"] + 1)),
        ),
        BenchModel(
            "resnet50",
            f"ResNet-50-shaped CNN (bottlenecks 3-4-6-3, base width {r['base']}), "
            f"1x3x{r['res']}x{r['res']}",
            _seeded(lambda: resnet50_shaped(r["base"])),
            _gen((1, 3, r["res"], r["res"])),
            _gen((1, 4, r["res"], r["res"])),
        ),
        BenchModel(
            "dw_transposed_cnn",
            f"depthwise-separable + transposed convs, 1x3x{d['res']}x{d['res']}",
            _seeded(lambda: depthwise_transposed_cnn(d["channels"])),
            _gen((1, 3, d["res"], d["res"])),
            _gen((1, 5, d["res"], d["res"])),
        ),
        BenchModel(
            "transformer",
            f"nn.TransformerEncoder {t['layers']} layers, d={t['d_model']}, "
            f"{t['heads']} heads, 1x{t['seq']} tokens",
            _seeded(lambda: transformer_encoder(t["d_model"], t["heads"], t["layers"])),
            _gen((1, t["seq"], t["d_model"])),
            _gen((1, t["seq"], t["d_model"] + 1)),
        ),
        BenchModel(
            "recurrent",
            f"2-layer LSTM + GRU (hidden {rec['hidden']}), 1x{rec['seq']} steps",
            _seeded(lambda: RecurrentModel(rec["features"], rec["hidden"])),
            _gen((1, rec["seq"], rec["features"])),
            _gen((1, rec["seq"], rec["features"] + 1)),
        ),
        BenchModel(
            "functional",
            f"einsum, @, F.scaled_dot_product_attention, F.layer_norm (d={fn['dim']}), "
            f"1x{fn['seq']} tokens",
            _seeded(lambda: FunctionalModel(fn["dim"], fn["heads"])),
            _gen((1, fn["seq"], fn["dim"])),
            _gen((1, fn["seq"], fn["dim"] + 1)),
        ),
        BenchModel(
            "shared_leaf",
            f"custom leaf module + one Linear called 3 times (d={sh['dim']}), batch {sh['batch']}",
            _seeded(lambda: SharedLeafModel(sh["dim"])),
            _gen((sh["batch"], sh["dim"])),
            _gen((sh["batch"], sh["dim"] + 1)),
        ),
        BenchModel(
            "token_conv",
            f"Embedding({tok['vocab']}, {tok['dim']}) + 2 Conv1d, 1x{tok['seq']} tokens",
            _seeded(lambda: TokenConvModel(tok["vocab"], tok["dim"])),
            _tokens(tok["vocab"], (1, tok["seq"])),
            _gen((1, tok["seq"])),  # float indices: embedding refuses them
        ),
    ]
    for n in scaling:
        models.append(
            BenchModel(
                f"scaling_{n}",
                f"{n} x (Linear({SCALING_DIM},{SCALING_DIM}) + ReLU) blocks, batch 1",
                _seeded(lambda n=n: scaling_model(n, SCALING_DIM)),  # type: ignore[misc]
                _gen((1, SCALING_DIM)),
                _gen((1, SCALING_DIM + 1)),
                family="scaling",
                blocks=n,
            )
        )
    return models


# Module types whose forward depends on ``training``; everything else behaves the same in
# both modes, which lets the state check start from mixed flags without changing the maths.
MODE_DEPENDENT: tuple[type[nn.Module], ...] = (
    nn.modules.dropout._DropoutNd,
    nn.modules.batchnorm._NormBase,
    nn.RNNBase,
    nn.MultiheadAttention,
    nn.TransformerEncoderLayer,
    nn.TransformerEncoder,
)


def set_mixed_modes(model: nn.Module) -> nn.Module:
    """Eval for mode-dependent modules, train for all others: eval maths, mixed flags.

    Why: a tool that calls ``model.eval()`` and restores only the root flag, or restores with
    ``model.train(root_flag)``, leaves visibly different flags; an all-eval model would hide it.
    """
    for module in model.modules():
        module.training = not isinstance(module, MODE_DEPENDENT)
    return model


# ----------------------------------------------------------------------------- MoE on meta


class MoELayer(nn.Module):
    """One DeepSeek-V3-shaped MoE layer: ``experts`` SwiGLU experts, each called on ``x``.

    Per expert, three bias-free ``nn.Linear`` modules in three ModuleLists (gate, up, down):
    ``down(silu(gate(x)) * up(x))``, added to the residual. Every expert runs on every token
    (no router), so the call count and MACs have a closed form; on ``meta`` nothing computes.
    """

    def __init__(self, hidden: int, intermediate: int, experts: int, device: str) -> None:
        super().__init__()

        def linears(cin: int, cout: int) -> nn.ModuleList:
            return nn.ModuleList(
                nn.Linear(cin, cout, bias=False, device=device) for _ in range(experts)
            )

        self.gate_proj = linears(hidden, intermediate)
        self.up_proj = linears(hidden, intermediate)
        self.down_proj = linears(intermediate, hidden)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        out = x
        for gate, up, down in zip(self.gate_proj, self.up_proj, self.down_proj, strict=True):
            out = out + down(F.silu(gate(x)) * up(x))
        return out


def moe_model(
    layers: int = 61,
    experts: int = 256,
    hidden: int = 7168,
    intermediate: int = 2048,
    device: str = "meta",
) -> nn.Module:
    """DeepSeek-V3-shaped MoE stack (61 x 256 experts x 3 Linear = 46,848 Linear calls).

    Built on ``meta`` by default: 687 G parameters that take no memory, for crawls of a
    model's structure and formulas at full size.
    """
    return nn.Sequential(*[MoELayer(hidden, intermediate, experts, device) for _ in range(layers)])

"""A Llama-style decoder defined here, for the prediction tests (no downloads).

RMSNorm, rotary-free multi-head attention with grouped key/value heads through
``scaled_dot_product_attention``, a SwiGLU MLP, untied embedding and head. Its parameter
count has a closed form (``decoder_parameters``) that the tests check against the model.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import nn


@dataclass(frozen=True)
class DecoderShape:
    vocab: int
    dim: int
    layers: int
    heads: int
    kv_heads: int
    hidden: int


# Llama-3-70B's published shape: 80 layers, d=8192, 64 heads, 8 KV heads, FFN 28672, vocab 128256
LLAMA_70B = DecoderShape(vocab=128256, dim=8192, layers=80, heads=64, kv_heads=8, hidden=28672)
SMALL = DecoderShape(vocab=256, dim=64, layers=2, heads=4, kv_heads=2, hidden=128)


class RMSNorm(nn.Module):
    def __init__(self, dim: int) -> None:
        super().__init__()
        self.weight = nn.Parameter(torch.ones(dim))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + 1e-5) * self.weight


class Attention(nn.Module):
    def __init__(self, s: DecoderShape) -> None:
        super().__init__()
        self.heads, self.kv_heads, self.head_dim = s.heads, s.kv_heads, s.dim // s.heads
        self.q = nn.Linear(s.dim, s.dim, bias=False)
        self.k = nn.Linear(s.dim, s.kv_heads * self.head_dim, bias=False)
        self.v = nn.Linear(s.dim, s.kv_heads * self.head_dim, bias=False)
        self.o = nn.Linear(s.dim, s.dim, bias=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        b, t, _ = x.shape
        q = self.q(x).view(b, t, self.heads, self.head_dim).transpose(1, 2)
        k = self.k(x).view(b, t, self.kv_heads, self.head_dim).transpose(1, 2)
        v = self.v(x).view(b, t, self.kv_heads, self.head_dim).transpose(1, 2)
        y = F.scaled_dot_product_attention(q, k, v, is_causal=True, enable_gqa=True)
        return self.o(y.transpose(1, 2).reshape(b, t, -1))


class MLP(nn.Module):
    def __init__(self, s: DecoderShape) -> None:
        super().__init__()
        self.gate = nn.Linear(s.dim, s.hidden, bias=False)
        self.up = nn.Linear(s.dim, s.hidden, bias=False)
        self.down = nn.Linear(s.hidden, s.dim, bias=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.down(F.silu(self.gate(x)) * self.up(x))


class Block(nn.Module):
    def __init__(self, s: DecoderShape) -> None:
        super().__init__()
        self.norm1, self.attn = RMSNorm(s.dim), Attention(s)
        self.norm2, self.mlp = RMSNorm(s.dim), MLP(s)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x + self.attn(self.norm1(x))
        return x + self.mlp(self.norm2(x))


class Decoder(nn.Module):
    def __init__(self, s: DecoderShape, *, checkpointing: bool = False) -> None:
        super().__init__()
        self.embed = nn.Embedding(s.vocab, s.dim)
        self.blocks = nn.ModuleList(Block(s) for _ in range(s.layers))
        self.norm = RMSNorm(s.dim)
        self.head = nn.Linear(s.dim, s.vocab, bias=False)
        self.checkpointing = checkpointing

    def forward(self, tokens: torch.Tensor) -> torch.Tensor:
        x = self.embed(tokens)
        for block in self.blocks:
            if self.checkpointing:
                x = torch.utils.checkpoint.checkpoint(block, x, use_reentrant=False)
            else:
                x = block(x)
        return self.head(self.norm(x))


def decoder_parameters(s: DecoderShape) -> int:
    """Closed form: embedding + head (2·V·d), per layer q,o (2·d²) + k,v (2·d·kv·d/h) +
    MLP (3·d·f) + two norms (2·d), final norm d."""
    kv = s.kv_heads * (s.dim // s.heads)
    per_layer = 2 * s.dim * s.dim + 2 * s.dim * kv + 3 * s.dim * s.hidden + 2 * s.dim
    return 2 * s.vocab * s.dim + s.layers * per_layer + s.dim


def built_in(dtype: torch.dtype, s: DecoderShape) -> Decoder:
    """The decoder built in ``dtype`` (fake modules cannot be cast after building)."""
    before = torch.get_default_dtype()
    torch.set_default_dtype(dtype)
    try:
        return Decoder(s)
    finally:
        torch.set_default_dtype(before)


def mixed_precision_step(s: DecoderShape, batch: int, tokens: int) -> None:
    """One training step as large-model trainers run it: bf16 weights and gradients, fp32
    master copies that AdamW updates (its moments fp32 too), the bf16 gradients copied into
    fp32 master gradients and freed before the step, the new weights copied back."""
    model = built_in(torch.bfloat16, s)
    masters = [p.detach().float().requires_grad_() for p in model.parameters()]
    optimizer = torch.optim.AdamW(masters)
    ids = torch.randint(0, s.vocab, (batch, tokens))
    model(ids).float().pow(2).mean().backward()
    with torch.no_grad():
        for master, weight in zip(masters, model.parameters(), strict=True):
            master.grad = weight.grad.float()  # type: ignore[union-attr]
            weight.grad = None
    optimizer.step()
    with torch.no_grad():
        for master, weight in zip(masters, model.parameters(), strict=True):
            weight.copy_(master)

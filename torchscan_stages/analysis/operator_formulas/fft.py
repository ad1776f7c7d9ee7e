"""Fast Fourier transforms: the FFT literature's nominal count, not a kernel's.

A complex transform of N points (N = the product of the transformed sizes) counts
``5 * N * log2 N`` FLOPs, a real-input or real-output one ``2.5 * N * log2 N`` -- the radix-2
Cooley-Tukey operation counts that FFTW's benchmarks report "mflops" by, whatever algorithm
the kernel picks for the size; rounded to the nearest integer per transform. Normalisation
(``norm="ortho"`` / ``"forward"``, or the default backward scaling) adds 1 per output
element. Every batch row along the other dimensions is one transform.
"""

from __future__ import annotations

from math import log2, prod
from typing import Any

from ._registry import convention, numel, register_formula, shape

convention(
    "fft",
    "complex FFT of N points 5*N*log2(N), real-input/real-output 2.5*N*log2(N) (FFTW's "
    "nominal count), rounded per transform; normalisation +1 per output element",
)


def fft_flops(transform_shape: tuple[int, ...], total: int, *, real: bool) -> int:
    """FLOPs of ``total / N`` transforms of N = prod(transform_shape) points each."""
    points = prod(transform_shape)
    if points <= 1:
        return 0
    per_transform = round((2.5 if real else 5.0) * points * log2(points))
    return (total // points) * per_transform


def _dims(x_shape: tuple[int, ...], dims: Any) -> tuple[int, ...]:
    return tuple(x_shape[d % len(x_shape)] for d in dims)


def _normalised(normalization: Any, out: Any) -> int:
    return numel(out) if normalization else 0


def _c2c(args: tuple[Any, ...], kwargs: dict[str, Any], out: Any) -> int:
    """_fft_c2c(self, dim, normalization, forward): complex in, complex out."""
    x = shape(args[0])
    return fft_flops(_dims(x, args[1]), numel(args[0]), real=False) + _normalised(args[2], out)


def _r2c(args: tuple[Any, ...], kwargs: dict[str, Any], out: Any) -> int:
    """_fft_r2c(self, dim, normalization, onesided): the real input's points."""
    x = shape(args[0])
    return fft_flops(_dims(x, args[1]), numel(args[0]), real=True) + _normalised(args[2], out)


def _c2r(args: tuple[Any, ...], kwargs: dict[str, Any], out: Any) -> int:
    """_fft_c2r(self, dim, normalization, last_dim_size): the real output's points."""
    y = shape(out)
    return fft_flops(_dims(y, args[1]), numel(out), real=True) + _normalised(args[2], out)


register_formula(_c2c, "_fft_c2c")
register_formula(_r2c, "_fft_r2c")
register_formula(_c2r, "_fft_c2r")

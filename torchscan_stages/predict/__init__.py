"""Prediction before running: peak memory of a step on fake tensors, without the hardware.

Never: runs real kernels on data.
"""

from __future__ import annotations

from .peak import predict_peak_memory

__all__ = ["predict_peak_memory"]

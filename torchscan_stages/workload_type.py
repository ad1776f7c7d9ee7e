"""The one name for what every measurement takes: a zero-argument callable.

A workload owns its model state, grad mode, precision, transfers and inputs; measuring it
only calls it. Its return value is the output that comparisons hand to the owner's check.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

Workload = Callable[[], Any]

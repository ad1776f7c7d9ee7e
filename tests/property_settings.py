"""Hypothesis settings shared by the property tests (test_properties.py, test_report_codec.py).

A few derandomized examples per test keep the suite fast and repeatable on a loaded machine;
``TORCHSCAN_LONG_PROPERTIES=1`` runs 25 times as many, randomized, for a long search.
"""

from __future__ import annotations

import os

from hypothesis import HealthCheck, settings

LONG = os.environ.get("TORCHSCAN_LONG_PROPERTIES") == "1"


def property_settings(ci_examples: int) -> settings:
    return settings(
        max_examples=ci_examples * 25 if LONG else ci_examples,
        derandomize=not LONG,
        deadline=None,  # the host is shared and loaded: never a time limit per example
        database=None,
        suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
    )

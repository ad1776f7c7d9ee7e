"""Served inference on MLPerf LoadGen: per-request latency under load, capacity at a bound.

LoadGen (the field's harness, ``mlcommons-loadgen``; the ``serve`` extra) generates the load
and judges the run's validity; this package owns the server loop (batching, timeouts, token
streams), the scopes and the completeness of every figure. Modules: ``options`` (the one
``ServeOptions``), ``handler`` (the handler contract other modules build on), ``server`` (the
loop), ``scenarios`` (LoadGen's settings), ``loadgen_run`` and ``loadgen_log`` (one test and
its logs), ``percentiles`` (when requests support a percentile), ``figures`` (the figures),
``measure`` (``measure_served``) and ``capacity`` (``served_capacity``).

Never: renders, or mixes a served percentile with a warmed block average.
"""

from __future__ import annotations

from .handler import BatchHandler, RequestHandler, TokenStream, is_token_stream
from .options import SCENARIOS, ServeOptions

__all__ = [
    "SCENARIOS",
    "BatchHandler",
    "RequestHandler",
    "ServeOptions",
    "TokenStream",
    "is_token_stream",
]

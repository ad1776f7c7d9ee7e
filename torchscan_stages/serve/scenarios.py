"""The package's scenario names and options, written as LoadGen's TestSettings fields.

Pure: a dict of field name -> value (enum members by name), so it is tested without LoadGen.
The seeds are the caller's (LoadGen's own defaults come from an mlperf.conf this package does
not read); every duration is LoadGen's nanoseconds or milliseconds.
"""

from __future__ import annotations

from typing import Any

from .options import ServeOptions

LOADGEN_SCENARIO = {
    "single_stream": "SingleStream",
    "multi_stream": "MultiStream",
    "server": "Server",
    "offline": "Offline",
}


def _ns(seconds: float) -> int:
    return max(1, round(seconds * 1e9))


def loadgen_fields(
    scenario: str, options: ServeOptions, *, tokens: bool, expected_latency_s: float
) -> dict[str, Any]:
    """TestSettings for one performance run of ``scenario``.

    ``expected_latency_s``: one handler call (the warm-up's), LoadGen's expectation for the
    closed-loop scenarios and the offline rate when no ``target_qps`` is given. Without a
    bound, the latency target is the request timeout (nothing can take longer and pass).
    """
    if scenario == "server" and options.target_qps is None:
        raise ValueError("scenario 'server' needs options target_qps (the offered rate, > 0)")
    target_ns = _ns(options.bound_s if options.bound_s is not None else options.request_timeout_s)
    quantile = options.percentile / 100.0
    fields: dict[str, Any] = {
        "scenario": LOADGEN_SCENARIO[scenario],
        "mode": "PerformanceOnly",
        "min_duration_ms": max(1, round(options.duration_s * 1000)),
        "max_duration_ms": max(1, round(options.stop_after_s * 1000)),
        "min_query_count": options.min_queries,
        "qsl_rng_seed": options.seed,
        "sample_index_rng_seed": options.seed,
        "schedule_rng_seed": options.seed,
        "use_token_latencies": tokens,
    }
    expected = max(expected_latency_s, 1e-5)
    # closed loops: LoadGen pre-generates 2x the queries it expects and stops once its minimums
    # are met, so a quarter of the warm-up keeps a faster run from running out of queries
    closed = max(expected / 4, 1e-5)
    if scenario == "server":
        fields |= {
            "server_target_qps": float(options.target_qps),  # type: ignore[arg-type]
            "server_target_latency_ns": target_ns,
            "server_target_latency_percentile": quantile,
        }
    elif scenario == "single_stream":
        fields |= {
            "single_stream_expected_latency_ns": _ns(closed),
            "single_stream_target_latency_percentile": quantile,
        }
    elif scenario == "multi_stream":
        fields |= {
            "multi_stream_samples_per_query": options.samples_per_query,
            "multi_stream_expected_latency_ns": _ns(closed * options.samples_per_query),
            "multi_stream_target_latency_percentile": quantile,
        }
    else:
        rate = options.target_qps or options.workers * options.max_batch / expected
        fields["offline_expected_qps"] = float(rate)
    if tokens:
        fields |= {"ttft_latency": target_ns, "tpot_latency": target_ns}
    return fields

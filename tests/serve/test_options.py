"""ServeOptions refuse bad settings before anything runs; scenarios become LoadGen fields."""

from __future__ import annotations

import math

import pytest

from torchscan_stages.serve.options import ServeOptions, check_scenario
from torchscan_stages.serve.scenarios import loadgen_fields


@pytest.mark.parametrize(
    ("field", "value"),
    [
        ("target_qps", 0),
        ("target_qps", -5.0),
        ("target_qps", math.nan),
        ("target_qps", 1e12),
        ("duration_s", 0),
        ("duration_s", -1.0),
        ("duration_s", math.inf),
        ("bound_s", 0.0),
        ("bound_s", math.nan),
        ("bound_s", -0.01),
        ("percentile", 100.0),
        ("max_batch", 0),
        ("max_wait_s", -1.0),
        ("request_timeout_s", 0),
        ("workers", 0),
        ("min_queries", True),
    ],
)
def test_a_bad_value_is_refused_in_one_line_naming_the_field(field: str, value: object) -> None:
    with pytest.raises((ValueError, TypeError), match=f"ServeOptions.{field}") as error:
        ServeOptions(**{field: value})  # type: ignore[arg-type]
    assert "\n" not in str(error.value)


def test_a_string_number_is_a_type_error() -> None:
    with pytest.raises(TypeError, match=r"ServeOptions\.target_qps must be a number, got str"):
        ServeOptions(target_qps="100")  # type: ignore[arg-type]


def test_options_come_from_a_mapping_and_unknown_keys_are_named() -> None:
    assert ServeOptions.from_mapping({"target_qps": 50}).target_qps == 50
    with pytest.raises(ValueError, match=r"unknown key\(s\) \['qps'\]"):
        ServeOptions.from_mapping({"qps": 50})
    with pytest.raises(ValueError, match="max_duration_s"):
        ServeOptions(duration_s=2.0, max_duration_s=1.0)
    with pytest.raises(ValueError, match="scenario must be one of"):
        check_scenario("burst")


def test_server_fields_carry_the_rate_bound_and_seeds() -> None:
    options = ServeOptions(target_qps=250, duration_s=2.0, bound_s=0.01, seed=7)
    fields = loadgen_fields("server", options, tokens=False, expected_latency_s=0.002)
    assert fields["scenario"] == "Server" and fields["mode"] == "PerformanceOnly"
    assert fields["server_target_qps"] == 250.0
    assert fields["server_target_latency_ns"] == 10_000_000  # 0.01 s
    assert fields["server_target_latency_percentile"] == 0.99
    # max duration: 4 x 2 s + 2 s = 10 s
    assert (fields["min_duration_ms"], fields["max_duration_ms"]) == (2000, 10_000)
    assert fields["schedule_rng_seed"] == fields["qsl_rng_seed"] == 7
    assert fields["use_token_latencies"] is False
    with pytest.raises(ValueError, match="needs options target_qps"):
        loadgen_fields("server", ServeOptions(), tokens=False, expected_latency_s=0.002)


def test_closed_loop_fields_take_the_warm_up_latency() -> None:
    options = ServeOptions(samples_per_query=4, max_batch=2, workers=3)
    single = loadgen_fields("single_stream", options, tokens=True, expected_latency_s=0.002)
    # a quarter of the warm-up's 2 ms (LoadGen pre-generates from it and exits early)
    assert single["single_stream_expected_latency_ns"] == 500_000
    # no bound: token targets are the request timeout (30 s)
    assert single["ttft_latency"] == single["tpot_latency"] == 30_000_000_000
    multi = loadgen_fields("multi_stream", options, tokens=False, expected_latency_s=0.002)
    assert multi["multi_stream_expected_latency_ns"] == 2_000_000  # 4 samples x 2 ms / 4
    offline = loadgen_fields("offline", options, tokens=False, expected_latency_s=0.002)
    # no target_qps: 3 workers x batches of 2 / 2 ms = 3000 samples/s
    assert offline["offline_expected_qps"] == pytest.approx(3000.0)

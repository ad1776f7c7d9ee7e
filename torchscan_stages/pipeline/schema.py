"""The one typed schema of the pipeline's composed configuration.

Every stage, the rss child and notebook users validate the same composed dict (params.yaml
or a Hydra composition) against these models. Unknown keys are refused and every error
names the key, the value and what was expected, so a typo never runs a silently different
measurement. Owner thresholds (tolerances) have no defaults: Hydra's ``???`` marks them.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

MISSING = "???"
SEED_MAX = 2**63 - 1

Dtype = Literal["float32", "bfloat16", "float16"]


class ConfigError(ValueError):
    """A configuration problem, phrased as one line that names the key."""


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, strict=True, populate_by_name=True)


class FactoryConfig(_Strict):
    """An importable factory (``_target_``) called with ``kwargs``; ``revision`` keys caches."""

    target: str = Field(alias="_target_", min_length=1)
    name: str = Field(min_length=1)
    revision: str = Field(min_length=1)
    kwargs: dict[str, Any] = Field(default_factory=dict)


class ModelConfig(FactoryConfig):
    pass


class InputConfig(FactoryConfig):
    """The factory returns positional inputs (a tuple or one tensor) or keyword inputs (a dict)."""

    work_units: float = Field(gt=0)
    unit: str = Field(min_length=1)


class DeviceConfig(_Strict):
    type: Literal["cpu", "cuda"]
    index: int | None = Field(default=None, ge=0)


class PrecisionConfig(_Strict):
    """``cast`` converts the model and floating inputs; ``autocast`` wraps the call."""

    name: str = Field(min_length=1)
    dtype: Dtype
    apply: Literal["cast", "autocast"]


class CompileConfig(_Strict):
    backend: str = Field(min_length=1)
    mode: str | None = None
    fullgraph: bool = False
    dynamic: bool | None = None


class Tolerance(_Strict):
    """The owner's output check: ``torch.allclose(base, cand, rtol, atol)``. No defaults."""

    rtol: Annotated[float, Field(ge=0)] | Literal["???"]
    atol: Annotated[float, Field(ge=0)] | Literal["???"]

    def required(self, prefix: str = "candidate.tolerance") -> tuple[float, float]:
        """(rtol, atol), refusing the ``???`` marker with the key's name."""
        for key in ("rtol", "atol"):
            if getattr(self, key) == MISSING:
                raise ConfigError(
                    f"{prefix}.{key} is required and has no default ('???'): "
                    "it is the owner's output-check tolerance"
                )
        return float(self.rtol), float(self.atol)


class CandidateConfig(_Strict):
    """One optimisation applied on top of the baseline workload."""

    name: str = Field(min_length=1)
    precision: PrecisionConfig | None = None
    channels_last: bool = False
    compile: CompileConfig | None = None
    inference_mode: bool = False
    tolerance: Tolerance


class CrawlSettings(_Strict):
    mode: Literal["full", "structure"]
    # crawl_module's fill_from_operators=True: a module without a formula takes its own
    # operator FLOPs under its own method (what a partial HF crawl's diagnostic suggests)
    fill_from_operators: bool = False


class FlopsSettings(_Strict):
    strict: bool


class MemorySettings(_Strict):
    pass


class _Timing(_Strict):
    """Seconds, as measure_latency and compare_benchmarks take them."""

    warmup: float = Field(ge=0, allow_inf_nan=False)
    min_run_time: float = Field(gt=0, allow_inf_nan=False)
    max_run_time: float = Field(gt=0, allow_inf_nan=False)

    @model_validator(mode="after")
    def _ordered(self) -> _Timing:
        if self.max_run_time < self.min_run_time:
            raise ValueError(
                f"max_run_time ({self.max_run_time}) must be >= min_run_time ({self.min_run_time})"
            )
        return self


class LatencySettings(_Timing):
    pass


class RssSettings(_Strict):
    timeout: float = Field(gt=0, allow_inf_nan=False)


class ProfileSettings(_Strict):
    row_limit: int = Field(ge=1)


class CompareSettings(_Timing):
    pass


class PredictSettings(_Strict):
    """The predict stage: which step to run on fake tensors and which allocator to model."""

    mode: Literal["inference", "training"] = "training"
    optimizer: Literal["adamw", "sgd", "none"] = "adamw"
    device: Literal["cuda", "cpu"] = "cuda"
    capacity_bytes: int | None = Field(default=None, gt=0)  # the owner's memory; no default
    # per-rank prediction: FSDP2 fully_shard on a fake world of world_size ranks,
    # or DDP (the model wrapped once: its gradient buckets)
    sharding: Literal["none", "fsdp2", "ddp"] = "none"
    world_size: int = Field(default=1, ge=1)
    # batches for the peak-vs-batch curve and fits grid (input.kwargs.batch_size each)
    batches: list[Annotated[int, Field(ge=1)]] = Field(default_factory=list)


class ServeSettings(_Strict):
    """The serve stage: ServeOptions's fields a pipeline sets, and the LoadGen scenario."""

    scenario: Literal["single_stream", "server", "offline", "multi_stream"] = "single_stream"
    target_qps: float | None = Field(default=None, gt=0, le=1e6, allow_inf_nan=False)
    duration_s: float = Field(default=1.0, gt=0, le=86400, allow_inf_nan=False)
    min_queries: int = Field(default=1, ge=1)
    bound_s: float | None = Field(default=None, gt=0, le=86400, allow_inf_nan=False)
    percentile: float = Field(default=99.0, gt=0, le=99.999)
    max_batch: int = Field(default=1, ge=1, le=65536)
    max_wait_s: float = Field(default=0.0, ge=0, le=86400, allow_inf_nan=False)
    request_timeout_s: float = Field(default=30.0, gt=0, le=86400, allow_inf_nan=False)
    # set: a request is one prompt row streamed greedily for this many tokens (a causal LM)
    max_new_tokens: int | None = Field(default=None, ge=1, le=65536)

    @model_validator(mode="after")
    def _rate_for_server(self) -> ServeSettings:
        if self.scenario == "server" and self.target_qps is None:
            raise ValueError("target_qps: scenario 'server' needs an offered rate (> 0)")
        if self.max_new_tokens is not None and self.max_batch > 1:
            raise ValueError(
                f"max_new_tokens = {self.max_new_tokens} streams tokens one request at a time: "
                f"max_batch must be 1, got {self.max_batch}"
            )
        return self

    def options(self) -> dict[str, Any]:
        """The ServeOptions mapping (everything but the scenario and the token setting)."""
        return self.model_dump(exclude={"scenario", "max_new_tokens"})


class Budgets(_Strict):
    """Owner budgets; ``None`` means no budget (nothing is invented)."""

    peak_memory_bytes: int | None = Field(default=None, ge=0)
    latency_median_s: float | None = Field(default=None, gt=0, allow_inf_nan=False)
    peak_rss_bytes: int | None = Field(default=None, ge=0)


class PipelineConfig(_Strict):
    """The composed configuration (params.yaml)."""

    model: ModelConfig
    input: InputConfig
    device: DeviceConfig
    precision: PrecisionConfig
    threads: int = Field(ge=1)
    # torch.manual_seed takes at most 64 bits; a signed 63-bit range also fits numpy/C.
    seed: int = Field(ge=0, le=SEED_MAX)
    crawl: CrawlSettings
    flops: FlopsSettings
    memory: MemorySettings
    latency: LatencySettings
    rss: RssSettings
    profile: ProfileSettings
    compare: CompareSettings
    candidate: CandidateConfig
    budgets: Budgets
    predict: PredictSettings = PredictSettings()
    serve: ServeSettings = ServeSettings()


def _find_missing(node: Any, path: str) -> list[str]:
    if isinstance(node, str) and node == MISSING:
        return [path]
    if isinstance(node, dict):
        found: list[str] = []
        for key, value in node.items():
            found += _find_missing(value, f"{path}.{key}" if path else str(key))
        return found
    if isinstance(node, list):
        return [m for i, item in enumerate(node) for m in _find_missing(item, f"{path}[{i}]")]
    return []


_UNION_TAGS = {"float", "int", "str", "bool", "none", "dict", "list"}


def _key(loc: tuple[Any, ...]) -> str:
    """The dotted config key of an error location, without pydantic's union-member tags."""
    parts = [
        str(part)
        for part in loc
        if not (
            isinstance(part, str)
            and ("[" in part or "-" in part or part in _UNION_TAGS or part[:1].isupper())
        )
    ]
    return ".".join(parts)


def _describe(error: dict[str, Any], data: Any) -> str:
    """One line for one pydantic error: key, value, expectation."""
    key = _key(tuple(error["loc"]))
    kind = error["type"]
    if kind == "extra_forbidden":
        parent_loc = key.split(".")[:-1]
        model: type[BaseModel] = PipelineConfig
        for part in parent_loc:
            field = model.model_fields.get(str(part))
            annotation = getattr(field, "annotation", None)
            candidates = [a for a in getattr(annotation, "__args__", (annotation,))]
            model = next(
                (a for a in candidates if isinstance(a, type) and issubclass(a, BaseModel)),
                model,
            )
        allowed = sorted((f.alias or name) for name, f in model.model_fields.items())
        return f"unknown key {key!r}; expected one of: {', '.join(allowed) or '(none)'}"
    if kind == "missing":
        return f"missing key {key!r}"
    value = error.get("input")
    if kind == "value_error":
        return f"{key}: {error['msg'].removeprefix('Value error, ')}"
    if value == MISSING:
        return f"{key} = '???': a required value with no default; set it in conf/ or params.yaml"
    return f"{key} = {value!r}: {error['msg'].lower()}"


def validate_config(data: Any, *, required: tuple[str, ...] = ()) -> PipelineConfig:
    """Validate a composed config dict. ``required`` top-level sections may not hold ``???``.

    Raises :class:`ConfigError` with one line naming the first offending key.
    """
    if not isinstance(data, dict):
        raise ConfigError(f"config must be a mapping, got {type(data).__name__}")
    for section in required:
        missing = _find_missing(data.get(section), section)
        if missing:
            raise ConfigError(
                f"{missing[0]} is required and has no default ('???'): it is the owner's "
                "value; set it in conf/ (then regenerate params.yaml) or pass an override"
            )
    try:
        return PipelineConfig.model_validate(data)
    except ValidationError as error:
        # An unknown key first: a misspelt key also makes the right one "missing".
        errors = sorted(error.errors(), key=lambda e: e["type"] != "extra_forbidden")
        first = _describe(dict(errors[0]), data)
        if errors[0]["type"] == "extra_forbidden":
            first += _suggestion(errors[0], errors)
        more = f" (and {len(errors) - 1} more)" if len(errors) > 1 else ""
        raise ConfigError(f"invalid config: {first}{more}") from None


def _suggestion(unknown: Any, errors: list[Any]) -> str:
    """``; did you mean 'warmup'?`` when a missing sibling key is spelt close to the typo."""
    import difflib

    *parent, typo = (str(part) for part in unknown["loc"])
    missing = [
        str(e["loc"][-1])
        for e in errors
        if e["type"] == "missing" and [str(p) for p in e["loc"][:-1]] == parent
    ]
    close = difflib.get_close_matches(typo, missing, n=1, cutoff=0.6)
    return f" (did you mean {close[0]!r}?)" if close else ""


def config_section(data: dict[str, Any], keys: tuple[str, ...]) -> dict[str, Any]:
    """The part of a composed config a stage reads (recorded in its provenance)."""
    return {key: data[key] for key in keys if key in data}

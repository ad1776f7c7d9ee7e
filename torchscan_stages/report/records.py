"""The per-layer records of an analysis report: what the compact codec stores column-wise."""

from __future__ import annotations

from typing import Literal

from pydantic import ConfigDict

from .metric import MetricResult, NonNegInt, _Model


class ValueMeta(_Model):
    """Recursive description of a call's inputs or outputs: shapes and types, never values."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    kind: Literal["tensor", "tuple", "list", "dict", "none", "scalar", "other"]
    type_name: str | None = None
    shape: list[NonNegInt] | None = None
    dtype: str | None = None
    device: str | None = None
    requires_grad: bool | None = None
    items: list[ValueMeta] | None = None
    keys: list[str] | None = None


class ParameterStats(_Model):
    """Parameters and buffers owned directly by one module (not its children)."""

    parameters: NonNegInt
    trainable_parameters: NonNegInt
    parameter_bytes: NonNegInt
    buffer_elements: NonNegInt
    buffer_bytes: NonNegInt
    shared_parameters: NonNegInt = 0


class LayerMetrics(_Model):
    module_flops: MetricResult
    macs: MetricResult
    dmas: MetricResult
    receptive_field: MetricResult
    effective_stride: MetricResult
    effective_padding: MetricResult


class LayerOperatorFlops(_Model):
    """Operator FLOPs (method ``operator_dispatch``) dispatched while one module call was active.

    ``own``: operators the call ran itself, outside its child module calls; ``inclusive``: its
    whole call, children included. ``*_products`` are the tensor-product share of each. Never
    added to the module-formula metrics beside them. Frozen: records with equal counts share
    one instance.
    """

    model_config = ConfigDict(extra="forbid", frozen=True)

    own: MetricResult
    inclusive: MetricResult
    own_products: MetricResult
    inclusive_products: MetricResult


class LayerRecord(_Model):
    """One module call. A module called twice has two records, told apart by call_index.

    ``operator_flops`` is absent in reports written before it existed and in
    ``mode="structure"`` (an optional field: no schema version change).
    """

    path: str
    call_index: int
    name: str
    depth: int
    type: str
    is_leaf: bool
    handler: str | None = None
    inclusive: bool = False
    input: ValueMeta
    output: ValueMeta | None = None
    params: ParameterStats
    metrics: LayerMetrics
    operator_flops: LayerOperatorFlops | None = None

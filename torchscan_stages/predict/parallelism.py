"""Which parallelism a predicted workload used, so a prediction never claims what it did not model.

The single-device prediction (``predict_peak_memory``) models one process holding the whole
model; the sharded one (``predict_sharded_peak_memory``) models FSDP2 ``fully_shard`` on a
one-dimensional mesh. Anything else a workload does across ranks (tensor or pipeline
parallel, DeepSpeed ZeRO, DTensors placed by hand, collectives the model does not expect)
shows up here as what the tracker saw: collective operators by name, tensor subclasses by
type, module and optimizer classes from parallel-training packages. Each unmodelled finding
becomes a warning ``unmodelled_parallelism`` and the prediction is ``partial``.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from ..report import Diagnostic

COLLECTIVE_NAMESPACES = frozenset(
    {"c10d", "_c10d_functional", "_c10d_functional_autograd", "_dtensor", "symm_mem"}
)
# packages whose modules or optimizers shard, partition or pipeline a model themselves
PARALLEL_PACKAGES = frozenset({"deepspeed", "megatron", "fairscale", "colossalai", "torchgpipe"})
UNMODELLED = "unmodelled_parallelism"
# wrappers in torch itself whose memory no predictor here models: DDP's gradient buckets,
# FSDP1's flat parameters, pipeline stages
UNMODELLED_CLASSES = frozenset(
    {"DistributedDataParallel", "FullyShardedDataParallel", "PipelineStage", "_PipelineStage"}
)


@dataclass(slots=True)
class ParallelSeen:
    """Collectives (operator name -> calls) and tensor subclasses seen during one fake run."""

    collectives: dict[str, int] = field(default_factory=dict)
    subclasses: dict[str, int] = field(default_factory=dict)
    foreign_classes: set[str] = field(default_factory=set)

    def note(self, func: Any, types: Iterable[type]) -> None:
        """Record one dispatched operator: a collective by name, a distributed subclass by type."""
        namespace = getattr(func, "namespace", None)
        if namespace in COLLECTIVE_NAMESPACES:
            name = str(func)
            self.collectives[name] = self.collectives.get(name, 0) + 1
        for kind in types:
            # distributed tensor subclasses only (DTensor, its kin in torch.distributed):
            # other subclasses (quantized, nested) are not a parallelism
            module = getattr(kind, "__module__", "") or ""
            if module.startswith("torch.distributed"):
                name = getattr(kind, "__name__", str(kind))
                self.subclasses[name] = self.subclasses.get(name, 0) + 1

    def note_object(self, obj: object) -> None:
        """Record a module or optimizer from a parallel-training package, or a torch wrapper
        (DDP, FSDP1, pipeline stage) whose memory is not modelled."""
        root = type(obj).__module__.split(".", 1)[0]
        if root in PARALLEL_PACKAGES or type(obj).__name__ in UNMODELLED_CLASSES:
            self.foreign_classes.add(f"{type(obj).__module__}.{type(obj).__qualname__}")


def unmodelled(
    seen: ParallelSeen,
    *,
    modelled_collectives: frozenset[str] = frozenset(),
    modelled_subclasses: frozenset[str] = frozenset(),
    predictor: str,
) -> list[Diagnostic]:
    """Warnings naming every collective, subclass or package class the predictor does not model."""
    found: list[Diagnostic] = []
    for name, count in sorted(seen.collectives.items()):
        if name not in modelled_collectives:
            found.append(
                Diagnostic(
                    code=UNMODELLED,
                    metric="peak",
                    operator=name,
                    count=count,
                    message=f"the workload ran the collective {name} {count} time(s); "
                    f"{predictor} does not model the parallelism behind it (tensor, pipeline "
                    "or data parallel buffers, other ranks' shards), so the per-process figures "
                    "are not a prediction of that run",
                )
            )
    for name, count in sorted(seen.subclasses.items()):
        if name not in modelled_subclasses:
            found.append(
                Diagnostic(
                    code=UNMODELLED,
                    metric="peak",
                    count=count,
                    message=f"{count} operator(s) ran on tensor subclass {name} (DTensor: "
                    f"sharded or replicated across ranks); {predictor} does not model its "
                    "placement, so its bytes may be counted at global size or not at all",
                )
            )
    for name in sorted(seen.foreign_classes):
        found.append(
            Diagnostic(
                code=UNMODELLED,
                metric="peak",
                message=f"the workload used {name}, which replicates, partitions or pipelines "
                f"the model itself (buckets, flat parameters, stages); {predictor} does not "
                "model it",
            )
        )
    return found

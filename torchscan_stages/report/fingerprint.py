"""``environment`` and ``sources``: the two fingerprints every measuring stage depends on.

``reports/env.json`` (``environment``) is the environment a number depends on;
``reports/sources.json`` (``sources``) hashes the user's model and input code. Both are DVC
dependencies of the measuring stages and are recomputed on every ``dvc repro``, so each must
be byte-identical while nothing it describes changed: their provenance is the environment
alone (package and torch versions, ``env_hash``, the hardware and software), with no run
context, git commit, runtime settings, host load or time. A changed environment or source
file changes the bytes, and DVC reruns exactly the stages that depend on it.
"""

from __future__ import annotations

from typing import Literal

from pydantic import Field, model_validator

from .metric import NonNegInt, _Model
from .models import _Report


class _Fingerprint(_Report):
    @model_validator(mode="after")
    def _stable(self) -> _Fingerprint:
        """Nothing that changes per run or per commit: the file must stay byte-identical."""
        changing = [k for k in ("runtime", "run", "host") if getattr(self.provenance, k)]
        if changing:
            raise ValueError(f"provenance.{changing[0]}: a fingerprint records the environment "
                             "only (nothing that changes per run or per commit)")  # fmt: skip
        return self


class EnvironmentReport(_Fingerprint):
    """The environment fingerprint; its provenance is the whole content (``env_hash``, the
    key every report's provenance repeats, and what it hashes)."""

    kind: Literal["environment"] = "environment"


class SourceFingerprint(_Model):
    """The source behind one ``_target_``: its package's ``.py`` files hashed, or why not."""

    target: str
    module: str
    package: str | None = None
    source: str | None = None  # why nothing was hashed (not found, installed, no source)
    files: NonNegInt | None = None
    sha256: str | None = None
    hashed: list[str] = Field(default_factory=list)  # by their name in the package
    skipped: list[str] = Field(default_factory=list)  # what the walk left out, and why


class SourcesReport(_Fingerprint):
    """The user's model and input code, by config section (``model``, ``input``)."""

    kind: Literal["sources"] = "sources"
    sources: dict[str, SourceFingerprint] = Field(default_factory=dict)


__all__ = ["EnvironmentReport", "SourceFingerprint", "SourcesReport"]

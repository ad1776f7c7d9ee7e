"""The one config loader: params.yaml under DVC, a Hydra composition of conf/ otherwise.

DVC runs a stage with no arguments and sets ``DVC_STAGE``; then the stage reads
``params.yaml`` (the committed composition of ``conf/``) with PyYAML only, keeping the stage's
fixed overhead small. By hand (or with arguments) the stage is a Hydra app over ``conf/``.
Hydra is imported lazily, only on that path.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from .schema import ConfigError, PipelineConfig, validate_config

PARAMS_FILE = "params.yaml"
CONF_ENV = "TORCHSCAN_STAGES_CONF"
CONFIG_NAME = "config"


def under_dvc(argv: Sequence[str]) -> bool:
    """True when DVC runs the stage (``DVC_STAGE`` set) without arguments."""
    return bool(os.environ.get("DVC_STAGE")) and not argv


def read_params(path: str | os.PathLike[str] = PARAMS_FILE) -> dict[str, Any]:
    """The composed config from params.yaml (plain YAML, already resolved by composition)."""
    import yaml

    file = Path(path)
    if not file.exists():
        raise ConfigError(
            f"{file}: not found; regenerate it with `python -m torchscan_stages.pipeline.compose`"
        )
    try:
        data = yaml.safe_load(file.read_text(encoding="utf-8"))
    except UnicodeDecodeError as error:
        raise ConfigError(
            f"{file}: not UTF-8 text (byte {error.object[error.start]:#04x} at offset "
            f"{error.start}); save it as UTF-8"
        ) from None
    except yaml.YAMLError as error:
        raise ConfigError(f"{file}: malformed YAML ({' '.join(str(error).split())})") from None
    if not isinstance(data, dict):
        raise ConfigError(f"{file}: expected a mapping at the top level")
    return data


def find_conf_dir(start: str | os.PathLike[str] | None = None) -> Path:
    """``$TORCHSCAN_STAGES_CONF``, else the nearest ``conf/config.yaml`` at or above ``start``."""
    if os.environ.get(CONF_ENV):
        conf = Path(os.environ[CONF_ENV]).resolve()
        if not (conf / f"{CONFIG_NAME}.yaml").exists():
            raise ConfigError(f"{CONF_ENV} = {str(conf)!r}: no {CONFIG_NAME}.yaml in it")
        return conf
    here = Path(start if start is not None else Path.cwd()).resolve()
    for folder in (here, *here.parents):
        if (folder / "conf" / f"{CONFIG_NAME}.yaml").exists():
            return folder / "conf"
    raise ConfigError(
        f"no conf/{CONFIG_NAME}.yaml at or above {here}; run from the repository or set {CONF_ENV}"
    )


def compose(
    overrides: Sequence[str] = (), *, conf_dir: str | os.PathLike[str] | None = None
) -> Any:
    """Compose conf/ exactly as DVC's Hydra integration does; returns the resolved DictConfig."""
    from hydra import compose as hydra_compose
    from hydra import initialize_config_dir
    from hydra.errors import HydraException
    from omegaconf import OmegaConf
    from omegaconf.errors import OmegaConfBaseException

    folder = Path(conf_dir).resolve() if conf_dir is not None else find_conf_dir()
    try:
        with initialize_config_dir(str(folder), version_base=None):
            cfg = hydra_compose(config_name=CONFIG_NAME, overrides=list(overrides))
        OmegaConf.resolve(cfg)
    except (HydraException, OmegaConfBaseException) as error:
        raise ConfigError(f"cannot compose {folder}: {' '.join(str(error).split())}") from None
    return cfg


def compose_yaml(
    overrides: Sequence[str] = (), *, conf_dir: str | os.PathLike[str] | None = None
) -> str:
    """params.yaml text, byte-identical to what ``dvc exp run`` writes."""
    from omegaconf import OmegaConf

    return str(OmegaConf.to_yaml(compose(overrides, conf_dir=conf_dir)))


def to_plain(cfg: Any) -> dict[str, Any]:
    """A DictConfig as a plain dict, interpolations resolved, ``???`` kept as the string."""
    from omegaconf import OmegaConf

    data = OmegaConf.to_container(cfg, resolve=True, throw_on_missing=False)
    if not isinstance(data, dict):
        raise ConfigError("composed config is not a mapping")
    return {str(k): v for k, v in data.items() if k != "hydra"}


def load_config(
    overrides: Sequence[str] = (),
    *,
    conf_dir: str | os.PathLike[str] | None = None,
    params: str | os.PathLike[str] | None = None,
    required: tuple[str, ...] = (),
) -> PipelineConfig:
    """A validated config for notebooks and scripts: from ``params`` if given, else conf/."""
    if params is not None:
        if overrides:
            raise ConfigError("load_config: give either params= or overrides, not both")
        return validate_config(read_params(params), required=required)
    return validate_config(to_plain(compose(overrides, conf_dir=conf_dir)), required=required)

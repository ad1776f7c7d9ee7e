"""docs/api.md is the repository's copy of the public contract: it must match the code."""

from __future__ import annotations

import inspect
import re
from pathlib import Path

import pytest

import torchscan_stages

PAGE = (Path(__file__).resolve().parents[1] / "docs" / "api.md").read_text(encoding="utf-8")
SECTION = re.compile(r"^### (\w+)\n\n```text\n(.*?)```", re.DOTALL | re.MULTILINE)
DOCUMENTED = dict(SECTION.findall(PAGE))
CALLABLES = sorted(
    name
    for name in torchscan_stages.__all__
    if (name[0].islower() and not name.startswith("__")) or name == "ModuleHandler"
)


def _documented_parameters(signature_text: str) -> list[str]:
    """Parameter names of ``name(a, b=1, *, c=None) -> R`` as written on the page."""
    inside = signature_text.split("(", 1)[1].rsplit(")", 1)[0]
    inside = re.sub(r"\"[^\"]*\"", '""', inside)  # string defaults may hold commas
    names = [part.split("=")[0].strip() for part in inside.split(",")]
    return [name for name in names if name and name != "*"]


def test_every_public_name_is_on_the_page() -> None:
    missing = [name for name in torchscan_stages.__all__ if f"`{name}`" not in PAGE]
    missing = [name for name in missing if name not in DOCUMENTED and name != "__version__"]
    assert not missing, f"docs/api.md does not mention {missing}"


@pytest.mark.parametrize("name", CALLABLES)
def test_signature_on_the_page_matches_the_code(name: str) -> None:
    assert name in DOCUMENTED, f"docs/api.md has no '### {name}' section with its signature"
    code = list(inspect.signature(getattr(torchscan_stages, name)).parameters)
    assert _documented_parameters(DOCUMENTED[name]) == code

"""The real gloo worlds, launched once per world size per session and shared by the FSDP2,
DDP and tensor-parallel gloo tests (a launch costs far more than the cases it runs)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from gloo_launch import HERE, WorldFailed, launch_world


@pytest.fixture(scope="session")
def gloo_world(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Callable[[int], list[dict[str, Any]]]:
    """``gloo_world(world)``: every rank's record of ``gloo_rank.py`` at ``world`` ranks.

    The launch runs the case families (``GLOO_FAMILY`` of each test module) of every test in
    this session that uses the fixture, so a file run alone pays only for its own cases. The
    first test asking for a world size launches it; a failed launch is remembered, so the
    other tests of that world fail at once with the same message instead of relaunching."""
    families = sorted(
        {
            getattr(item.module, "GLOO_FAMILY", "")
            for item in request.session.items
            if isinstance(item, pytest.Function) and "gloo_world" in item.fixturenames
        }
        - {""}
    )
    records: dict[int, list[dict[str, Any]]] = {}
    failures: dict[int, str] = {}

    def world_records(world: int) -> list[dict[str, Any]]:
        if world in failures:
            raise WorldFailed(failures[world])
        if world not in records:
            out = tmp_path_factory.mktemp(f"gloo_world{world}")
            try:
                records[world] = launch_world(
                    HERE / "gloo_rank.py", world, out, args=[",".join(families)]
                )
            except WorldFailed as failed:
                failures[world] = str(failed)
                raise
        return records[world]

    return world_records

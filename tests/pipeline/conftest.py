"""Fixtures of the pipeline tests: one shared way to set up the DVC test repository."""

from __future__ import annotations

import pytest
from pipeline_repo import PipelineRepos


@pytest.fixture(scope="session")
def pipeline_repos(tmp_path_factory: pytest.TempPathFactory) -> PipelineRepos:
    """Committed copies of the working tree (tests/pipeline/pipeline_repo.py)."""
    return PipelineRepos(tmp_path_factory.mktemp("pipeline-template"))

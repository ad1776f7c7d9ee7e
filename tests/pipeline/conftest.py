"""Fixtures of the pipeline tests: one shared way to set up the DVC test repository."""

from __future__ import annotations

import os

import pytest
from pipeline_repo import PipelineRepos


@pytest.fixture(scope="session")
def pipeline_repos(tmp_path_factory: pytest.TempPathFactory) -> PipelineRepos:
    """Committed copies of the working tree (tests/pipeline/pipeline_repo.py).

    Under pytest-xdist each worker has its own base temp inside the run's; the reproduced
    template goes in the run's, so the workers build it once between them.
    """
    scratch = tmp_path_factory.mktemp("pipeline-template")
    worker = os.environ.get("PYTEST_XDIST_WORKER")
    shared = tmp_path_factory.getbasetemp().parent if worker else None
    return PipelineRepos(scratch, shared)

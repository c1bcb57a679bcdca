"""Fixtures of the corpus tests."""

from __future__ import annotations

import pytest


@pytest.fixture(scope="module")
def client():
    """A small in-process Dask cluster (2 workers of 1 thread), one per test module."""
    distributed = pytest.importorskip("distributed")
    cluster = distributed.LocalCluster(
        n_workers=2,
        threads_per_worker=1,
        processes=False,
        dashboard_address=":0",
        scheduler_kwargs={"dashboard": False},
    )
    c = distributed.Client(cluster)
    yield c
    c.close()
    cluster.close()

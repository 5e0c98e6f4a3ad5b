from __future__ import annotations

import pytest

from healthcheck.bundles.collect import collect_bundle
from tests.bundles.test_bundles import make_node


@pytest.fixture(scope="package")
def node_bundles(tmp_path_factory):
    """A healthy and a failing (uncorrected volatile ECC on gpu3) bundle of the same fixture node."""
    root = tmp_path_factory.mktemp("safety-bundles")
    collect_bundle(str(root / "healthy"), options=make_node(root / "src-healthy"))
    faulty = make_node(root / "src-faulty")
    faulty.nvml.gpus[3].ecc[(1, 0)] = 2
    collect_bundle(str(root / "faulty"), options=faulty)
    return root

"""Placeholder until the sparse-MLA suite lands: every row is reported skipped, never passed."""

import pytest


@pytest.mark.track("fp8-ds-mla")
def test_fp8_ds_mla(row):
    pytest.skip("suite not implemented yet: sparse_mla fp8-ds-mla")


@pytest.mark.track("indexer-skip")
def test_indexer_skip(row):
    pytest.skip("suite not implemented yet: sparse_mla indexer-skip")

# conftest.py — shared fixtures for the Python package's tests.
#
# Run by tests/python/run.sh (ctest 'python'), which sets TDSLC to the
# build's tdslc and puts the source tree's python/ first on PYTHONPATH.
# Every test gets its own cache directory (TDSL_CACHE_DIR), so nothing
# leaks between tests or into the user's cache.
import os

import pytest

SOURCE_DIR = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


@pytest.fixture(autouse=True)
def cache(tmp_path, monkeypatch):
    d = tmp_path / "cache"
    monkeypatch.setenv("TDSL_CACHE_DIR", str(d))
    return d


@pytest.fixture
def tdslc():
    path = os.environ.get("TDSLC")
    if not path:
        pytest.skip("TDSLC is not set (run through ctest or tests/python/run.sh)")
    return path


@pytest.fixture
def borrows(monkeypatch):
    """How many tensors the general path exported (a list of one count):
    a call that took the direct path leaves it unchanged."""
    from tdsl import _kernel
    n = [0]
    real = _kernel._borrow_as

    def counting(*a, **k):
        n[0] += 1
        return real(*a, **k)

    monkeypatch.setattr(_kernel, "_borrow_as", counting)
    return n

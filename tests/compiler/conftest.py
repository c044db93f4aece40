"""Fixtures of the compiler tests: the default config."""

import pytest

from vtasim.hw.config import load_config


@pytest.fixture(scope="session")
def default_cfg():
    return load_config()

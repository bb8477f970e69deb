"""Fixtures for the plax.random tests: flag settings, restored after each test."""
from __future__ import annotations

import pytest

import plax


@pytest.fixture(params=[True, False], ids=["partitionable", "original"])
def threefry_mode(request):
    """Runs a test in both threefry layouts."""
    with plax.config.override("jax_threefry_partitionable", request.param):
        yield request.param


@pytest.fixture
def x64():
    """Runs a test with 64-bit types enabled."""
    with plax.config.override("jax_enable_x64", True):
        yield

"""A small shared forecasting task (1 s trials), built once per test session."""

import pytest


@pytest.fixture(scope="session")
def small_task():
    from neuro.tasks import build_task

    return build_task(True, duration=1.0, max_windows=60)

"""The adapter tests' shared log: a real Inspect eval (inspect_tasks.py) run once per module."""

from __future__ import annotations

import pytest
from inspect_ai.log import EvalLog
from inspect_tasks import ANSWERS_A, run_task, text_answers


@pytest.fixture(scope="module")
def capitals_log(tmp_path_factory: pytest.TempPathFactory) -> EvalLog:
    return run_task(tmp_path_factory.mktemp("inspect-logs"), text_answers(ANSWERS_A))

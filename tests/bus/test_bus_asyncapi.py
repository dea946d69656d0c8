"""The bus's AsyncAPI document (FastStream's, from the services' subscriptions) names every subject, stream and
durable consumer of ``evalsi.bus.subjects`` and ``evalsi.bus.streams``, and docs/asyncapi.yaml is current."""

from __future__ import annotations

import inspect
from pathlib import Path
from typing import Any

import pytest
import yaml

from evalsi.bus import StreamLimits, subjects
from evalsi.bus.asyncapi import bus_document
from evalsi.bus.streams import stream_configs
from evalsi.bus.subscriptions import SCHEDULER_DEADLETTERS

DOC_FILE = Path(__file__).resolve().parents[2] / "docs" / "asyncapi.yaml"

# Every public function of subjects.py, by what it names. A new one fails test_every_subject_function_is_classified
# until it is added here (and so to the document).
SUBJECT_TEMPLATES = {  # function -> the address the document shows for it
    "work": "work.{pool}",
    "results": "results.{run_id}",
    "run_events": "runs.events.{run_id}",
    "run_control": "runs.control.{run_id}",
    "traces_completed": "traces.completed.{project}",
    "traces_observed": "traces.observed.{partition}",
    "deadletter": "deadletter.{name}",
    "evaluate": "evaluate.{pool}",
}
CONSUMER_NAMES = {"work_consumer", "assembler_consumer", "evaluate_queue"}
NOT_NAMES = {"check_token", "check_pool", "is_deadletter", "deadletter_for"}  # checks and mappings


@pytest.fixture(scope="module")
def document() -> dict[str, Any]:
    return yaml.safe_load(bus_document())


def addresses(document: dict[str, Any]) -> set[str]:
    return {channel["address"] for channel in document["channels"].values()}


def descriptions(document: dict[str, Any]) -> str:
    return "\n".join(channel.get("description", "") for channel in document["channels"].values())


def test_every_subject_function_is_classified() -> None:
    functions = {name for name in subjects.__all__ if inspect.isfunction(getattr(subjects, name))}
    assert functions == set(SUBJECT_TEMPLATES) | CONSUMER_NAMES | NOT_NAMES


def test_every_subject_has_a_channel(document: dict[str, Any]) -> None:
    shown = addresses(document)
    missing = {template for template in SUBJECT_TEMPLATES.values() if template not in shown}
    assert not missing, f"subjects missing from the AsyncAPI document: {sorted(missing)}"
    for pool in subjects.POOLS:  # and every pool's concrete subjects, which workers subscribe to
        assert subjects.work(pool) in shown and subjects.evaluate(pool) in shown


def test_every_stream_and_what_it_captures_is_described(document: dict[str, Any]) -> None:
    text = descriptions(document)
    shown = addresses(document)
    for config in stream_configs(StreamLimits(), 1024 * 1024):
        assert f"stream {config.name}" in text, f"stream {config.name} is not in the AsyncAPI document"
        for pattern in config.subjects or []:
            prefix = pattern.removesuffix(">")
            assert any(address.startswith(prefix) for address in shown), f"no channel under {pattern}"


def test_every_durable_consumer_and_queue_group_is_named(document: dict[str, Any]) -> None:
    text = descriptions(document)
    durables = [subjects.RESULTS_CONSUMER, subjects.CONTROL_CONSUMER, subjects.POLICY_CONSUMER,
                SCHEDULER_DEADLETTERS, subjects.assembler_consumer(0),
                *(subjects.work_consumer(pool) for pool in subjects.POOLS)]  # fmt: skip
    for durable in durables:
        assert f"durable {durable};" in text, f"durable consumer {durable} is not in the AsyncAPI document"
    for pool in subjects.POOLS:
        assert f"queue group {subjects.evaluate_queue(pool)}" in text


def test_the_document_is_asyncapi_3_and_names_each_payload_type(document: dict[str, Any]) -> None:
    assert document["asyncapi"] == "3.0.0"
    work = next(c for c in document["channels"].values() if c["address"] == "work.cpu")
    assert "evalsi.bus.v1alpha1.Task" in work["description"]
    assert {op["action"] for op in document["operations"].values()} == {"send", "receive"}


def test_the_committed_document_is_current() -> None:
    assert DOC_FILE.read_text(encoding="utf-8") == bus_document(), (
        "docs/asyncapi.yaml is stale: run  .venv/bin/python -m evalsi.bus.asyncapi --output docs/asyncapi.yaml"
    )

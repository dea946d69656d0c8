"""Outcome evaluators: task success from an environment checker, and goal completion over a session."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from evalsi.errors import SkipRecord
from evalsi.evaluators import Output, evaluator
from evalsi.packs.agent._trajectory import bool_metadata, reference_object, text_metadata
from evalsi.v1alpha1.record_pb2 import Record
from evalsi.v1alpha1.score_pb2 import Score

SUCCESS_KEYS = ("task_success", "success")
_REFERENCE_KEYS = ("task_success", "success", "passed")
_REASON_KEYS = ("reason", "detail", "message")


def _environment_verdict(record: Record) -> Score | None:
    """A harness environment's checker (evalsi.targets.environments): metadata ``checker`` {passed, reason, format,
    score?, tests?, failures?}, its reason the explanation (a JUnit check's reason counts the tests)."""
    value = record.metadata.get("checker")
    if value is None or value.WhichOneof("kind") != "struct_value":
        return None
    fields = value.struct_value.fields
    passed = fields.get("passed")
    if passed is None or passed.WhichOneof("kind") != "bool_value":
        return None
    reason = fields["reason"].string_value if "reason" in fields else ""
    return Score(passed=passed.bool_value, explanation=reason or f"the checker says {str(passed.bool_value).lower()}")


def _checker_verdict(record: Record) -> Score | None:
    """The checker's verdict: a harness environment's (metadata ``checker``), metadata task_success/success, else a
    JSON reference {"success": bool, "reason"?}."""
    environment = _environment_verdict(record)
    if environment is not None:
        return environment
    found = bool_metadata(record, *SUCCESS_KEYS)
    if found is not None:
        key, value = found
        reason = text_metadata(record, "checker_output") or text_metadata(record, "reason")
        return Score(passed=value, explanation=reason or f"metadata {key} is {str(value).lower()}")
    reference = reference_object(record)
    if isinstance(reference, Mapping):
        for key in _REFERENCE_KEYS:
            if key in reference:
                value = reference[key]
                if not isinstance(value, bool):
                    raise ValueError(f"reference '{key}' must be a boolean, got {value!r}")
                reason = next((reference[k] for k in _REASON_KEYS if isinstance(reference.get(k), str)), "")
                return Score(passed=value, explanation=reason or f"checker {key} is {str(value).lower()}")
    return None


@evaluator(
    "builtin/task-success",
    version="1.0.0",
    pack="agent",
    outputs=[Output("passed", "boolean", description="The environment checker's verdict.")],
)
def task_success(record: Record) -> Score:
    """Whether the task succeeded, as the environment checker recorded it: the verdict of the run's harness
    environment (metadata ``checker``, written by agent runs in environments: docs/environments.md), metadata
    ``task_success`` or ``success`` (a boolean), or a JSON reference ``{"success": true, "reason": ...}``."""
    verdict = _checker_verdict(record)
    if verdict is None:
        raise SkipRecord(
            'no checker verdict: run the task in a harness environment with a check, or set metadata '
            'task_success/success (a boolean) or a reference {"success": ...}'
        )
    return verdict


def _ordered(records: Sequence[Record]) -> list[Record]:
    """The session's records by metadata ``turn`` when every record has a numeric one, else as given."""
    turns = [r.metadata.get("turn") for r in records]
    numbers = [t.number_value for t in turns if t is not None and t.WhichOneof("kind") == "number_value"]
    if len(numbers) == len(records):
        return [
            r for _, _, r in sorted((n, i, r) for i, (n, r) in enumerate(zip(numbers, records, strict=True)))
        ]
    return list(records)


@evaluator(
    "builtin/goal-completion",
    version="1.0.0",
    pack="agent",
    scope="session",
    outputs=[
        Output("passed", "boolean", description="The session reached its goal."),
        Output("turns", "number", min=0.0, higher_is_better=False, description="Records (turns) in the session."),
    ],
    params={"max_turns": "Most turns allowed: a goal reached later fails; unset for no limit."},
)
def goal_completion(records: list[Record], *, max_turns: int | None = None) -> dict[str, float | Score]:
    """Whether a session reached its goal: a ``goal_met`` (or ``gave_up``) marker in any turn's metadata, else
    the last turn's task success; plus the turns it took."""
    ordered = _ordered(records)
    turns = len(ordered)
    verdict: Score | None = None
    for index, record in enumerate(ordered, 1):
        found = bool_metadata(record, "goal_met")
        if found is not None and found[1]:
            verdict = Score(passed=True, explanation=f"goal_met at turn {index}")
            turns = index
            break
        gave_up = bool_metadata(record, "gave_up")
        if (found is not None and not found[1]) or (gave_up is not None and gave_up[1]):
            verdict = Score(passed=False, explanation=f"goal not met (marker at turn {index})")
            break
    if verdict is None and ordered:
        verdict = _checker_verdict(ordered[-1])
    if verdict is None:
        raise SkipRecord("no goal marker: no turn has metadata goal_met/gave_up and the last turn has no task success")
    if verdict.passed and max_turns is not None and turns > max_turns:
        verdict = Score(passed=False, explanation=f"goal met after {turns} turns, over max_turns {max_turns}")
    return {"passed": verdict, "turns": float(turns)}


EVALUATORS = (task_success, goal_completion)

"""``builtin/tau2``: tau2-bench's evaluator over a record imported from ``tau2://`` (``evalsi.datasets.tau2``).

As tau2 grades a simulation: the reward is the product of the components its task's ``reward_basis`` names:

- ``DB``: the domain's DB after replaying the agent's tool calls equals (by hash) the DB after replaying the
  expected actions, both from the task's initial state; the replay runs the domain's toolkit in a sandbox
  (``evalsi/datasets/tau2_main.py``), as it is code of the benchmark's;
- ``COMMUNICATE``: every ``communicate_info`` string appears, lower-cased, in some assistant message's text
  (lower-cased, commas removed);
- ``ACTION``: every expected action matches some tool call: same name, and the same values for ``compare_args``
  (or for every argument the call gave, when the action names none).

The conversation is the record's output messages (assistant texts and tool calls), else its trajectory's tool
calls, its LLM steps' texts and its output text.

- ``ENV_ASSERTION``: after the agent's calls, each ``env_assertions`` entry (a toolkit method called with its
  arguments) returns its ``assert_value`` (default true), in the same sandboxed replay;
- ``NL_ASSERTION``: the run's judge finds every ``nl_assertions`` outcome met (``tau2_nl``, tau2's
  ``NLAssertionsEvaluator``). Only ``builtin/tau2-judged`` has a judge (the runner hands one only to an evaluator
  that requires it, and requiring one here would skip every judge-free task): ``builtin/tau2`` skips a task whose
  basis names ``NL_ASSERTION``, saying to use it.
"""

from __future__ import annotations

import json
import secrets
from collections.abc import Mapping, Sequence
from functools import cache
from pathlib import Path
from typing import Any

from evalsi.datasets import tau2_main
from evalsi.datasets.tau2 import MCP_NAME
from evalsi.errors import BadInputError, InfraError, SkipRecord
from evalsi.evaluators import JUDGE_PENDING, EvalContext, Output, evaluator
from evalsi.judges import JudgeClient
from evalsi.packs.benchmarks.tau2_nl import nl_assertions
from evalsi.packs.code.execution import isolation_dict
from evalsi.records import content_text, content_value, from_value
from evalsi.sandbox.model import SandboxUnavailable
from evalsi.v1alpha1.record_pb2 import STEP_TYPE_LLM, Record
from evalsi.v1alpha1.score_pb2 import Score

GRADED = ("DB", "COMMUNICATE", "ACTION", "ENV_ASSERTION", "NL_ASSERTION")
COMPONENTS = {"DB": "db", "COMMUNICATE": "communicate", "ACTION": "action", "ENV_ASSERTION": "env_assertion",
              "NL_ASSERTION": "nl_assertion"}
MCP_PREFIX = f"{MCP_NAME}_"
REFERENCE_KEYS = ("evaluation_criteria", "db", "tools_source")
_STDERR_CHARS = 500


def tau2_reference(record: Record) -> dict[str, Any]:
    """The record's tau2 reference (the JSON text ``evalsi.datasets.tau2`` writes)."""
    value = content_value(record.reference)
    if isinstance(value, str):
        try:
            value = json.loads(value)
        except json.JSONDecodeError:
            value = None
    if not isinstance(value, Mapping) or not set(REFERENCE_KEYS) <= set(value):
        raise SkipRecord(f"the reference is not a tau2 reference: expected a JSON object with "
                         f"{', '.join(REFERENCE_KEYS)} (records read from tau2:// carry one)")
    return dict(value)


def conversation(record: Record) -> tuple[list[str], list[tuple[str, Any]]]:
    """The assistant's texts and its tool calls ``(name, arguments)``, in order."""
    texts: list[str] = []
    calls: list[tuple[str, Any]] = []
    output = record.output
    if output.WhichOneof("kind") == "messages":
        for message in output.messages.messages:
            if message.role != "assistant":
                continue
            if message.content:
                texts.append(message.content)
            calls.extend((_tool_name(call.name), _arguments(call.arguments)) for call in message.tool_calls)
    elif output.WhichOneof("kind") is not None:
        texts.append(content_text(output))
    if not calls:
        steps = record.trajectory.steps
        calls = [(_tool_name(step.tool_call.name), _arguments(step.tool_call.arguments))
                 for step in steps if step.HasField("tool_call")]
        # what the model said along the way (its LLM steps' outputs), as tau2 reads every assistant message
        texts.extend(content_text(step.output) for step in steps
                     if step.type == STEP_TYPE_LLM and step.HasField("output"))
    return texts, calls


def transcript_messages(record: Record) -> list[tuple[str, str]]:
    """``(role, text)`` of the conversation, for the NL judge: the output's messages with text, else the input as
    the user's and the assistant's texts."""
    output = record.output
    if output.WhichOneof("kind") == "messages":
        return [(m.role, m.content) for m in output.messages.messages if m.content]
    said = [("user", content_text(record.input))] if record.HasField("input") else []
    return said + [("assistant", text) for text in conversation(record)[0] if text]


def _tool_name(name: str) -> str:
    """A toolkit tool's name: the harness calls the ``tau2://`` environment's MCP tools ``tau2_<tool>``."""
    return name.removeprefix(MCP_PREFIX)


def _arguments(value: Any) -> Any:
    arguments = from_value(value) if value.WhichOneof("kind") is not None else {}
    if isinstance(arguments, str):
        try:
            return json.loads(arguments)
        except json.JSONDecodeError:
            return arguments
    return arguments


def communicated(info: Sequence[str], texts: Sequence[str]) -> list[str]:
    """The ``communicate_info`` strings no assistant text holds (tau2's rule: lower case, commas removed)."""
    plain = [text.lower().replace(",", "") for text in texts]
    return [item for item in info if not any(item.lower() in text for text in plain)]


def action_matches(action: Mapping[str, Any], name: str, arguments: Any) -> bool:
    """tau2's ``Action.compare_with_tool_call``."""
    if action.get("name") != name or not isinstance(arguments, Mapping):
        return False
    expected = action.get("arguments") or {}
    keys = action.get("compare_args")
    keys = list(arguments) if keys is None else list(keys)
    if not keys:
        return True
    return {k: v for k, v in arguments.items() if k in keys} == {k: v for k, v in expected.items() if k in keys}


def missing_actions(actions: Sequence[Mapping[str, Any]], calls: Sequence[tuple[str, Any]]) -> list[str]:
    return [str(action.get("name")) for action in actions
            if not any(action_matches(action, name, arguments) for name, arguments in calls)]


@cache
def _replay_source() -> bytes:
    return Path(tau2_main.__file__).read_bytes()


async def replay(ctx: EvalContext, reference: Mapping[str, Any], calls: Sequence[tuple[str, Any]],
                 timeout_s: float) -> tuple[dict[str, Any], dict[str, Any]]:
    """The gold and predicted DB hashes from the sandboxed replay, and the isolation it ran under."""
    access = ctx.sandbox
    if access is None:
        raise InfraError("builtin/tau2 replays the domain's tools in a sandbox, and none is configured where this "
                         "evaluation runs (use evalsi eval/run, or a server's sandbox worker pool)")
    criteria = reference["evaluation_criteria"]
    initial = reference.get("initial_state") or {}
    nonce = secrets.token_hex(16)
    request = {"nonce": nonce, "db": reference["db"], "agent_data": initial.get("agent_data"),
               "initial_actions": initial.get("actions") or [], "gold_actions": criteria.get("actions") or [],
               "env_assertions": criteria.get("env_assertions") or [], "predicted_calls": list(calls)}
    try:
        session = await access.open()
    except SandboxUnavailable as exc:
        raise BadInputError(str(exc)) from exc
    try:
        await session.write_files({"replay.py": _replay_source(), "tools.py": str(reference["tools_source"]).encode()})
        result = await session.exec(["python3", "-I", "-S", "replay.py"], stdin=json.dumps(request).encode() + b"\n",
                                    timeout_s=timeout_s)
    finally:
        await session.destroy()
    if result.outcome.kind == "runner_failure":
        raise InfraError(f"sandbox runner failure ({result.isolation.driver}): {result.outcome.signature}")
    prefix = nonce + " "
    for line in result.stdout.decode("utf-8", "replace").splitlines():
        if line.startswith(prefix):
            return json.loads(line[len(prefix):]), isolation_dict(result.isolation)
    stderr = result.stderr.decode("utf-8", "replace").strip()[-_STDERR_CHARS:]
    raise BadInputError(f"the tau2 replay ended ({result.outcome.kind}) without its result: {stderr}")


def _check_timeout(timeout_s: float = 20.0, **_: Any) -> None:
    if isinstance(timeout_s, bool) or not isinstance(timeout_s, int | float) or not 0 < timeout_s <= 300:
        raise BadInputError(f"params.timeout_s: expected seconds in (0, 300], got {timeout_s!r}")


_OUTPUTS = [
    Output("reward", "number", min=0.0, max=1.0, description="tau2's reward: the product of the task's "
           "reward_basis components."),
    Output("db", "boolean", description="The DB after the agent's calls equals the DB after the expected "
           "actions (hash equality)."),
    Output("communicate", "boolean", description="Every communicate_info string was said by the assistant."),
    Output("action", "boolean", description="Every expected action was called (name and compared arguments)."),
    Output("env_assertion", "boolean", description="Every env assertion holds on the DB after the agent's calls."),
]
_NL_OUTPUT = Output("nl_assertion", "boolean", description="The judge found every NL assertion met (tau2's "
                    "NLAssertionsEvaluator).")


async def grade(record: Record, ctx: EvalContext, timeout_s: float, judge: JudgeClient | None
                ) -> dict[str, Score | float]:
    """tau2's reward for the record's conversation and each component; ``judge`` None skips NL tasks."""
    reference = tau2_reference(record)
    criteria = reference["evaluation_criteria"]
    names = [name for kind, name in COMPONENTS.items() if judge is not None or kind != "NL_ASSERTION"]
    if criteria is None:  # tau2: a task without criteria gets reward 1
        return {"reward": 1.0, **{name: Score(passed=True, explanation="the task has no evaluation criteria")
                                  for name in names}}
    basis = list(criteria.get("reward_basis") or ["DB", "COMMUNICATE"])
    unsupported = [kind for kind in basis if kind not in GRADED]
    if unsupported:
        raise SkipRecord(f"reward_basis {unsupported}: not a tau2 component; graded here: {', '.join(GRADED)}")
    if judge is None and "NL_ASSERTION" in basis:
        raise SkipRecord(f"{JUDGE_PENDING}: task {reference.get('task_id')!r}: reward_basis names NL_ASSERTION, "
                         "which the run's judge grades: use builtin/tau2-judged with a judge")
    texts, calls = conversation(record)
    parts = {"COMMUNICATE": _communicate(criteria, texts), "ACTION": _action(criteria, calls)}
    parts["DB"], parts["ENV_ASSERTION"] = await _environment(ctx, reference, calls, timeout_s)
    if judge is not None:
        parts["NL_ASSERTION"] = await _nl(judge, criteria, basis, record)
    reward = 1.0
    for kind in basis:
        reward *= 1.0 if parts[kind].passed else 0.0
    scores: dict[str, Score | float] = {"reward": reward}
    scores.update({name: parts[kind] for kind, name in COMPONENTS.items() if name in names})
    return scores


async def _nl(judge: JudgeClient, criteria: Mapping[str, Any], basis: Sequence[str], record: Record) -> Score:
    """tau2 asks its judge only when the task's reward_basis names NL_ASSERTION, and no assertion is a pass."""
    assertions = [str(a) for a in criteria.get("nl_assertions") or []]
    if "NL_ASSERTION" not in basis:
        return Score(passed=True, explanation="not judged: the task's reward_basis does not name NL_ASSERTION")
    if not assertions:
        return Score(passed=True, explanation="no NL assertions")
    return await nl_assertions(judge, assertions, transcript_messages(record))


def _communicate(criteria: Mapping[str, Any], texts: Sequence[str]) -> Score:
    unsaid = communicated(list(criteria.get("communicate_info") or []), texts)
    return Score(passed=not unsaid, explanation=f"not communicated: {unsaid}" if unsaid else "")


def _action(criteria: Mapping[str, Any], calls: Sequence[tuple[str, Any]]) -> Score:
    missing = missing_actions(list(criteria.get("actions") or []), calls)
    return Score(passed=not missing, explanation=f"expected actions not called: {missing}" if missing else "")


async def _environment(ctx: EvalContext, reference: Mapping[str, Any], calls: Sequence[tuple[str, Any]],
                       timeout_s: float) -> tuple[Score, Score]:
    """The ``db`` and ``env_assertion`` components, from one sandboxed replay."""
    criteria = reference["evaluation_criteria"]
    if criteria.get("actions") is None and criteria.get("env_assertions") is None:
        # tau2's environment evaluator: no expected actions (not even an empty list) is a DB match, unreplayed
        return (Score(passed=True, explanation="no expected actions to compare the DB with"),
                Score(passed=True, explanation="no env assertions"))
    hashes, isolation = await replay(ctx, reference, calls, timeout_s)
    db = Score(passed=hashes["gold"] == hashes["predicted"])
    if not db.passed:
        db.explanation = "the DB differs from the expected actions' DB"
    if hashes.get("failed_gold_actions"):
        db.explanation = (db.explanation + "; " if db.explanation else "") + (
            f"expected actions that raised in the replay: {hashes['failed_gold_actions']}")
    db.metadata["isolation"].struct_value.update(isolation)
    failed = [check["func_name"] for check in hashes.get("env_assertions") or [] if not check["met"]]
    env = Score(passed=not failed, explanation=f"env assertions that do not hold: {failed}" if failed else "")
    return db, env


@evaluator(
    "builtin/tau2",
    version="1.1.0",
    pack="benchmarks",
    pool="sandbox",
    requires=["reference"],
    outputs=_OUTPUTS,
    description="tau2-bench's evaluator: DB hash equality after replaying the agent's tool calls against the "
    "expected actions (in a sandbox), env assertions, communicate-info and action checks; reward over the task's "
    "reward_basis (a task naming NL_ASSERTION is skipped: builtin/tau2-judged grades it).",
    params={"timeout_s": "Seconds the sandboxed replay may run."},
    check=_check_timeout,
)
async def tau2(record: Record, ctx: EvalContext, *, timeout_s: float = 20.0) -> dict[str, Score | float]:
    """tau2's reward for the conversation in the record, with each component."""
    return await grade(record, ctx, timeout_s, None)


@evaluator(
    "builtin/tau2-judged",
    version="1.0.0",
    pack="benchmarks",
    pool="sandbox",
    requires=["reference", "judge"],
    outputs=[*_OUTPUTS, _NL_OUTPUT],
    description="builtin/tau2 with tau2's NL_ASSERTION component: the run's judge checks each natural-language "
    "assertion against the conversation (tau2's NLAssertionsEvaluator prompt, one call per record, cached).",
    params={"timeout_s": "Seconds the sandboxed replay may run."},
    check=_check_timeout,
)
async def tau2_judged(record: Record, ctx: EvalContext, *, timeout_s: float = 20.0) -> dict[str, Score | float]:
    """tau2's reward with every component, NL assertions judged by the run's judge."""
    return await grade(record, ctx, timeout_s, ctx.require_judge())


EVALUATORS = (tau2, tau2_judged)

"""tau2 tasks as simulated-user conversations: tau2's orchestration, with this project's pieces.

The user is ``evalsi cases simulate``'s persona loop (``evalsi.cases.simulate.Simulator``) given tau2's user
simulator prompt: tau2's guidelines and the task's ``<scenario>`` (its user scenario as tau2 renders it), opening
on tau2's first agent message, and ending when it says ``###STOP###`` (or ``###TRANSFER###``,
``###OUT-OF-SCOPE###``), as tau2's orchestrator ends. The agent is the built-in agent (a harness config: the model
under test) whose system prompt is tau2's agent prompt with the domain's policy, and whose tools are the domain's
toolkit at the task's initial state: the record's harness environment (``tau2_<tool>``, an MCP server in its own
sandbox), one per conversation, kept for the whole conversation so its DB carries from turn to turn. The finished
conversation becomes the task's record with the conversation as its output messages, graded by ``builtin/tau2``
(or ``builtin/tau2-judged``) as any other.
"""

from __future__ import annotations

import contextlib
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from evalsi.cases.model import Case
from evalsi.cases.result import CaseResult
from evalsi.cases.simulate import Simulator
from evalsi.cases.transport import TransportError
from evalsi.cases.transport_harness import HarnessTransport
from evalsi.errors import BadInputError
from evalsi.harness import HarnessConfig
from evalsi.harness.environment import Environment, environment_from_mapping
from evalsi.harness.environment_run import EnvironmentFailure, environment_mcp_tools, prepared
from evalsi.harness.tools import Tool
from evalsi.judges import JudgeClient
from evalsi.records import from_value, to_content, to_value
from evalsi.sandbox.access import SandboxOpener
from evalsi.v1alpha1.record_pb2 import Record

AGENT = "tau2-agent"
TASK_KEY = "tau2_task"  # the seeded state naming the conversation's task
DEFAULT_MAX_TURNS = 30  # the simulated user's messages; tau2 bounds its steps (100, tool calls included)
MAX_TURNS = 200
FIRST_AGENT_MESSAGE = "Hi! How can I help you today?"  # tau2's orchestrator opens with it
USER_GUIDELINES = """\
# User Simulation Guidelines
You are playing the role of a customer contacting a customer service representative. Your goal is to simulate \
realistic customer interactions while following specific scenario instructions.

## Core Principles
- Generate one message at a time, maintaining natural conversation flow.
- Strictly follow the scenario instructions you have received.
- Never make up or hallucinate information not provided in the scenario instructions. Information that is not \
provided in the scenario instructions should be considered unknown or unavailable.
- Avoid repeating the exact instructions verbatim. Use paraphrasing and natural language to convey the same \
information.
- Disclose information progressively. Wait for the agent to ask for specific information before providing it.

## Task Completion
- The goal is to continue the conversation until the task is complete.
- If the instruction goal is satisfied, generate the '###STOP###' token to end the conversation.
- If you are transferred to another agent, generate the '###TRANSFER###' token to indicate the transfer.
- If you find yourself in a situation in which the scenario does not provide enough information for you to \
continue the conversation, generate the '###OUT-OF-SCOPE###' token to end the conversation.

Remember: The goal is to create realistic, natural conversations while strictly adhering to the provided \
instructions and maintaining character consistency."""
AGENT_INSTRUCTION = (
    "You are a customer service agent that helps the user according to the <policy> provided below.\n"
    "In each turn you can either:\n- Send a message to the user.\n- Make a tool call.\n"
    "You cannot do both at the same time.\n\n"
    "Try to be helpful and always follow the policy. Always make sure you generate valid JSON only.")


def user_system_prompt(scenario: str) -> str:
    """tau2's user simulator's system prompt: its guidelines, then the task's scenario."""
    return f"{USER_GUIDELINES}\n\n<scenario>\n{scenario}\n</scenario>"


def agent_system_prompt(policy: str) -> str:
    """tau2's agent system prompt around the domain's policy."""
    return f"<instructions>\n{AGENT_INSTRUCTION}\n</instructions>\n<policy>\n{policy}\n</policy>"


@dataclass(frozen=True)
class Tau2Task:
    """What a conversation needs of a ``tau2://`` record: its harness environment and the domain's policy."""

    environment: Environment
    policy: str


def tau2_task(record: Record) -> Tau2Task:
    """The record's environment and policy; a record not read from ``tau2://`` is refused, naming it."""
    fields = record.metadata
    if "environment" not in fields or "tau2_policy" not in fields:
        raise BadInputError(f"record {record.id!r}: not a tau2:// task (metadata environment and tau2_policy)")
    environment = environment_from_mapping(from_value(fields["environment"]), f"record {record.id!r}: environment")
    return Tau2Task(environment, fields["tau2_policy"].string_value)


def task_case(record: Record, where: str, *, max_turns: int = DEFAULT_MAX_TURNS) -> Case:
    """A persona case whose simulated user is tau2's, on the record's scenario (its ``input``)."""
    if not 1 <= max_turns <= MAX_TURNS:
        raise BadInputError(f"max_turns: expected 1 to {MAX_TURNS}, got {max_turns}")
    persona = {"system": user_system_prompt(record.input.text), "kickoff": FIRST_AGENT_MESSAGE,
               "max_turns": max_turns}
    return Case(id=record.id, agent=AGENT, file=where, line=0, persona=persona, state={TASK_KEY: record.id})


class Tau2Transport(HarnessTransport):
    """The built-in agent with one task's toolkit per conversation, opened when the conversation is seeded."""

    def __init__(self, config: HarnessConfig, tasks: Mapping[str, Tau2Task], opener: SandboxOpener, *,
                 project: str = "default") -> None:
        super().__init__(config)
        self.tasks, self.opener, self.project = tasks, opener, project
        self._stacks: dict[str, contextlib.AsyncExitStack] = {}
        self._tools: dict[str, dict[str, Tool]] = {}

    async def seed(self, conversation: str, agent: str, tenant: str, state: Mapping[str, Any]) -> None:
        task = self.tasks[str(state[TASK_KEY])]
        stack = contextlib.AsyncExitStack()
        try:
            session = await stack.enter_async_context(prepared(task.environment, self.opener, self.project,
                                                               run_id=conversation))
            self._tools[conversation] = await stack.enter_async_context(
                environment_mcp_tools(task.environment, session))
        except EnvironmentFailure as exc:
            await stack.aclose()
            raise TransportError(f"task {state[TASK_KEY]!r}: its toolkit could not start: {exc}") from exc
        self._stacks[conversation] = stack
        self._history[conversation] = [{"role": "system", "content": agent_system_prompt(task.policy)},
                                       {"role": "assistant", "content": FIRST_AGENT_MESSAGE}]

    def conversation_tools(self, conversation: str) -> Mapping[str, Tool] | None:
        return self._tools.get(conversation)

    async def end(self, conversation: str | None) -> None:
        """The conversation's toolkit stopped and its sandbox destroyed."""
        self._tools.pop(conversation or "", None)
        stack = self._stacks.pop(conversation or "", None)
        if stack is not None:
            await stack.aclose()

    async def close(self) -> None:
        for conversation in list(self._stacks):
            await self.end(conversation)
        await super().close()


def conversation_record(task: Record, result: CaseResult) -> Record:
    """The task's record with the simulated conversation as its output messages (tau2's message order: the
    agent's greeting, then each user message, the agent's tool calls and its reply), and how it ended."""
    messages: list[dict[str, Any]] = [{"role": "assistant", "content": FIRST_AGENT_MESSAGE}]
    for turn in result.turns:
        messages.append({"role": "user", "content": turn.user})
        if turn.tool_calls:
            messages.append({"role": "assistant", "content": "", "tool_calls": [
                {"id": call.id or str(index), "function": {"name": call.name,
                                                           "arguments": json.dumps(call.arguments)}}
                for index, call in enumerate(turn.tool_calls)]})
        messages.append({"role": "assistant", "content": turn.reply})
    if result.stop and result.stop.get("said"):
        messages.append({"role": "user", "content": result.stop["said"]})
    record = Record()
    record.CopyFrom(task)
    record.output.CopyFrom(to_content({"messages": messages}))
    record.metadata["tau2_simulation"].CopyFrom(to_value({"conversation": result.conversation,
                                                         "stop": result.stop, "simulated": True}))
    return record


async def simulate_tasks(records: Sequence[Record], config: HarnessConfig, user: JudgeClient,
                         opener: SandboxOpener, *, where: str = "tau2", max_turns: int = DEFAULT_MAX_TURNS,
                         ) -> tuple[list[Record], dict[str, str]]:
    """Each task's simulated conversation as a record to grade, and the tasks whose conversation could not be
    finished (the user model or the agent's provider failed, the toolkit did not start), with why."""
    tasks = {record.id: tau2_task(record) for record in records}
    cases = [task_case(record, where, max_turns=max_turns) for record in records]
    transport = Tau2Transport(config, tasks, opener)
    simulator = Simulator(transport, user)
    done: list[Record] = []
    errors: dict[str, str] = {}
    try:
        for record, case in zip(records, cases, strict=True):
            result = await simulator.run_one(case)
            await transport.end(result.conversation)
            if result.status == "error":
                errors[record.id] = result.reason
            else:
                done.append(conversation_record(record, result))
    finally:
        await transport.close()
    return done, errors

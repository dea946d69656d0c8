"""A bring-your-own CLI agent (``spec.target.agent.cli``): a command run inside the record's environment sandbox.

The task's text goes to the command on stdin, in ``$EVALSI_TASK`` and in ``/workspace/.evalsi/task.txt``; its
stdout (cut to ``MAX_ANSWER_CHARS``) is the record's output; the files it changed are what the environment's
checker sees. It is run like any untrusted program: inside the sandbox the environment asks for, bounded by the
agent's timeout. How it ended is the trajectory's root step:

- it exited (any status): the output is its stdout, metadata ``agent.exit_code`` its status;
- it timed out or the sandbox denied it: a result (the checker still grades what it left), with an empty output
  when nothing was printed, metadata ``agent.stop_reason`` ``timeout`` / ``denied`` and a sandbox policy event;
- the sandbox failed to run it (a runner failure): an infrastructure error of the record, never scored.
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from dataclasses import replace

from evalsi.cli_agent_policy import CliAgentPolicy, check_command, check_root, policy_request
from evalsi.errors import BadInputError
from evalsi.harness.environment import Environment
from evalsi.harness.environment_run import EnvironmentFailure
from evalsi.harness.environment_session import EnvironmentSession
from evalsi.records import content_text, to_value
from evalsi.sandbox.access import SandboxOpener
from evalsi.sandbox.model import SandboxSession
from evalsi.targets.environments import in_environment, record_environment
from evalsi.targets.models import PromptError
from evalsi.v1alpha1.record_pb2 import STEP_STATUS_ERROR, STEP_STATUS_OK, STEP_TYPE_AGENT, Record, Step
from evalsi.v1alpha1.run_pb2 import CliAgent as CliAgentSpec

__all__ = ["MAX_ANSWER_CHARS", "MAX_TASK_ENV_CHARS", "CliAgent", "cli_identity"]

MAX_ANSWER_CHARS = 64 * 1024
MAX_TASK_ENV_CHARS = 64 * 1024  # $EVALSI_TASK; a longer task is only on stdin and in the file
TASK_FILE = ".evalsi/task.txt"


def cli_identity(cli: CliAgentSpec) -> str:
    return "agent:cli:" + " ".join(cli.command)[:200]


def task_text(record: Record) -> str:
    if not record.HasField("input"):
        raise PromptError("the record has no input to give the CLI agent")
    return content_text(record.input)


class CliAgent:
    """One command per record, each in a fresh environment sandbox (the record's own, or the spec's default, or a
    bare one under the default sandbox request)."""

    def __init__(self, cli: CliAgentSpec, *, opener: SandboxOpener, project: str,
                 default: Environment | None, policy: CliAgentPolicy | None = None) -> None:
        self.identity = cli_identity(cli)
        self._argv = list(cli.command)
        self._env: Mapping[str, str] = dict(cli.env)
        self._timeout_s = cli.timeout.ToNanoseconds() / 1e9 if cli.HasField("timeout") else None
        self._opener = opener
        self._project = project
        self._default = default
        # A server's rules (evalsi.cli_agent_policy), enforced here whatever the api checked: the command, the
        # minimum isolation (raised, never lowered), the timeout cap and never the host's root. None: embedded.
        self._policy = policy
        if policy is not None and self._argv:
            check_command(policy, self._argv[0])

    async def respond(self, record: Record, *, trial: int, run_id: str) -> None:
        text = task_text(record)
        environment = record_environment(record, self._default) or Environment()
        if environment.mcp:  # the servers' tools are the built-in agent's; nothing would ever call them
            raise PromptError(f"record {record.id[:100]!r}: environment.tools.mcp: MCP servers in the sandbox give "
                              "their tools to the built-in agent (spec.harness); a CLI agent brings its own tools")
        policy = self._policy
        if policy is not None:
            base = self._opener.base.min_isolation
            environment = replace(environment, request=policy_request(policy, environment.request, base))

        async def act(session: EnvironmentSession) -> None:
            if policy is not None:
                try:
                    check_root(policy, session.isolation.bounds)
                except BadInputError as exc:  # the server's configuration, not the record: nothing ran
                    raise EnvironmentFailure(str(exc)) from None
            await self._run(record, text, session, environment)

        await in_environment(record, environment, self._opener, self._project, act)

    async def _run(self, record: Record, text: str, session: SandboxSession, environment: Environment) -> None:
        await session.write_files({TASK_FILE: text.encode()})
        env = {**self._env}
        if len(text) <= MAX_TASK_ENV_CHARS:
            env["EVALSI_TASK"] = text
        timeout_s = self._timeout_s or environment.sandbox_spec(self._opener.base).resources.timeout_s
        if self._policy is not None:
            timeout_s = min(timeout_s, self._policy.max_timeout_s)
        started = time.perf_counter_ns()
        result = await session.exec(self._argv, stdin=text.encode(), env=env, timeout_s=timeout_s)
        elapsed_ns = time.perf_counter_ns() - started
        outcome = result.outcome
        if outcome.kind == "runner_failure":
            raise EnvironmentFailure(f"the sandbox could not run the CLI agent: {outcome.signature}")
        answer = result.stdout.decode("utf-8", "replace")[:MAX_ANSWER_CHARS]
        record.output.text = answer.strip()
        root = Step(id="agent", type=STEP_TYPE_AGENT, name=self.identity,
                    status=STEP_STATUS_OK if outcome.kind == "exit" else STEP_STATUS_ERROR)
        root.duration.FromNanoseconds(elapsed_ns)
        if outcome.kind == "exit":
            record.metadata["agent.exit_code"].number_value = outcome.code if outcome.code is not None else -1
            root.attributes["evalsi.agent.exit_code"].number_value = outcome.code if outcome.code is not None else -1
        else:
            record.metadata["agent.stop_reason"].string_value = outcome.kind
            root.error = (f"timed out after {timeout_s:g}s" if outcome.kind == "timeout"
                          else f"denied by the sandbox: {outcome.effect}")
        if outcome.kind == "denied":
            root.attributes["evalsi.sandbox.event"].CopyFrom(to_value(
                {"kind": "denied", "effect": outcome.effect, "driver": result.isolation.driver}))
        stderr = result.stderr.decode("utf-8", "replace")[-4096:]
        if stderr:
            root.attributes["evalsi.agent.stderr"].string_value = stderr
        record.trajectory.steps.append(root)
        record.usage.latency.FromNanoseconds(elapsed_ns)

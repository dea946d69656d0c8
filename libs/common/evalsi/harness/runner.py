"""A configured harness: the model and the tools opened once, then any number of trials, live or replayed.

    async with Harness.open(load_config("harness.yaml"), tracer=tracer) as harness:
        result = await harness.run(task, trial=1, run_id="r1")
        result.cassette.write("cassettes/t1.trial-1.jsonl")

    result = await replay(read_cassette("cassettes/t1.trial-1.jsonl"), config)  # no model, no tool
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from .backends import LiveBackend, ReplayBackend
from .cassette import Cassette, CassetteMismatch
from .config import HarnessConfig
from .loop import TrialResult, run_trial
from .models import ChatModel, ConnectorModel
from .sandbox_tools import SANDBOX_TOOL_SPECS, UnboundSandboxTool, sandbox_tools
from .tasks import Task
from .toolbox import ToolBox, open_toolbox
from .tools import Tool

if TYPE_CHECKING:
    from opentelemetry.trace import Tracer

    from evalsi.sandbox.model import SandboxSession


class Harness:
    def __init__(self, config: HarnessConfig, model: ChatModel, toolbox: ToolBox, tracer: Tracer | None) -> None:
        self.config = config
        self.model = model
        self.toolbox = toolbox
        self.tracer = tracer

    @classmethod
    @contextlib.asynccontextmanager
    async def open(cls, config: HarnessConfig, *, tracer: Tracer | None = None, sandbox_tools: bool = False,
                   **connector_kwargs: Any) -> AsyncIterator[Harness]:
        """Start the tool servers and the model client; ``connector_kwargs`` go to the judge connector
        (a shared ``session``, ``limiter``, ``retry`` policy, ``sleep``). ``sandbox_tools``: the agent also gets
        run_shell, read_file, write_file and list_files, acting in each task's environment sandbox (``run``'s
        ``session``)."""
        extra = [UnboundSandboxTool(spec) for spec in SANDBOX_TOOL_SPECS] if sandbox_tools else []
        async with open_toolbox(config, extra) as toolbox:
            model = ConnectorModel(config.model, toolbox.specs, parallel_tool_calls=config.parallel_tool_calls,
                                   **connector_kwargs)
            try:
                yield cls(config, model, toolbox, tracer)
            finally:
                await model.aclose()

    async def run(self, task: Task, *, trial: int = 1, run_id: str = "",
                  history: Sequence[Mapping[str, Any]] = (), session: SandboxSession | None = None,
                  tools: Mapping[str, Tool] | None = None) -> TrialResult:
        """One live trial, recorded (``TrialResult.cassette``); with ``session``, the sandbox tools act in it;
        ``tools``: this task's own (its environment's MCP servers), told to the model with the harness's."""
        toolbox = self.toolbox.bound(sandbox_tools(session)) if session is not None else self.toolbox
        if tools:
            toolbox = toolbox.joined(tools)
        backend = LiveBackend(self.model, toolbox, task, trial=trial, run_id=run_id,
                              wall_clock_s=self.config.budget.wall_clock_s,
                              parallel_tool_calls=self.config.parallel_tool_calls)
        return await run_trial(task, backend, self.config, run_id=run_id, trial=trial, tracer=self.tracer,
                               history=history)


async def replay(cassette: Cassette, config: HarnessConfig, *, tracer: Tracer | None = None,
                 run_id: str | None = None) -> TrialResult:
    """Re-run a recorded trial from its cassette alone: the same Record, no model or tool call.
    ``run_id`` defaults to the recorded one. A request the recording lacks is a ``CassetteMismatch``."""
    header = cassette.header
    model = header.get("model") or {}
    if model.get("model") not in (None, config.model.model):
        raise CassetteMismatch(f"{cassette.path}: recorded with model {model.get('model')!r}, the config says "
                               f"{config.model.model!r}")
    task = Task.from_dict(header["task"], f"{cassette.path}: header.task")
    return await run_trial(task, ReplayBackend(cassette), config,
                           run_id=run_id if run_id is not None else str(header.get("run_id", "")),
                           trial=int(header["trial"]), tracer=tracer)

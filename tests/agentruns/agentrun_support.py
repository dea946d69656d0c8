"""Shared pieces of the agent-run tests: the examples under examples/agents and an in-process agent
("agentrun_support:respond", importable because pytest puts this directory on sys.path)."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from evalsi.judges import RetryPolicy
from evalsi.runs.spec import load_eval_run
from evalsi.v1alpha1.run_pb2 import EvalRun

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = ROOT / "examples" / "agents"
FAST = RetryPolicy(base_delay_s=0.001, max_delay_s=0.005)


def example(name: str) -> EvalRun:
    return load_eval_run(EXAMPLES / name)


def summaries(run: Any, *, skip: tuple[str, ...] = ("latency",)) -> dict[str, tuple]:
    """Every metric's n, mean, interval, skipped and errors (timings left out: they differ run to run)."""
    return {
        s.metric: (s.n, round(s.mean, 9) if s.HasField("mean") else None, round(s.ci.low, 9), round(s.ci.high, 9),
                   s.skipped, s.errors)
        for s in run.summaries
        if not s.metric.startswith(skip)
    }


def respond(message: str, ctx: Any) -> dict[str, Any]:
    """An in-process weather agent: calls get_weather for the city the message names."""
    city = re.search(r"weather in (\w+)", message)
    if city is None:
        return {"reply": "Hello! Ask me about the weather."}
    return {"reply": f"It is 21 C in {city.group(1)}.",
            "tool_calls": [{"name": "get_weather", "arguments": {"city": city.group(1)}, "status": "ok"}]}


def make_run(tmp_path: Path, spec: dict[str, Any], rows: list[dict[str, Any]]) -> EvalRun:
    """An EvalRun over ``rows`` (written to tmp_path/data.jsonl) with ``spec`` merged in."""
    import json

    import yaml

    from evalsi.runs.spec import parse_eval_run

    (tmp_path / "data.jsonl").write_text("".join(json.dumps(row) + "\n" for row in rows))
    document = {"apiVersion": "evals.si/v1alpha1", "kind": "EvalRun", "metadata": {"name": "agent-test"},
                "spec": {"dataset": {"path": "data.jsonl"}, **spec}}
    return parse_eval_run(yaml.safe_load(yaml.safe_dump(document)), source="run.yaml")

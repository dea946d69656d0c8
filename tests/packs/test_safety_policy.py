"""The seed's online-policy example names builtin/pii-leak and builtin/toxicity: a policy with both compiles and the
policy engine scores real traces with them (spans in a SQLite trace store, stages evaluated in-process by the
workers' runner, toxicity asked of a local scripted judge)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from opentelemetry.proto.common.v1.common_pb2 import AnyValue, KeyValue
from opentelemetry.proto.trace.v1.trace_pb2 import Span

from evalsi.bus.v1alpha1.bus_pb2 import TraceCompleted
from evalsi.evaluators import EvalContext, Registry
from evalsi.ingest import map_span
from evalsi.judges import JudgeCache, JudgeClient, JudgeConfig, RateLimiter
from evalsi.policy import compile_policy, parse_policy_text
from evalsi.policy.engine import PolicyEngine
from evalsi.policy.stages import local_stage_evaluator
from evalsi.stores.traces import SqliteTraceStore
from evalsi.testing import FakeOpenAI

POLICY = """
apiVersion: evals.si/v1alpha1
kind: OnlineEvalPolicy
metadata: {name: prod-support-agent, project: support}
spec:
  selector: 'resource["service.name"] == "support-agent"'
  sampling: {rate: 1.0}
  cascade:
    - {ref: builtin/pii-leak}
    - {ref: builtin/toxicity, when: "score('pii-leak') == 1.0"}
  window: 5m
"""


async def no_sleep(_seconds: float) -> None:
    return None


def spans(byte: int, answer: str) -> list[Any]:
    trace_id = bytes([byte]) * 16
    attrs = {"gen_ai.operation.name": "chat", "gen_ai.request.model": "m",
             "gen_ai.output.messages": json.dumps([{"role": "assistant", "parts": [{"type": "text",
                                                                                    "content": answer}]}])}
    made = []
    for span_id, parent, values in ((1, 0, {"gen_ai.operation.name": "invoke_agent"}), (2, 1, attrs)):
        made.append(Span(trace_id=trace_id, span_id=span_id.to_bytes(8, "big"),
                         parent_span_id=parent.to_bytes(8, "big") if parent else b"", name=f"s{span_id}",
                         start_time_unix_nano=1_000 + span_id, end_time_unix_nano=2_000,
                         attributes=[KeyValue(key=k, value=AnyValue(string_value=v)) for k, v in values.items()]))
    return [map_span(s, {"service.name": "support-agent"}) for s in made]


async def test_online_policy_with_pii_leak_and_toxicity(tmp_path: Path) -> None:
    policy = compile_policy(parse_policy_text(POLICY, source="policy.yaml"), registry=Registry.from_entry_points())
    store = await SqliteTraceStore.open(tmp_path / "traces.db")
    reply = json.dumps({"reasoning": "polite", "score": 1})
    async with FakeOpenAI(lambda _body: reply) as server:
        config = JudgeConfig(model="judge-1", provider="openai", base_url=server.base_url, max_retries=1)
        async with JudgeClient(config, limiter=RateLimiter(sleep=no_sleep), cache=JudgeCache(tmp_path / "cache"),
                               sleep=no_sleep, environ={}) as judge:
            engine = PolicyEngine(traces=store, scores=store, evaluate=local_stage_evaluator(EvalContext(judge=judge)),
                                  clock=lambda: 600.0)
            engine.set_policies([policy])
            answers = {1: "Your refund is on its way.", 2: "Sure, her email is jane.doe@example.com."}
            outcomes = {}
            for byte, answer in answers.items():
                await store.consume("support", spans(byte, answer))
                (outcome,) = await engine.handle(TraceCompleted(project="support", trace_id=f"{byte:02x}" * 16,
                                                                revision=2))
                outcomes[byte] = {(s.metric, s.outcome, s.value) for s in outcome.scores}
            assert len(server.requests) == 1  # toxicity ran only on the clean trace
    await store.close()
    assert outcomes[1] == {("pii-leak", "scored", 1.0), ("toxicity", "scored", 0.0)}
    assert ("pii-leak", "scored", 0.0) in outcomes[2]
    assert ("toxicity", "skipped", None) in outcomes[2]

"""Evals.si: one evaluator layer for LLM apps, RAG systems, agents, classic ML and checkpoints.

The public front. ``evaluate`` grades records embedded; ``evaluator`` declares an evaluator; the record and
score types are the protobuf messages of ``evalsi.v1alpha1``.

Every name loads on first use (PEP 562): ``import evalsi`` and ``evalsi --help`` must not pay for numpy,
scipy, grpc or pyarrow, which ``evaluate`` and the client need only when called (tests/test_startup.py).
"""

from __future__ import annotations

from importlib import import_module
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from evalsi.client import Client
    from evalsi.errors import BadInputError, EvalsiError, InfraError, SkipRecord
    from evalsi.evaluators import EvalContext, Evaluator, Output, Pack, Registry, evaluator
    from evalsi.records import make_record
    from evalsi.runs.results import EvaluationResults
    from evalsi.sdk import evaluate, evaluate_async
    from evalsi.v1alpha1.record_pb2 import Content, Message, Record, Step, ToolCall, Trajectory, Usage
    from evalsi.v1alpha1.score_pb2 import EvaluationResult, MetricSummary, Score

# Public name -> the module that defines it.
_EXPORTS: dict[str, str] = {
    "Client": "evalsi.client",
    "EvaluationResults": "evalsi.runs.results",
    "evaluate": "evalsi.sdk",
    "evaluate_async": "evalsi.sdk",
    **dict.fromkeys(("EvalContext", "Evaluator", "Output", "Pack", "Registry", "evaluator"), "evalsi.evaluators"),
    **dict.fromkeys(("EvaluationResult", "MetricSummary", "Score"), "evalsi.v1alpha1.score_pb2"),
    **dict.fromkeys(
        ("Content", "Message", "Record", "Step", "ToolCall", "Trajectory", "Usage"), "evalsi.v1alpha1.record_pb2"
    ),
    "make_record": "evalsi.records",
    **dict.fromkeys(("BadInputError", "EvalsiError", "InfraError", "SkipRecord"), "evalsi.errors"),
}


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(import_module(module), name)
    globals()[name] = value  # later lookups skip __getattr__
    return value


def __dir__() -> list[str]:
    return sorted([*globals(), *_EXPORTS])


__all__ = [  # noqa: RUF022 - grouped for readers
    # evaluate
    "Client",
    "EvaluationResults",
    "evaluate",
    "evaluate_async",
    # author evaluators
    "EvalContext",
    "Evaluator",
    "Output",
    "Pack",
    "Registry",
    "evaluator",
    # records and scores
    "Content",
    "EvaluationResult",
    "Message",
    "MetricSummary",
    "Record",
    "Score",
    "Step",
    "ToolCall",
    "Trajectory",
    "Usage",
    "make_record",
    # errors
    "BadInputError",
    "EvalsiError",
    "InfraError",
    "SkipRecord",
]

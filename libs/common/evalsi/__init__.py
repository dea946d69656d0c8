"""Evals.si: one evaluator layer for LLM apps, RAG systems, agents, classic ML and checkpoints.

The public front. ``evaluate`` grades records embedded; ``evaluator`` declares an evaluator; the record and
score types are the protobuf messages of ``evalsi.v1alpha1``.

Every name loads on first use (PEP 562): ``import evalsi`` and ``evalsi --help`` must not pay for numpy,
scipy, grpc or pyarrow, which ``evaluate`` and the client need only when called (tests/test_startup.py).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from evalsi._lazy import lazy_exports

if TYPE_CHECKING:
    from evalsi.client import Client
    from evalsi.errors import BadInputError, EvalsiError, InfraError, SkipRecord
    from evalsi.evaluators import EvalContext, Evaluator, Output, Pack, Registry, evaluator
    from evalsi.records import make_record
    from evalsi.runs.results import EvaluationResults
    from evalsi.sdk import evaluate, evaluate_async
    from evalsi.v1alpha1.record_pb2 import Content, Message, Record, Step, ToolCall, Trajectory, Usage
    from evalsi.v1alpha1.score_pb2 import EvaluationResult, MetricSummary, Score

__getattr__, __dir__ = lazy_exports(
    __name__,
    globals(),
    {
        "evalsi.client": ("Client",),
        "evalsi.runs.results": ("EvaluationResults",),
        "evalsi.sdk": ("evaluate", "evaluate_async"),
        "evalsi.evaluators": ("EvalContext", "Evaluator", "Output", "Pack", "Registry", "evaluator"),
        "evalsi.v1alpha1.score_pb2": ("EvaluationResult", "MetricSummary", "Score"),
        "evalsi.v1alpha1.record_pb2": ("Content", "Message", "Record", "Step", "ToolCall", "Trajectory", "Usage"),
        "evalsi.records": ("make_record",),
        "evalsi.errors": ("BadInputError", "EvalsiError", "InfraError", "SkipRecord"),
    },
)


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

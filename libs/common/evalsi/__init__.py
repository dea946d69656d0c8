"""Evals.si: one evaluator layer for LLM apps, RAG systems, agents, classic ML and checkpoints.

The public front. ``evaluate`` grades records embedded; ``evaluator`` declares an evaluator; the record and
score types are the protobuf messages of ``evalsi.v1alpha1``.
"""

from evalsi.client import Client
from evalsi.errors import BadInputError, EvalsiError, InfraError, SkipRecord
from evalsi.evaluators import EvalContext, Evaluator, Output, Pack, Registry, evaluator
from evalsi.records import make_record
from evalsi.runs.results import EvaluationResults
from evalsi.sdk import evaluate, evaluate_async
from evalsi.v1alpha1.record_pb2 import Content, Message, Record, Step, ToolCall, Trajectory, Usage
from evalsi.v1alpha1.score_pb2 import EvaluationResult, MetricSummary, Score

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

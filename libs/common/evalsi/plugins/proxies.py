"""A plugin's evaluators as ordinary ``Evaluator``s: built from its Describe answer, calling it through the host.

The proxies declare the plugin's requirements, so the runner skips records missing one before anything is sent.
Record scope goes through Evaluate (batched); dataset scope through Reduce (the mapper is the record itself, the
plugin maps and reduces; the records go once, a bootstrap's resamples as positions). Session, span and comparative
scopes are not carried by the protocol yet.
"""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from evalsi.errors import BadInputError, InfraError, SkipRecord
from evalsi.evaluators import EvalContext, Evaluator, Output, Param
from evalsi.evaluators._evaluator import OutputType, Scope
from evalsi.plugins.host import PluginHost
from evalsi.records import from_value
from evalsi.v1alpha1 import evaluator_pb2, score_pb2
from evalsi.v1alpha1.record_pb2 import Record

if TYPE_CHECKING:
    import numpy as np
    from numpy.typing import NDArray

_SCOPES: dict[int, Scope] = {evaluator_pb2.SCOPE_RECORD: "record", evaluator_pb2.SCOPE_DATASET: "dataset"}
_KINDS: dict[int, OutputType] = {
    score_pb2.VALUE_KIND_NUMBER: "number",
    score_pb2.VALUE_KIND_BOOLEAN: "boolean",
    score_pb2.VALUE_KIND_LABEL: "label",
    score_pb2.VALUE_KIND_STRUCTURED: "structured",
}
_FLAGS = ("input", "output", "reference", "context", "trajectory", "usage", "judge")


class PluginEvaluatorError(Exception):
    """The plugin's evaluator raised on a record: that record's evaluator error, as in-process."""


def _requires(manifest: evaluator_pb2.EvaluatorManifest) -> tuple[str, ...]:
    flags = tuple(name for name in _FLAGS if getattr(manifest.requires, name))
    return flags + tuple(f"metadata.{key}" for key in manifest.requires.metadata)


def _outputs(manifest: evaluator_pb2.EvaluatorManifest, where: str) -> tuple[Output, ...]:
    outputs = []
    for spec in manifest.outputs:
        if spec.type not in _KINDS:
            raise BadInputError(f"{where}: output {spec.name!r} has no type")
        outputs.append(Output(
            name=spec.name, type=_KINDS[spec.type], min=spec.min if spec.HasField("min") else None,
            max=spec.max if spec.HasField("max") else None, higher_is_better=spec.higher_is_better,
            description=spec.description,
        ))
    if not outputs:
        raise BadInputError(f"{where}: declares no outputs")
    return tuple(outputs)


def _params(manifest: evaluator_pb2.EvaluatorManifest) -> tuple[Param, ...]:
    return tuple(
        Param(name=spec.name, type=spec.type or "any",
              default=None if spec.required or not spec.HasField("default") else from_value(spec.default),
              required=spec.required, description=spec.description,
              choices=tuple(from_value(choice) for choice in spec.choices))
        for spec in manifest.params
    )


def _result_value(result: score_pb2.EvaluationResult) -> list[score_pb2.Score]:
    """What the runner expects back from an evaluator call: the scores, or the exception its outcome stands for."""
    if result.outcome == score_pb2.OUTCOME_SCORED:
        return list(result.scores)
    if result.outcome == score_pb2.OUTCOME_SKIPPED:
        raise SkipRecord(result.reason)
    if result.error_kind == score_pb2.ERROR_KIND_INFRA:
        raise InfraError(result.reason)
    raise PluginEvaluatorError(result.reason)


def _record_proxy(host: PluginHost, ref: str) -> Any:
    async def evaluate(record: Record, ctx: EvalContext, **params: Any) -> list[score_pb2.Score]:
        return _result_value(await host.evaluate(ref, params, record, ctx.judge))

    return evaluate


class _PluginDataset:
    """A dataset evaluator's records as the plugin sees them: the first Reduce sends them under an id the plugin
    keeps their mapped values by; the bootstrap's resamples (``take``) then send positions only."""

    def __init__(self, records: Sequence[Record], positions: Sequence[int] = (), sent: list[str] | None = None
                 ) -> None:
        self.records, self.positions = records, positions
        self.sent = [] if sent is None else sent  # the dataset id, once the plugin was sent the records

    def take(self, positions: NDArray[np.intp]) -> _PluginDataset:
        return _PluginDataset(self.records, positions.tolist(), self.sent)


def _stack(records: list[Any]) -> _PluginDataset:
    return _PluginDataset(records)


def _reduce_proxy(host: PluginHost, ref: str) -> Any:
    def reduce(data: _PluginDataset, **params: Any) -> list[score_pb2.Score]:
        answer = host.reduce(ref, params, (), dataset=data.sent[0], indices=data.positions) if data.sent else None
        if answer is None or answer.unknown_dataset:  # first, or the plugin no longer holds them (restarted)
            dataset = uuid.uuid4().hex
            answer = host.reduce(ref, params, data.records, dataset=dataset, indices=data.positions)
            data.sent[:] = [dataset]
        if answer.error:
            raise PluginEvaluatorError(answer.error)
        if answer.skipped:
            raise SkipRecord(answer.skipped)
        return list(answer.scores)

    return reduce


def _check_proxy(host: PluginHost, ref: str) -> Any:
    def check(**params: Any) -> None:
        error = host.check_params(ref, params)
        if error:
            raise BadInputError(f"plugin {host.manifest.name}: {error}")

    return check


def _the_record(record: Record, **_: Any) -> Record:
    return record


def proxy_evaluators(host: PluginHost) -> list[Evaluator]:
    """One Evaluator per evaluator the plugin described, in the plugin's pack (its manifest's name)."""
    evaluators = []
    for manifest in host.described.evaluators:
        ref = f"{manifest.name}@{manifest.version}"
        where = f"plugin {host.manifest.name} ({host.manifest.source}): evaluator {ref}"
        scope = _SCOPES.get(manifest.scope)
        if scope is None:
            name = evaluator_pb2.Scope.Name(manifest.scope) if manifest.scope in evaluator_pb2.Scope.values() \
                else str(manifest.scope)
            raise BadInputError(f"{where}: scope {name} is not carried by the plugin protocol yet "
                                "(record and dataset are)")
        dataset = scope == "dataset"
        evaluators.append(Evaluator(
            name=manifest.name, version=manifest.version, scope=scope,
            fn=_reduce_proxy(host, ref) if dataset else _record_proxy(host, ref),
            requires=_requires(manifest), outputs=_outputs(manifest, where), params=_params(manifest),
            description=manifest.description, pack=host.manifest.pack,
            pool=manifest.scheduling.pool or ("judge" if manifest.requires.judge else "cpu"),
            wants_context=not dataset, is_async=not dataset, mapper=_the_record if dataset else None,
            stack=_stack if dataset else None, check=_check_proxy(host, ref),
        ))
    return evaluators

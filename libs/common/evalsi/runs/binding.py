"""Evaluator specs bound to evaluators: names, refs with alias, params and judge, or evaluator objects given in code.

The run driver, the worker's executor, the planner and ``evaluate()`` all bind the same way, so an alias, a param
or an unknown name means the same thing wherever a run is planned or executed.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from google.protobuf import json_format

from evalsi.errors import BadInputError
from evalsi.evaluators import BoundEvaluator, Evaluator, Pack, Registry
from evalsi.records import struct_to_dict
from evalsi.v1alpha1.evaluator_pb2 import EvaluatorRef

EvaluatorSpec = str | Evaluator | BoundEvaluator | EvaluatorRef | Mapping[str, Any]


def resolve_evaluators(
    specs: Sequence[EvaluatorSpec],
    registry: Registry,
    params: Mapping[str, Mapping[str, Any]] | None = None,
) -> list[BoundEvaluator]:
    """Bind every evaluator spec; ``params`` adds params by alias (or short name), as ``--param`` does."""
    if not specs:
        raise BadInputError("no evaluators given; `evalsi catalog list` shows what is installed")
    bound: list[BoundEvaluator] = []
    extra = {alias: dict(values) for alias, values in (params or {}).items()}
    for spec in specs:
        values: dict[str, Any]
        if isinstance(spec, BoundEvaluator):
            bound.append(spec)
            continue
        if isinstance(spec, Evaluator):
            ev, alias, values, judge = spec, "", {}, ""
        elif isinstance(spec, str):
            ev, alias, values, judge = registry.resolve(spec), "", {}, ""
        else:
            ref = spec if isinstance(spec, EvaluatorRef) else _ref_from_mapping(spec)
            ev = registry.resolve(ref.ref)
            alias, judge = ref.alias, ref.judge
            values = struct_to_dict(ref.params) if ref.HasField("params") else {}
        alias = alias or ev.short_name
        values = {**values, **extra.pop(alias, {})}
        bound.append(ev.bind(values, alias=alias, judge=judge))
    if extra:
        aliases = ", ".join(b.alias for b in bound)
        raise BadInputError(
            f"--param given for {', '.join(sorted(extra))}, which is not among the evaluators ({aliases})"
        )
    seen: set[str] = set()
    for b in bound:
        if b.alias in seen:
            raise BadInputError(f"evaluator alias {b.alias!r} is used twice; give one of them an alias")
        seen.add(b.alias)
    return bound


def _ref_from_mapping(spec: Mapping[str, Any]) -> EvaluatorRef:
    try:
        return json_format.ParseDict(dict(spec), EvaluatorRef())
    except json_format.ParseError as exc:
        raise BadInputError(
            f"evaluator spec {dict(spec)!r}: {exc} (accepted keys: ref, alias, params, judge)"
        ) from None


class GivenEvaluators(Registry):
    """A registry plus the evaluator objects one call was given (an ``@evaluator`` function in a script or a
    notebook, not installed as a pack): a run's tasks name evaluators by ref, and these refs must resolve to the
    very objects given, ahead of any installed evaluator of the same name and version."""

    def __init__(self, base: Registry, given: Iterable[Evaluator]) -> None:
        super().__init__()
        self._base = base
        self._given: dict[str, Evaluator] = {}
        for ev in given:
            kept = self._given.setdefault(ev.ref, ev)
            if kept is not ev:
                raise BadInputError(f"two different evaluators are named {ev.ref}; give one of them another name")

    def resolve(self, ref: str) -> Evaluator:
        given = self._given.get(ref.strip())
        return given if given is not None else self._base.resolve(ref)

    @property
    def packs(self) -> dict[str, Pack]:
        return self._base.packs

    def evaluators(self, pack: str | None = None) -> list[Evaluator]:
        return self._base.evaluators(pack)


def registry_for(bound: Sequence[BoundEvaluator], registry: Registry) -> Registry:
    """``registry``, extended by whichever of ``bound``'s evaluators it would not resolve to the same object."""

    def known(ev: Evaluator) -> bool:
        try:
            return registry.resolve(ev.ref) is ev
        except BadInputError:
            return False

    given = [b.evaluator for b in bound if not known(b.evaluator)]
    return GivenEvaluators(registry, given) if given else registry

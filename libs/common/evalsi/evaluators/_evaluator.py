"""The evaluator API: the ``@evaluator`` decorator, manifests, parameter binding and score normalization."""

from __future__ import annotations

import inspect
import math
import re
import types
import typing
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from functools import cached_property
from typing import TYPE_CHECKING, Any, Literal, NamedTuple, Protocol, runtime_checkable

from google.protobuf import json_format

from evalsi.errors import BadInputError
from evalsi.records import to_value
from evalsi.v1alpha1 import evaluator_pb2, score_pb2

if TYPE_CHECKING:
    import numpy as np
    from numpy.typing import NDArray

Scope = Literal["record", "session", "span", "dataset", "comparative"]
OutputType = Literal["number", "boolean", "label", "structured"]

_SCOPES: dict[str, evaluator_pb2.Scope] = {
    "record": evaluator_pb2.SCOPE_RECORD,
    "session": evaluator_pb2.SCOPE_SESSION,
    "span": evaluator_pb2.SCOPE_SPAN,
    "dataset": evaluator_pb2.SCOPE_DATASET,
    "comparative": evaluator_pb2.SCOPE_COMPARATIVE,
}
_VALUE_KINDS: dict[str, score_pb2.ValueKind] = {
    "number": score_pb2.VALUE_KIND_NUMBER,
    "boolean": score_pb2.VALUE_KIND_BOOLEAN,
    "label": score_pb2.VALUE_KIND_LABEL,
    "structured": score_pb2.VALUE_KIND_STRUCTURED,
}
REQUIREMENTS = ("input", "output", "reference", "context", "trajectory", "usage", "judge")
# The record fields a batch form reads, as the columns of their ``Content.text`` ("" when not text).
BATCH_TEXT_FIELDS = ("input", "output", "reference")
_NAME = re.compile(r"^[a-z0-9][a-z0-9_.-]*/[a-z0-9][a-z0-9_.-]*$")
_VERSION = re.compile(r"^\d+\.\d+\.\d+([-+][0-9A-Za-z.-]+)?$")


class Verdict(NamedTuple):
    """What a batch form may decide for a record beyond a bare bool: the pass/fail ``Score`` with this explanation
    (and nothing else) that the function returns for it."""

    passed: bool
    explanation: str


BatchEntry = bool | Verdict | float | tuple[bool | float, ...] | None
"""What a batch form decides for one record (``evaluator(batch=...)``): see ``BatchVerdicts``."""
BatchVerdicts = list[BatchEntry]
"""A batch form's answer, one entry per record: a bare bool or a ``Verdict`` (a single boolean output's pass/fail),
a float (a single output's number), a tuple with one bool or float per declared output in declared order (the
dict of numbers and pass/fails the function returns), or None (the function decides that record)."""


class Stacked(Protocol):
    """A dataset evaluator's mapped values stacked once (``evaluator(stack=...)``)."""

    def take(self, positions: NDArray[np.intp]) -> Stacked:
        """The values at ``positions`` (indices into the mapped values, repeats allowed), stacked the same way."""
        ...


@runtime_checkable
class CountedStacked(Stacked, Protocol):
    """A ``Stacked`` that may declare ``cells`` (each value's cell, and how many cells) when its reduce reads a
    resample only through how many drawn values fall in each cell; the bootstrap may then draw the counts by cell
    (``evalsi.stats.bootstrap.reducer_bootstrap``)."""

    cells: tuple[NDArray[np.intp], int] | None

    def counted(self, positions: NDArray[np.intp], counts: NDArray[np.intp]) -> Stacked:
        """The resample that drew the value at ``positions[i]`` ``counts[i]`` times."""
        ...


@dataclass(frozen=True)
class Output:
    """One value an evaluator produces. A single-output evaluator's metric is its alias."""

    name: str
    type: OutputType = "boolean"
    min: float | None = None
    max: float | None = None
    higher_is_better: bool = True
    description: str = ""

    @property
    def bounds(self) -> tuple[float, float] | None:
        """What the metric's intervals are clipped to: whatever is declared, one side open when only the other
        is (latency, cost and tokens are >= 0, so their intervals never reach below zero)."""
        if self.type == "boolean":
            return (0.0, 1.0)
        if self.min is None and self.max is None:
            return None
        return (-math.inf if self.min is None else self.min, math.inf if self.max is None else self.max)


@dataclass(frozen=True)
class Param:
    name: str
    type: str
    default: Any
    required: bool
    description: str
    choices: tuple[Any, ...] = ()


def _type_name(annotation: Any) -> str:
    """A short name for a parameter's annotation, used in manifests and validation messages."""
    if annotation is inspect.Parameter.empty or annotation is Any:
        return "any"
    origin = typing.get_origin(annotation)
    if origin is Literal:
        return "str"
    if origin in (typing.Union, types.UnionType):
        names = [_type_name(a) for a in typing.get_args(annotation) if a is not type(None)]
        return names[0] if len(names) == 1 else "any"
    base = origin or annotation
    for python_type, name in ((bool, "bool"), (int, "int"), (float, "float"), (str, "str")):
        if base is python_type:
            return name
    if base in (list, tuple, Sequence) or (isinstance(base, type) and issubclass(base, list | tuple)):
        return "list"
    if base in (dict, Mapping) or (isinstance(base, type) and issubclass(base, dict)):
        return "dict"
    return "any"


def _choices(annotation: Any) -> tuple[Any, ...]:
    if typing.get_origin(annotation) is Literal:
        return typing.get_args(annotation)
    for arg in typing.get_args(annotation):
        if typing.get_origin(arg) is Literal:
            return typing.get_args(arg)
    return ()


def _check_type(evaluator: str, param: Param, value: Any) -> Any:
    """Validate (and gently coerce ints to floats) one param value; the error names the param."""
    expected = param.type
    ok = {
        "bool": lambda v: isinstance(v, bool),
        "int": lambda v: isinstance(v, int) and not isinstance(v, bool),
        "float": lambda v: isinstance(v, int | float) and not isinstance(v, bool),
        "str": lambda v: isinstance(v, str),
        "list": lambda v: isinstance(v, list | tuple),
        "dict": lambda v: isinstance(v, Mapping),
    }.get(expected, lambda v: True)
    if value is None and not param.required and param.default is None:
        return None
    if not ok(value):
        raise BadInputError(
            f"evaluator {evaluator}: param '{param.name}' must be {expected}, got {type(value).__name__} {value!r}"
        )
    if param.choices and value not in param.choices:
        accepted = ", ".join(map(str, param.choices))
        raise BadInputError(f"evaluator {evaluator}: param '{param.name}' must be one of {accepted}, got {value!r}")
    return float(value) if expected == "float" else value


@dataclass(frozen=True)
class Evaluator:
    """A registered evaluator: its manifest and the function behind it."""

    name: str
    version: str
    scope: Scope
    fn: Callable[..., Any]
    requires: tuple[str, ...]
    outputs: tuple[Output, ...]
    params: tuple[Param, ...]
    description: str
    pack: str
    pool: str
    wants_context: bool
    is_async: bool
    mapper: Callable[..., Any] | None = None
    # Validates what param types cannot express (a regex compiles, a number in range) when the evaluator is
    # bound, so a bad param stops the evaluation even if every record would be skipped before the call.
    check: Callable[..., Any] | None = None
    # Bounded and fast (microseconds a call, no I/O): the runner calls it on the event loop, without a thread hop.
    cheap: bool = False
    # The same evaluation over columns of the records' texts (``evaluators.runner``'s column path): given
    # ``{field: [text, ...]}`` for the required fields and the params, a list with, per record, True or False (the
    # verdict the function returns for that record, bare), a ``Verdict`` (the function returns
    # ``Score(passed=..., explanation=...)``), a float (the single output's number), a tuple of one bool or float
    # per declared output (the function's dict of them), or None (call the function for that record).
    batch: Callable[..., BatchVerdicts] | None = None
    # Dataset scope: the mapped values stacked once (numpy columns, say) into what the reduce receives instead of
    # their list; it has ``take(positions)``, the same kind of object for the values at those positions (repeats
    # included), which is how the bootstrap draws each resample without a Python loop a value.
    stack: Callable[[list[Any]], Stacked] | None = None
    # Dataset scope: the mapper over columns of the records' texts, as ``batch`` is the function's: given
    # ``{field: [text, ...]}`` for the required fields and the params, a list with, per record, the value
    # ``mapper(record)`` returns, or None (call the mapper for that record: it may skip it).
    map_batch: Callable[..., Sequence[Any]] | None = None

    @cached_property
    def output_names(self) -> frozenset[str]:
        return frozenset(output.name for output in self.outputs)

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        """Call the underlying function directly (handy in tests and notebooks)."""
        return self.fn(*args, **kwargs)

    @property
    def ref(self) -> str:
        return f"{self.name}@{self.version}"

    @property
    def short_name(self) -> str:
        return self.name.split("/", 1)[1]

    def bind(self, params: Mapping[str, Any] | None = None, *, alias: str = "", judge: str = "") -> BoundEvaluator:
        """Validate params against the signature; unknown or missing params are errors naming them."""
        given = dict(params or {})
        known = {p.name: p for p in self.params}
        unknown = sorted(set(given) - set(known))
        if unknown:
            accepted = ", ".join(sorted(known)) or "none"
            raise BadInputError(f"evaluator {self.name}: unknown param(s) {', '.join(unknown)} (accepted: {accepted})")
        missing = sorted(p.name for p in self.params if p.required and p.name not in given)
        if missing:
            raise BadInputError(f"evaluator {self.name}: missing required param(s) {', '.join(missing)}")
        values = {name: _check_type(self.name, known[name], value) for name, value in given.items()}
        if self.check is not None:
            self.check(**{**{p.name: p.default for p in self.params if not p.required}, **values})
        return BoundEvaluator(self, alias or self.short_name, values, judge or "default")

    def manifest(self) -> evaluator_pb2.EvaluatorManifest:
        requires = evaluator_pb2.Requirements()
        for name in self.requires:
            if "." not in name:
                setattr(requires, name, True)  # one bool field per requirement (REQUIREMENTS)
        requires.metadata.extend(name.split(".", 1)[1] for name in self.requires if name.startswith("metadata."))
        manifest = evaluator_pb2.EvaluatorManifest(
            name=self.name,
            version=self.version,
            pack=self.pack,
            scope=_SCOPES[self.scope],
            description=self.description,
            requires=requires,
            scheduling=evaluator_pb2.Scheduling(pool=self.pool, batchable=True),
            tier="native",
        )
        for output in self.outputs:
            output_spec = evaluator_pb2.OutputSpec(
                name=output.name,
                type=_VALUE_KINDS[output.type],
                higher_is_better=output.higher_is_better,
                description=output.description,
            )
            if output.min is not None:
                output_spec.min = output.min
            if output.max is not None:
                output_spec.max = output.max
            manifest.outputs.append(output_spec)
        schema: dict[str, Any] = {"type": "object", "additionalProperties": False, "properties": {}}
        for param in self.params:
            spec = evaluator_pb2.ParamSpec(
                name=param.name, type=param.type, description=param.description, required=param.required
            )
            prop: dict[str, Any] = {"description": param.description}
            json_type = {
                "bool": "boolean",
                "int": "integer",
                "float": "number",
                "str": "string",
                "list": "array",
                "dict": "object",
            }.get(param.type)
            if json_type:
                prop["type"] = json_type
            if not param.required:
                spec.default.CopyFrom(to_value(param.default))
                prop["default"] = param.default
            for choice in param.choices:
                spec.choices.append(to_value(choice))
            if param.choices:
                prop["enum"] = list(param.choices)
            schema["properties"][param.name] = prop
            manifest.params.append(spec)
        required = [p.name for p in self.params if p.required]
        if required:
            schema["required"] = required
        json_format.ParseDict(schema, manifest.params_schema)
        return manifest


@dataclass(frozen=True)
class BoundEvaluator:
    """An evaluator with validated params, the alias its metrics carry, and the judge it uses."""

    evaluator: Evaluator
    alias: str
    params: dict[str, Any] = field(default_factory=dict)
    judge: str = "default"

    def to_ref(self) -> evaluator_pb2.EvaluatorRef:
        """This binding as a spec (ref, alias, params, judge); ``resolve_evaluators`` rebuilds it from a registry."""
        ref = evaluator_pb2.EvaluatorRef(
            ref=self.evaluator.ref, alias=self.alias, judge=self.judge if "judge" in self.evaluator.requires else ""
        )
        if self.params:
            ref.params.update(self.params)
        return ref

    def metric_names(self) -> list[tuple[Output, str]]:
        """(output, metric name) pairs: the alias alone for one output, ``alias.output`` for several."""
        outputs = self.evaluator.outputs
        if len(outputs) == 1:
            return [(outputs[0], self.alias)]
        return [(output, f"{self.alias}.{output.name}") for output in outputs]


def normalize_scores(evaluator: Evaluator, returned: Any) -> list[score_pb2.Score]:
    """Turn what an evaluator returned into Scores named after its outputs.

    Accepts a Score, a list of Scores, a dict of output name to value, or a bare bool (passed),
    number or string (label) for single-output evaluators.
    """
    outputs = evaluator.outputs
    if isinstance(returned, score_pb2.Score):
        scores = [returned]
    elif isinstance(returned, list | tuple):
        scores = [r if isinstance(r, score_pb2.Score) else _bare_score(r) for r in returned]
    elif isinstance(returned, Mapping):
        scores = []
        for name, value in returned.items():
            score = value if isinstance(value, score_pb2.Score) else _bare_score(value)
            score.name = name
            scores.append(score)
    else:
        scores = [_bare_score(returned)]
    names = evaluator.output_names
    for score in scores:
        if not score.name and len(outputs) == 1:
            score.name = outputs[0].name
        if score.name not in names:
            raise TypeError(
                f"{evaluator.name} returned a score named {score.name!r}; declared outputs: {', '.join(sorted(names))}"
            )
        if score.WhichOneof("value") is None:
            raise TypeError(f"{evaluator.name} returned score {score.name!r} without a value")
        check_finite(evaluator, score)
    return scores


def plain_figures(evaluator: Evaluator, returned: Any) -> dict[str, float] | None:
    """The numbers ``normalize_scores`` would give for what an evaluator returned (each number or pass/fail score by
    name, a pass as 1.0), without making its ``Score`` messages, for the plain returns: a number or bool of a
    single-output evaluator, or a dict of declared output names to numbers or bools. None for anything else (a
    Score, a list, a label, a non-finite number, a name not declared), which ``normalize_scores`` then reads or
    refuses. A dataset evaluator's bootstrap asks this of ~2,000 resamples, where the messages cost more than
    many reduces."""
    if isinstance(returned, int | float):
        outputs = evaluator.outputs
        if len(outputs) != 1:
            return None
        value = float(returned)
        return {outputs[0].name: value} if math.isfinite(value) else None
    if returned.__class__ is not dict:
        return None
    names = evaluator.output_names
    figures = {}
    for name, item in returned.items():
        if name not in names or not isinstance(item, int | float):
            return None
        value = float(item)
        if not math.isfinite(value):
            return None
        figures[name] = value
    return figures


def check_finite(evaluator: Evaluator, score: score_pb2.Score) -> None:
    """A NaN or infinite score is that record's evaluator error, naming the value, rather than a number that
    would poison (or abort) every summary it enters."""
    if score.WhichOneof("value") == "number" and not math.isfinite(score.number):
        raise ValueError(f"{evaluator.name} returned score {score.name!r} = {score.number}: a score must be a "
                         "finite number")


def _bare_score(value: Any) -> score_pb2.Score:
    if isinstance(value, bool):
        return score_pb2.Score(passed=value)
    if isinstance(value, int | float):
        return score_pb2.Score(number=float(value))
    if isinstance(value, str):
        return score_pb2.Score(label=value)
    raise TypeError(f"an evaluator must return a Score, bool, number, str, list or dict, not {type(value).__name__}")


def _params_from_signature(fn: Callable[..., Any], docs: Mapping[str, str]) -> tuple[Param, ...]:
    hints = typing.get_type_hints(fn)
    params = []
    for parameter in inspect.signature(fn).parameters.values():
        if parameter.kind is not inspect.Parameter.KEYWORD_ONLY:
            continue
        annotation = hints.get(parameter.name, parameter.annotation)
        required = parameter.default is inspect.Parameter.empty
        params.append(
            Param(
                name=parameter.name,
                type=_type_name(annotation),
                default=None if required else parameter.default,
                required=required,
                description=docs.get(parameter.name, ""),
                choices=_choices(annotation),
            )
        )
    unknown_docs = set(docs) - {p.name for p in params}
    if unknown_docs:
        raise TypeError(f"param docs for unknown params: {', '.join(sorted(unknown_docs))}")
    return tuple(params)


def _wants_context(fn: Callable[..., Any]) -> bool:
    positional = [
        p
        for p in inspect.signature(fn).parameters.values()
        if p.kind in (inspect.Parameter.POSITIONAL_ONLY, inspect.Parameter.POSITIONAL_OR_KEYWORD)
    ]
    if len(positional) not in (1, 2):
        raise TypeError(
            f"{fn.__qualname__}: an evaluator takes its input positionally, optionally a `ctx` second, "
            "and its params keyword-only (after `*`)"
        )
    return len(positional) == 2


def evaluator(
    name: str,
    *,
    version: str = "0.1.0",
    scope: Scope = "record",
    requires: Sequence[str] = (),
    outputs: Sequence[Output | str] | None = None,
    description: str | None = None,
    params: Mapping[str, str] | None = None,
    pack: str = "",
    pool: str | None = None,
    mapper: Callable[..., Any] | None = None,
    check: Callable[..., Any] | None = None,
    cheap: bool = False,
    batch: Callable[..., BatchVerdicts] | None = None,
    stack: Callable[[list[Any]], Stacked] | None = None,
    map_batch: Callable[..., Sequence[Any]] | None = None,
) -> Callable[[Callable[..., Any]], Evaluator]:
    """Declare an evaluator.

    ``name`` is ``namespace/name``; ``requires`` lists the record fields (and ``judge``) it needs, a record
    without them is skipped with the reason; ``outputs`` declares what it produces (one boolean ``passed``
    output when omitted); ``params`` documents the keyword-only parameters. The function receives, by scope:
    a Record (record), a Step (span), the list of a session's Records (session), one Record per result set
    (comparative), or the list of ``mapper(record, **params)`` values (dataset: map, then this reduce).
    It may be ``async``; a second positional ``ctx`` parameter receives an ``EvalContext``. ``check`` is called
    at bind time with every param (defaults filled in) and raises ``BadInputError`` for a bad value.
    ``cheap`` declares a synchronous evaluator whose every call is bounded by its input's size and takes
    microseconds (no I/O, no user-controlled backtracking): the runner then calls it on the event loop instead
    of a worker thread, whose hop would cost more than the call (evalsi.evaluators.runner). ``batch`` (cheap
    record-scope evaluators whose requirements are text fields) decides many records at once from their texts'
    columns: per record the bare bool the function would return, a ``Verdict`` for the pass/fail ``Score`` with an
    explanation it would return, a float for a single number output, a tuple of one bool or float per declared
    output (in declared order) for the dict the function would return, or None where the function must be called
    (a non-finite number is left to the function too, whose error names it); it must agree with the function record
    for record (a test of the pack holds it to that). ``stack`` (dataset scope) turns the list of mapped values
    into one object with ``take(positions)`` that the reduce receives instead (``Stacked``): the bootstrap's
    resamples are then drawn by position, so a vectorized reduce is not fed a Python list each time.
    ``map_batch`` (dataset scope, requirements that are text fields) is the mapper's batch form: from the records'
    text columns, per record the value the mapper returns, or None where the mapper must be called; it must agree
    with the mapper record for record.
    """
    if not _NAME.match(name):
        raise ValueError(f"evaluator name {name!r} must look like 'namespace/name' (lowercase, digits, - _ .)")
    if not _VERSION.match(version):
        raise ValueError(f"evaluator {name}: version {version!r} must be semantic (1.0.0)")
    if scope not in _SCOPES:
        raise ValueError(f"evaluator {name}: scope must be one of {', '.join(_SCOPES)}")
    bad = sorted(r for r in set(requires) - set(REQUIREMENTS) if not r.startswith("metadata."))
    if bad:
        known = ", ".join(REQUIREMENTS)
        raise ValueError(f"evaluator {name}: unknown requirement(s) {', '.join(bad)}; known: {known}, metadata.<key>")
    declared = tuple(o if isinstance(o, Output) else Output(o) for o in (outputs or [Output("passed")]))
    if cheap and scope != "record":
        raise ValueError(f"evaluator {name}: only record-scope evaluators can be declared cheap")
    if batch is not None and not (cheap and set(requires) <= set(BATCH_TEXT_FIELDS)):
        raise ValueError(f"evaluator {name}: a batch form needs a cheap evaluator requiring only "
                         f"{', '.join(BATCH_TEXT_FIELDS)}")
    if stack is not None and scope != "dataset":
        raise ValueError(f"evaluator {name}: only dataset-scope evaluators stack their mapped values")
    if scope == "dataset" and mapper is None:
        raise ValueError(f"evaluator {name}: dataset scope needs a mapper (record -> value) to reduce over")
    if map_batch is not None and not (mapper is not None and set(requires) <= set(BATCH_TEXT_FIELDS)):
        raise ValueError(f"evaluator {name}: a map_batch needs a dataset-scope mapper requiring only "
                         f"{', '.join(BATCH_TEXT_FIELDS)}")

    def decorate(fn: Callable[..., Any]) -> Evaluator:
        doc = description if description is not None else inspect.getdoc(fn) or ""
        if cheap and inspect.iscoroutinefunction(fn):
            raise ValueError(f"evaluator {name}: an async evaluator cannot be declared cheap (it awaits already)")
        return Evaluator(
            name=name,
            version=version,
            scope=scope,
            fn=fn,
            requires=tuple(requires),
            outputs=declared,
            params=_params_from_signature(fn, params or {}),
            description=doc.strip().split("\n\n")[0].replace("\n", " "),
            pack=pack,
            pool=pool or ("judge" if "judge" in requires else "cpu"),
            wants_context=_wants_context(fn),
            is_async=inspect.iscoroutinefunction(fn),
            mapper=mapper,
            check=check,
            cheap=cheap,
            batch=batch,
            stack=stack,
            map_batch=map_batch,
        )

    return decorate

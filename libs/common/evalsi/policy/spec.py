"""``OnlineEvalPolicy`` specs: YAML to the protobuf message, then the checks a policy needs before it is applied.

The document is the protobuf JSON mapping of ``evalsi.v1alpha1.OnlineEvalPolicy`` with human durations
(``window: 5m``), walked with the same helpers as ``EvalRun`` specs (``evalsi.runs.spec``), so an unknown field is a
``BadInputError`` naming its path and line. ``compile_policy`` resolves every cascade stage through the
``Registry``, compiles the selector, ``when`` conditions, alert rules and promotion condition, and parses the
always-rules; it reports every problem at once.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, NoReturn
from urllib.parse import urlparse

from google.protobuf import json_format

from evalsi.documents import (
    API_VERSION,
    SpecProblems,
    Where,
    kind_of,
    parse_document,
    read_text,
    to_message_dict,
)
from evalsi.edge_checks import descriptor_of
from evalsi.errors import BadInputError
from evalsi.evaluators import Registry
from evalsi.judges.config import ENV_VAR_NAME
from evalsi.limits import MAX_EXPRESSION_CHARS, MAX_EXPRESSIONS, MAX_NAME_CHARS
from evalsi.records import struct_dict
from evalsi.runs.spec import fill_project
from evalsi.v1alpha1.policy_pb2 import OnlineEvalPolicy

from .cascade import Cascade, Stage, compile_when
from .selection import AlwaysRule, Selector, parse_always
from .windows import AlertRule, compile_alert

KIND = "OnlineEvalPolicy"
DEFAULT_WINDOW_S = 300.0
_NOTIFY_SCHEMES = ("http", "https")


def load_policy(path: str | Path) -> OnlineEvalPolicy:
    """Read an ``OnlineEvalPolicy`` from a YAML or JSON file; errors name the file, line and field path."""
    return parse_policy_text(read_text(path), source=str(path))


def parse_policy_text(text: str, *, source: str) -> OnlineEvalPolicy:
    document, lines = parse_document(text, source, kind="OnlineEvalPolicy")
    return parse_policy(document, source=source, lines=lines)


def parse_policy(
    document: Mapping[str, Any], *, source: str, lines: Mapping[tuple[str | int, ...], int] | None = None
) -> OnlineEvalPolicy:
    """The policy in a plain mapping; ``metadata.project`` filled from the ``evals.si/project`` label."""
    where = Where(source, lines or {})
    if not isinstance(document, Mapping):
        raise BadInputError(f"{source}: expected a mapping (an {KIND} document), got {kind_of(document)}")
    api_version = document.get("apiVersion", document.get("api_version"))
    kind = document.get("kind")
    if kind != KIND:  # another kind of document: its fields would only be noise
        got = "missing" if kind is None else f"got {kind!r}"
        raise where.error(("kind",), f"must be {KIND} ({got}); this file is not an online policy")
    if api_version != API_VERSION:
        got = "missing" if api_version is None else f"got {api_version!r}"
        where.report(("apiVersion",), f"must be {API_VERSION} ({got})")
    converted = to_message_dict(document, descriptor_of(OnlineEvalPolicy), (), where)
    where.refuse_reported("the policy")
    try:
        policy = json_format.ParseDict(converted, OnlineEvalPolicy())
    except json_format.ParseError as exc:
        raise BadInputError(f"{source}: {exc}") from None
    fill_project(policy.metadata, where)
    return policy


def unset_alert_secrets(policy: OnlineEvalPolicy, environ: Mapping[str, str]) -> list[str]:
    """Problems, each naming the field and the variable, for alerts whose signing secret is unset or empty in
    ``environ``: applying such a policy is refused, since its alerts could only go unsigned (forgeable)."""
    return [
        f"spec.alerts[{index}].secretEnv: the variable {alert.secret_env} is not set (or empty) in the server's "
        f"environment; set it, to the webhook's signing secret, for evalsi-api and evalsi-policy, then apply again"
        for index, alert in enumerate(policy.spec.alerts)
        if alert.secret_env and not environ.get(alert.secret_env)
    ]


@dataclass(frozen=True)
class CompiledPolicy:
    """Everything a policy engine needs, checked and compiled once."""

    name: str
    project: str
    selector: Selector
    rate: float
    always: tuple[AlwaysRule, ...]
    cascade: Cascade
    window_s: float
    alerts: tuple[AlertRule, ...]
    promote_when: Any | None  # a compiled `when` over one trace's scores
    promote_dataset: str


def size_problems(policy: OnlineEvalPolicy) -> list[str]:
    """The name, expressions and lists of a policy over the limits of evalsi.limits, each naming its field."""
    spec = policy.spec
    problems: list[str] = []

    def expression(text: str, where: str) -> None:
        if len(text) > MAX_EXPRESSION_CHARS:
            problems.append(f"{where}: {len(text)} characters exceed the limit of {MAX_EXPRESSION_CHARS}")

    def count(items: Sequence[Any], where: str) -> bool:
        if len(items) > MAX_EXPRESSIONS:
            problems.append(f"{where}: {len(items)} entries exceed the limit of {MAX_EXPRESSIONS}")
            return False
        return True

    if len(policy.metadata.name) > MAX_NAME_CHARS:
        problems.append(f"metadata.name: {len(policy.metadata.name)} characters exceed the limit of {MAX_NAME_CHARS}")
    expression(spec.selector, "spec.selector")
    if count(spec.sampling.always, "spec.sampling.always"):
        for index, text in enumerate(spec.sampling.always):
            expression(text, f"spec.sampling.always[{index}]")
    if count(spec.cascade, "spec.cascade"):
        for index, stage in enumerate(spec.cascade):
            expression(stage.when, f"spec.cascade[{index}].when")
    if count(spec.alerts, "spec.alerts"):
        for index, alert in enumerate(spec.alerts):
            expression(alert.when, f"spec.alerts[{index}].when")
    expression(spec.promote.when, "spec.promote.when")
    return problems


def _refuse(problems: Sequence[str], source: str) -> NoReturn:
    raise SpecProblems(problems, source=source, what="the policy")


def compile_policy(policy: OnlineEvalPolicy, *, registry: Registry, source: str = "") -> CompiledPolicy:
    """Validate and compile; one ``BadInputError`` lists every problem, each naming its field path."""
    spec = policy.spec
    problems = size_problems(policy)
    if problems:  # nothing oversized is parsed: parsing is the cost the limits bound
        _refuse(problems, source)
    if not policy.metadata.name:
        problems.append("metadata.name: required")
    elif "/" in policy.metadata.name:
        problems.append(f"metadata.name: {policy.metadata.name!r} must not contain '/'")

    selector = None
    try:
        selector = Selector(spec.selector)
    except BadInputError as exc:
        problems.append(f"spec.selector: {exc}")

    if not 0.0 <= spec.sampling.rate <= 1.0:
        problems.append(f"spec.sampling.rate: must be between 0 and 1, got {spec.sampling.rate}")
    always: list[AlwaysRule] = []
    for index, text in enumerate(spec.sampling.always):
        try:
            always.append(parse_always(text))
        except BadInputError as exc:
            problems.append(f"spec.sampling.always[{index}]: {exc}")

    stages: list[Stage] = []
    if not spec.cascade:
        problems.append("spec.cascade: at least one stage is required (an evaluator such as builtin/exact-match)")
    seen: dict[str, int] = {}
    scored: list[str] = []  # the metrics of the stages so far, in order
    resolved = 0  # how many stages resolved and bound
    for index, stage in enumerate(spec.cascade):
        where = f"spec.cascade[{index}]"
        if not stage.ref:
            problems.append(f"{where}.ref: required (an evaluator such as builtin/exact-match)")
            continue
        try:
            evaluator = registry.resolve(stage.ref)
            alias = stage.alias or evaluator.short_name
            bound = evaluator.bind(struct_dict(stage, "params"), alias=alias, judge=stage.judge)
        except BadInputError as exc:
            problems.append(f"{where} ({stage.ref}): {exc}")
            continue
        if alias in seen:
            problems.append(
                f"{where}: alias {alias!r} is already used by spec.cascade[{seen[alias]}]; give one an alias"
            )
            continue
        seen[alias] = index
        try:
            # Names are checked only when every stage before this one resolved: else the list is incomplete.
            when = compile_when(stage.when, scored if resolved == index else None) if stage.when else None
        except BadInputError as exc:
            problems.append(f"{where}.when: {exc}")
            continue
        finally:
            scored += [name for _, name in bound.metric_names()]
            resolved += 1
        stages.append(Stage(alias=alias, bound=bound, when=when, when_text=stage.when))
    # What alerts and the promotion may read; unknown when a stage did not resolve (that stage is reported).
    cascade_metrics = scored if resolved == len(spec.cascade) else None

    window_s = DEFAULT_WINDOW_S
    if spec.HasField("window"):
        window_s = spec.window.ToNanoseconds() / 1e9
        if window_s <= 0:
            problems.append("spec.window: must be longer than zero (e.g. 5m)")

    alerts: list[AlertRule] = []
    for index, alert in enumerate(spec.alerts):
        where = f"spec.alerts[{index}]"
        scheme = urlparse(alert.notify).scheme
        if not alert.notify:
            problems.append(f"{where}.notify: required (an http(s) URL the alert is POSTed to)")
        elif scheme not in _NOTIFY_SCHEMES or not urlparse(alert.notify).netloc:
            problems.append(
                f"{where}.notify: {alert.notify!r}: only http(s) webhooks are built; slack:// and other "
                "channels are not built yet in this version"
            )
        if alert.min_samples < 0:
            problems.append(f"{where}.minSamples: must be >= 0, got {alert.min_samples}")
        if not alert.secret_env:
            problems.append(
                f"{where}.secretEnv: required: the environment variable holding the webhook signing secret "
                "(alerts are never sent unsigned), e.g. secretEnv: EVALSI_WEBHOOK_SECRET"
            )
        elif not ENV_VAR_NAME.fullmatch(alert.secret_env):
            problems.append(
                f"{where}.secretEnv: {alert.secret_env!r} is not an environment variable name (letters, digits "
                "and '_', not starting with a digit)"
            )
        try:
            alerts.append(
                compile_alert(
                    alert.when,
                    index=index,
                    notify=alert.notify,
                    min_samples=max(1, alert.min_samples),
                    secret_env=alert.secret_env,
                    metrics=cascade_metrics,
                )
            )
        except BadInputError as exc:
            problems.append(f"{where}.when: {exc}")

    promote_when = None
    if spec.HasField("promote"):
        if not spec.promote.dataset.startswith("datasets/") or "@" in spec.promote.dataset:
            problems.append(
                f"spec.promote.dataset: must look like datasets/name (a new version is created on each promotion), "
                f"got {spec.promote.dataset!r}"
            )
        if not spec.promote.when:
            problems.append("spec.promote.when: required (CEL over a trace's scores, e.g. score('llm-judge') < 0.5)")
        else:
            try:
                promote_when = compile_when(spec.promote.when, cascade_metrics, scope="the cascade")
            except BadInputError as exc:
                problems.append(f"spec.promote.when: {exc}")

    if problems:
        _refuse(problems, source)
    assert selector is not None
    return CompiledPolicy(
        name=policy.metadata.name,
        project=policy.metadata.project,
        selector=selector,
        rate=spec.sampling.rate,
        always=tuple(always),
        cascade=Cascade(tuple(stages)),
        window_s=window_s,
        alerts=tuple(alerts),
        promote_when=promote_when,
        promote_dataset=spec.promote.dataset,
    )

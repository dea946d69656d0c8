"""``EvalRun`` specs: YAML (or JSON) to the protobuf message, and the checks a run needs before it starts.

A spec is the protobuf JSON mapping of ``evalsi.v1alpha1.EvalRun`` (DESIGN.md), with two conveniences
applied first: human durations (``10m``, ``1h30m``, ``250ms``, a bare number of seconds) in Duration fields,
and either spelling of a field (``wallClock`` or ``wall_clock``). The document is walked against the message
descriptors before protobuf parses it, so an unknown or mistyped field is a ``BadInputError`` naming its
path, the file and (from YAML) the line: ``run.yaml:12: spec.evaluators[1].parms: unknown field; did you
mean params?``.

``validate_eval_run`` is what both the embedded runner and the API call before accepting a run: every
evaluator resolves and binds, judges and the model target are valid, gates compile, the dataset path stays
inside the allowed directory. It reports every problem it finds at once, one per line.
"""

from __future__ import annotations

import hashlib
import math
import os
import re
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from google.protobuf import json_format

from evalsi.documents import (
    API_VERSION,
    FieldPath,
    Lines,
    SpecProblems,
    Where,
    kind_of,
    parse_document,
    read_text,
    to_message_dict,
)
from evalsi.edge_checks import descriptor_of
from evalsi.errors import BadInputError
from evalsi.evaluators import BoundEvaluator, Registry
from evalsi.judges import JudgeConfig
from evalsi.limits import (
    MAX_BOOTSTRAP_RESAMPLES,
    MAX_CONCURRENCY,
    MAX_EXPRESSIONS,
    MAX_LABEL_KEY_CHARS,
    MAX_LABEL_VALUE_CHARS,
    MAX_LABELS,
    MAX_NAME_CHARS,
    MAX_TRIALS,
)
from evalsi.projects import DEFAULT_PROJECT, PROJECT_LABEL, PROJECT_RULE, is_project
from evalsi.records import canonical_json, struct_dict
from evalsi.runs.binding import resolve_evaluators
from evalsi.runs.gates import gate_problems
from evalsi.sandbox.access import sandbox_problems
from evalsi.stats.defaults import DEFAULT_BOOTSTRAP_RESAMPLES
from evalsi.targets.config import target_config, template_placeholders
from evalsi.targets.identity import agent_problems, harness_problems
from evalsi.v1alpha1.evaluator_pb2 import EvaluatorRef, JudgeSpec
from evalsi.v1alpha1.run_pb2 import EvalRun, ObjectMeta

KIND = "EvalRun"



_ALIAS = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.\-]*$")

# --- reading files -------------------------------------------------------------------------------------


def load_eval_run(path: str | Path) -> EvalRun:
    """Read an ``EvalRun`` from a YAML or JSON file; errors name the file, the line and the field path."""
    return parse_eval_run_text(read_text(path), source=str(path))


def load_document(path: str | Path) -> tuple[dict[str, Any], dict[FieldPath, int]]:
    """The spec file as a plain mapping plus the line of every key (for ``--set`` before parsing)."""
    return parse_document(read_text(path), str(path))


def parse_eval_run_text(text: str, *, source: str) -> EvalRun:
    document, lines = parse_document(text, source)
    return parse_eval_run(document, source=source, lines=lines)


# --- parsing -------------------------------------------------------------------------------------------


def parse_eval_run(
    document: Mapping[str, Any],
    *,
    source: str,
    lines: Lines | None = None,
    also_check: Callable[[EvalRun], list[str]] | None = None,
) -> EvalRun:
    """The ``EvalRun`` in a plain mapping (a parsed YAML or JSON document).

    ``source`` names the document in errors (a file path); ``lines`` maps field paths to YAML lines.
    ``metadata.project`` is filled in from the ``evals.si/project`` label, or ``default``. Every problem of the
    document's structure is reported at once; with ``also_check`` (``eval_run_problems`` bound to a registry and
    the spec's folder) the problems of the rest of the spec join them, so one pass shows everything.
    """
    where = Where(source, lines or {})
    if not isinstance(document, Mapping):
        raise BadInputError(f"{source}: expected a mapping (an EvalRun document), got {kind_of(document)}")
    api_version = document.get("apiVersion", document.get("api_version"))
    kind = document.get("kind")
    if kind != KIND:  # another kind of document: its fields would only be noise
        got = "missing" if kind is None else f"got {kind!r}"
        raise where.error(("kind",), f"must be {KIND} ({got}); this file is not a run spec")
    if api_version != API_VERSION:
        key = "apiVersion" if "apiVersion" in document or "api_version" not in document else "api_version"
        got = "missing" if api_version is None else f"got {api_version!r}"
        where.report((key,), f"must be {API_VERSION} ({got})")
    converted = to_message_dict(document, descriptor_of(EvalRun), (), where)
    if where.problems and also_check is not None:
        _check_the_rest(converted, where, also_check)
    where.refuse_reported("the run spec")
    try:
        run = json_format.ParseDict(converted, EvalRun())
    except json_format.ParseError as exc:  # what the walk above does not catch (e.g. an int out of range)
        raise BadInputError(f"{source}: {exc}") from None
    fill_project(run.metadata, where)
    return run


def _check_the_rest(converted: Mapping[str, Any], where: Where, check: Callable[[EvalRun], list[str]]) -> None:
    """Add to ``where`` the problems ``check`` finds in what of the document is well formed, leaving out those
    about a field already reported (a misspelt field's consequences would only repeat it)."""
    try:
        run = json_format.ParseDict(dict(converted), EvalRun())
    except json_format.ParseError:
        return  # reported once the structure is fixed
    where.problems += [where.locate(p) for p in check(run) if not where.covers(p)]


def fill_project(metadata: ObjectMeta, where: Where) -> None:
    """``metadata.project`` from itself, else the ``evals.si/project`` label, else ``default``; checked by the
    one project rule (evalsi.projects), so a document names only projects the API and ingest accept."""
    labelled = metadata.labels.get(PROJECT_LABEL, "")
    if metadata.project and labelled and metadata.project != labelled:
        raise where.error(
            ("metadata", "project"),
            f"{metadata.project!r} differs from the label {PROJECT_LABEL}={labelled!r}; keep one of them",
        )
    path: tuple[str, ...] = ("metadata", "project") if metadata.project else ("metadata", "labels", PROJECT_LABEL)
    project = metadata.project or labelled or DEFAULT_PROJECT
    if not is_project(project):
        raise where.error(path, f"{project!r} is not a valid project name ({PROJECT_RULE})")
    metadata.project = project


# --- validation ----------------------------------------------------------------------------------------


def spec_hash(run: EvalRun) -> str:
    """sha256 (hex) of the spec's canonical JSON: the same spec gives the same hash on every machine."""
    return hashlib.sha256(canonical_json(json_format.MessageToDict(run.spec)).encode()).hexdigest()


def trials_of(run: EvalRun) -> int:
    """The number of trials per sample (0 in a spec means 1)."""
    return max(1, run.spec.trials)


def target_kind(run: EvalRun) -> str:
    """``outputs`` (given, or no target at all), ``model`` or ``agent``."""
    return run.spec.target.WhichOneof("kind") or "outputs"


def bind_evaluators(run: EvalRun, registry: Registry) -> list[BoundEvaluator]:
    """The spec's evaluators, resolved and bound; errors name ``spec.evaluators[i]``."""
    bound, problems = _bind(run, registry)
    if problems:
        raise BadInputError("\n".join(problems))
    return [b for _, b in bound]


def _bind(run: EvalRun, registry: Registry) -> tuple[list[tuple[int, BoundEvaluator]], list[str]]:
    """(index in spec.evaluators, bound evaluator) for each evaluator that binds, and the problems."""
    bound: list[tuple[int, BoundEvaluator]] = []
    problems: list[str] = []
    if not run.spec.evaluators:
        problems.append("spec.evaluators: at least one evaluator is required; `evalsi catalog list` shows them")
    seen: dict[str, int] = {}
    for index, ref in enumerate(run.spec.evaluators):
        where = f"spec.evaluators[{index}]"
        if not ref.ref:
            problems.append(f"{where}.ref: required (an evaluator such as builtin/exact-match)")
            continue
        try:
            evaluator = registry.resolve(ref.ref)
            alias = ref.alias or evaluator.short_name
            # Params go in by alias so whole numbers stay ints (a Struct holds every number as a double).
            bare = EvaluatorRef(ref=ref.ref, alias=alias, judge=ref.judge)
            (item,) = resolve_evaluators([bare], registry, {alias: struct_dict(ref, "params")})
        except BadInputError as exc:
            problems.append(f"{where} ({ref.ref}): {exc}")
            continue
        if not _ALIAS.match(item.alias) or "@" in item.alias:
            problems.append(
                f"{where}.alias: {item.alias!r} must start with a letter or digit and hold only letters, digits, "
                "'-', '_' and '.'"
            )
            continue
        if item.alias in seen:
            problems.append(
                f"{where}: alias {item.alias!r} is already used by spec.evaluators[{seen[item.alias]}]; "
                "give one of them an alias"
            )
            continue
        seen[item.alias] = index
        bound.append((index, item))
    return bound, problems


def judge_mapping(spec: JudgeSpec) -> dict[str, Any]:
    """A ``JudgeSpec`` as the mapping ``JudgeConfig.from_mapping`` reads (unset fields left out)."""
    mapping: dict[str, Any] = {"model": spec.model} if spec.model else {}
    if spec.connector:
        mapping["provider"] = spec.connector
    for name in ("base_url", "api_key_env", "template"):
        if getattr(spec, name):
            mapping[name] = getattr(spec, name)
    params = struct_dict(spec, "params")
    if params:
        mapping["params"] = params
    if spec.timeout_s:
        mapping["timeout_s"] = spec.timeout_s
    for name in ("max_retries", "rpm", "tpm"):
        if getattr(spec, name):
            mapping[name] = getattr(spec, name)
    return mapping


def judge_configs_of(run: EvalRun) -> dict[str, JudgeConfig]:
    """The spec's named judges as configs, for an embedded run; errors name ``spec.judges.<name>``."""
    # A server's connection name means nothing here: refusing it keeps a served spec run locally from calling
    # the provider's public API under the default key.
    named = [f"spec.judges.{name}.connection" for name in sorted(run.spec.judges) if run.spec.judges[name].connection]
    if named:
        raise BadInputError(f"{', '.join(named)}: names a judge connection a server configures; an embedded run "
                            "gives connector, model, baseUrl and apiKeyEnv (or run it with --server)")
    configs, problems = _judges(run)
    if problems:
        raise BadInputError("\n".join(problems))
    return configs


def _judges(run: EvalRun) -> tuple[dict[str, JudgeConfig], list[str]]:
    configs: dict[str, JudgeConfig] = {}
    problems: list[str] = []
    for name in sorted(run.spec.judges):
        spec = run.spec.judges[name]
        try:
            configs[name] = JudgeConfig.from_mapping({"name": name, **judge_mapping(spec)}, where=f"spec.judges.{name}")
        except BadInputError as exc:
            problems.append(str(exc))
    return configs, problems


def _check_prompt_template(template: str) -> str | None:
    for name in template_placeholders(template):
        if name in ("input", "reference", "id") or (name.startswith("metadata.") and len(name) > 9):
            continue
        return (
            f"spec.target.model.promptTemplate: unknown placeholder {{{{{name}}}}}; accepted: {{{{input}}}}, "
            "{{reference}}, {{id}}, {{metadata.<key>}}"
        )
    return None


def resolve_dataset_path(run: EvalRun, *, base_dir: Path | None = None, datasets_dir: Path | None = None) -> Path:
    """Where ``spec.dataset.path`` points: relative to ``base_dir`` (the spec file's folder), else to
    ``datasets_dir``, else the working directory. With ``datasets_dir`` the real path (symlinks and ``..``
    resolved) must lie inside it."""
    given = run.spec.dataset.path
    if not given:
        raise BadInputError("spec.dataset.path: required (a dataset file)")
    if "\0" in given:
        raise BadInputError("spec.dataset.path: contains a NUL character, which no file name holds")
    path = Path(given).expanduser()
    if not path.is_absolute():
        root = base_dir if base_dir is not None else datasets_dir if datasets_dir is not None else Path.cwd()
        path = root / path
    if datasets_dir is not None:
        allowed = Path(os.path.realpath(datasets_dir))
        real = Path(os.path.realpath(path))
        if real != allowed and allowed not in real.parents:
            # Where it leads (a link's target) and where the directory is are the server's business: neither is said.
            raise BadInputError(
                f"spec.dataset.path: {given!r} leads outside the allowed datasets directory (through '..', an "
                "absolute path or a symbolic link); give the path of a file under that directory, relative to it"
            )
        return real  # what was checked is what gets opened, whatever the links point to later
    # The folder resolved (so "runs/../data/x.jsonl" reads "data/x.jsonl"), the file name kept as written.
    return Path(os.path.realpath(path.parent)) / path.name


def validate_eval_run(
    run: EvalRun,
    *,
    registry: Registry,
    datasets_dir: Path | None = None,
    base_dir: Path | None = None,
    source: str = "",
) -> None:
    """Check everything a run needs before anything runs; one ``BadInputError`` lists every problem.

    ``base_dir`` is the spec file's folder (relative dataset paths resolve against it); ``datasets_dir``,
    when given, confines dataset paths to that directory (the server's datasets directory).
    ``source`` (a file name) prefixes the message.
    """
    problems = _problems(run, registry=registry, datasets_dir=datasets_dir, base_dir=base_dir)
    if problems:
        raise SpecProblems(problems, source=source, what="the run spec")


def eval_run_problems(
    run: EvalRun, *, registry: Registry, datasets_dir: Path | None = None, base_dir: Path | None = None
) -> list[str]:
    """Every problem ``validate_eval_run`` would report, as a list, each starting with its field path."""
    return _problems(run, registry=registry, datasets_dir=datasets_dir, base_dir=base_dir)


def _problems(run: EvalRun, *, registry: Registry, datasets_dir: Path | None, base_dir: Path | None) -> list[str]:
    spec = run.spec
    problems: list[str] = []
    if run.api_version != API_VERSION:
        problems.append(f"apiVersion: must be {API_VERSION}, got {run.api_version!r}")
    if run.kind != KIND:
        problems.append(f"kind: must be {KIND}, got {run.kind!r}")
    if len(run.metadata.name) > MAX_NAME_CHARS:
        problems.append(f"metadata.name: {len(run.metadata.name)} characters exceed the limit of {MAX_NAME_CHARS}")
    elif "/" in run.metadata.name:
        problems.append(f"metadata.name: {run.metadata.name!r} must not contain '/'")
    problems += _label_problems(run)
    bound, bind_problems = _bind(run, registry)
    problems += bind_problems
    _, judge_problems = _judges(run)
    problems += judge_problems
    judge_names = set(spec.judges)
    for index, b in bound:
        where = f"spec.evaluators[{index}]"
        if "judge" in b.evaluator.requires and b.judge not in judge_names:
            defined = ", ".join(sorted(judge_names)) if judge_names else "none"
            problems.append(
                f"{where} ({b.alias}): needs a judge and uses {b.judge!r}, which spec.judges does not define "
                f"(defined: {defined}); define spec.judges.{b.judge}: a model (model, baseUrl), or on a server "
                "connection: naming an entry of its evalsi.yaml `judges:`"
            )
        if b.evaluator.scope == "comparative":
            problems.append(
                f"{where} ({b.alias}): a comparative evaluator needs two result sets; compare runs with "
                "`evalsi compare` instead"
            )
    if spec.trials < 0:
        problems.append(f"spec.trials: must be >= 1 (0 means 1), got {spec.trials}")
    elif spec.trials > MAX_TRIALS:
        problems.append(f"spec.trials: {spec.trials} exceeds the limit of {MAX_TRIALS}")
    if spec.concurrency < 0:
        problems.append(f"spec.concurrency: must be >= 1 (0 means the default, 16), got {spec.concurrency}")
    elif spec.concurrency > MAX_CONCURRENCY:
        problems.append(f"spec.concurrency: {spec.concurrency} exceeds the limit of {MAX_CONCURRENCY}")
    problems += _target_problems(run)
    problems += _dataset_problems(run, datasets_dir=datasets_dir, base_dir=base_dir)
    problems += _summary_problems(run)
    problems += _budget_problems(run)
    if spec.HasField("sandbox"):
        problems += sandbox_problems(spec.sandbox)
    if spec.sinks:
        problems.append("spec.sinks: sinks are not built yet in this version; remove them")
    expected = None if bind_problems else expected_metrics([b for _, b in bound])
    if len(spec.gates) > MAX_EXPRESSIONS:
        problems.append(f"spec.gates: {len(spec.gates)} gates exceed the limit of {MAX_EXPRESSIONS}")
        return problems  # each would be parsed; that is the cost the limit bounds
    for index, expression in enumerate(spec.gates):
        problems += [
            f"spec.gates[{index}]: {p}" for p in gate_problems(expression, expected, trials=_known_trials(run))
        ]
    return problems


def _known_trials(run: EvalRun) -> int | None:
    """Trials per sample when the spec decides them (a generating target); None when the data does."""
    return trials_of(run) if target_kind(run) != "outputs" else None


def expected_metrics(bound: Sequence[BoundEvaluator]) -> dict[str, bool]:
    """Metric names the evaluators can produce, each with whether it gets pass@k / pass^k with trials."""
    out: dict[str, bool] = {}
    for b in bound:
        for output, metric in b.metric_names():
            out[metric] = output.type == "boolean" and b.evaluator.scope == "record"
    return out


def _target_problems(run: EvalRun) -> list[str]:

    kind = target_kind(run)
    spec = run.spec
    problems = harness_problems(spec) if spec.HasField("harness") else []
    if kind == "agent":
        return problems + agent_problems(spec.target.agent)
    if kind == "outputs" and spec.trials > 1:
        problems.append(
            f"spec.trials: {spec.trials} trials need a target that generates outputs (target.model or "
            "target.agent); with outputs given, trials come from the dataset (rows sharing an id)"
        )
    if kind == "model":
        model = spec.target.model
        try:
            target_config(model)
        except BadInputError as exc:
            problems.append(str(exc))
        problem = _check_prompt_template(model.prompt_template)
        if problem:
            problems.append(problem)
    return problems


def _dataset_problems(run: EvalRun, *, datasets_dir: Path | None, base_dir: Path | None) -> list[str]:
    dataset = run.spec.dataset
    kind = dataset.WhichOneof("kind")
    if kind is None:
        return ["spec.dataset: required: one of path (a file), ref (a stored dataset) or hf (hf://owner/name)"]
    if dataset.limit < 0:
        return [f"spec.dataset.limit: must be >= 1, got {dataset.limit}"]
    if kind == "hf" and not dataset.hf.startswith("hf://"):
        return [f"spec.dataset.hf: must look like hf://owner/name, got {dataset.hf!r}"]
    if kind == "ref" and not re.match(r"^datasets/[^@\s]+(@[^@\s]+)?$", dataset.ref):
        return [f"spec.dataset.ref: must look like datasets/name@version, got {dataset.ref!r}"]
    if kind != "path":
        return []
    try:
        path = resolve_dataset_path(run, base_dir=base_dir, datasets_dir=datasets_dir)
    except BadInputError as exc:
        return [str(exc)]
    if not path.is_file():
        # Which absolute path was tried only where the caller owns the machine (no datasets directory: the CLI).
        where = " in the datasets directory" if datasets_dir is not None else f" ({path})"
        return [f"spec.dataset.path: {dataset.path!r}: no such file{where}"]
    return []


def _summary_problems(run: EvalRun) -> list[str]:
    summary = run.spec.summary
    problems = []
    if summary.confidence and not 0 < summary.confidence < 1:
        problems.append(f"spec.summary.confidence: must be between 0 and 1 (e.g. 0.95), got {summary.confidence}")
    if summary.interval not in ("", "auto", "bootstrap"):
        problems.append(f"spec.summary.interval: must be auto or bootstrap, got {summary.interval!r}")
    if summary.bootstrap_resamples < 0:
        problems.append(
            f"spec.summary.bootstrapResamples: must be >= 0 (0 means the default, {DEFAULT_BOOTSTRAP_RESAMPLES}), "
            f"got {summary.bootstrap_resamples}"
        )
    elif summary.bootstrap_resamples > MAX_BOOTSTRAP_RESAMPLES:
        problems.append(
            f"spec.summary.bootstrapResamples: {summary.bootstrap_resamples} exceeds the limit of "
            f"{MAX_BOOTSTRAP_RESAMPLES} (refused, never lowered: 0 means the default, {DEFAULT_BOOTSTRAP_RESAMPLES})"
        )
    problems += [f"spec.summary.passK: k must be >= 1, got {k}" for k in summary.pass_k if k < 1]
    return problems


def _label_problems(run: EvalRun) -> list[str]:
    labels = run.metadata.labels
    if len(labels) > MAX_LABELS:
        return [f"metadata.labels: {len(labels)} labels exceed the limit of {MAX_LABELS}"]
    problems = []
    for key, value in labels.items():
        if len(key) > MAX_LABEL_KEY_CHARS:
            problems.append(
                f"metadata.labels: a key of {len(key)} characters ({key[:40]!r}...) exceeds the limit of "
                f"{MAX_LABEL_KEY_CHARS}"
            )
        elif len(value) > MAX_LABEL_VALUE_CHARS:
            problems.append(
                f"metadata.labels.{key}: {len(value)} characters exceed the limit of {MAX_LABEL_VALUE_CHARS}"
            )
    return problems


def _budget_problems(run: EvalRun) -> list[str]:
    budget = run.spec.budget
    problems = []
    if not 0 <= budget.usd < math.inf:  # NaN fails every comparison
        problems.append(f"spec.budget.usd: must be a finite number >= 0, got {budget.usd}")
    if budget.tokens < 0:
        problems.append(f"spec.budget.tokens: must be >= 0, got {budget.tokens}")
    if budget.wall_clock.seconds < 0 or budget.wall_clock.nanos < 0:
        problems.append("spec.budget.wallClock: must not be negative")
    return problems

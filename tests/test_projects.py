"""One project-name rule: every surface (API, ingest, CLI, run specs, policies, bus subjects) accepts the same names."""

from __future__ import annotations

import pytest
from click.testing import CliRunner
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest

import evalsi
from evalsi.api.context import build_context
from evalsi.bus import subjects
from evalsi.cli.main import cli
from evalsi.errors import BadInputError
from evalsi.ingest.handler import ExportHandler
from evalsi.policy.spec import parse_policy_text
from evalsi.projects import DEFAULT_PROJECT, PROJECT_RULE, check_project, is_project
from evalsi.runs.spec import parse_eval_run_text
from evalsi.traces import MappedSpan

GOOD = ["default", "acme", "Acme-Prod_2", "a", "x" * 63]
# Dots, spaces and NATS wildcards would split or merge subject tokens; the rest are plain violations.
BAD = ["acme.prod", "a b", "*", ">", "a*", "team>", "", "-lead", "_lead", "x" * 64, "ümlaut", "a/b", "a=b"]

RUN = """\
apiVersion: evals.si/v1alpha1
kind: EvalRun
metadata:
  name: demo
spec:
  dataset: {path: data.jsonl}
  evaluators:
    - ref: builtin/exact-match
"""

POLICY = """\
apiVersion: evals.si/v1alpha1
kind: OnlineEvalPolicy
metadata:
  name: p
spec:
  selector: 'span.type == "agent"'
  sampling: {rate: 1.0}
  cascade:
    - {ref: builtin/exact-match}
"""


@pytest.mark.parametrize("name", GOOD)
def test_good_names(name: str) -> None:
    assert is_project(name) and check_project(name, "here") == name
    assert subjects.traces_completed(name) == f"traces.completed.{name}"
    assert build_context("M", {"x-evalsi-project": name}, None, transport="http").project == name


@pytest.mark.parametrize("name", BAD)
def test_bad_names_are_refused_naming_where_and_the_rule(name: str) -> None:
    assert not is_project(name)
    with pytest.raises(BadInputError) as info:
        check_project(name, "the x-evalsi-project header")
    assert str(info.value) == f"the x-evalsi-project header: {name!r} is not a valid project name ({PROJECT_RULE})"
    if name:  # an empty header means "no header": the default project
        with pytest.raises(BadInputError, match=r"x-evalsi-project header: .* is not a valid project name"):
            build_context("M", {"x-evalsi-project": name}, None, transport="http")


@pytest.mark.parametrize("name", ["acme.prod", "a b", "*", ">", "team.*", "a.>"])
def test_no_project_can_add_or_merge_subject_tokens(name: str) -> None:
    with pytest.raises(BadInputError, match="not a valid project name"):
        subjects.traces_completed(name)


@pytest.mark.parametrize("name", ["r.1", "r 1", "*", ">", "r.*", ""])
def test_every_id_token_is_one_token(name: str) -> None:
    for build in (subjects.results, subjects.run_events, subjects.run_control, subjects.deadletter):
        with pytest.raises(ValueError, match="subject token"):
            build(name)
    with pytest.raises(ValueError, match="unknown worker pool"):
        subjects.work(name)


def test_partitions_are_not_negative() -> None:
    assert subjects.assembler_consumer(3) == "assembler-3" and subjects.traces_observed(3) == "traces.observed.3"
    for build in (subjects.assembler_consumer, subjects.traces_observed):
        with pytest.raises(ValueError, match="must be 0 or more"):
            build(-1)


class _Sink:
    def __init__(self) -> None:
        self.projects: list[str] = []

    async def consume(self, project: str, spans: list[MappedSpan]) -> None:
        self.projects.append(project)


def _request(project_attribute: str) -> ExportTraceServiceRequest:
    request = ExportTraceServiceRequest()
    resource_spans = request.resource_spans.add()
    attribute = resource_spans.resource.attributes.add(key="evalsi.project")
    attribute.value.string_value = project_attribute
    span = resource_spans.scope_spans.add().spans.add(name="s", trace_id=b"\x01" * 16, span_id=b"\x02" * 8)
    span.start_time_unix_nano, span.end_time_unix_nano = 1, 2
    return request


async def test_ingest_uses_the_api_rule() -> None:
    """``acme.prod`` used to be ingested (and never readable through the API); now it is counted as rejected."""
    sink = _Sink()
    handler = ExportHandler(sink)
    answer = await handler.export(_request("acme.prod"))
    assert sink.projects == [] and answer.partial_success.rejected_spans == 1
    assert PROJECT_RULE in answer.partial_success.error_message
    with pytest.raises(BadInputError, match=r"x-evalsi-project header: 'acme\.prod' is not a valid project name"):
        await handler.export(_request("acme"), "acme.prod")
    await handler.export(_request("acme-prod"))
    assert sink.projects == ["acme-prod"]
    with pytest.raises(BadInputError, match="not a valid project name"):
        ExportHandler(sink, default_project="acme.prod")


def test_run_specs_and_policies_name_only_valid_projects() -> None:
    assert parse_eval_run_text(RUN, source="r.yaml").metadata.project == DEFAULT_PROJECT
    assert parse_policy_text(POLICY, source="p.yaml").metadata.project == DEFAULT_PROJECT
    named = RUN.replace("  name: demo\n", "  name: demo\n  project: acme.prod\n")
    with pytest.raises(BadInputError, match=r"r\.yaml:5: metadata\.project: 'acme\.prod' is not a valid project"):
        parse_eval_run_text(named, source="r.yaml")
    labelled = POLICY.replace("  name: p\n", "  name: p\n  labels: {evals.si/project: a b}\n")
    with pytest.raises(BadInputError, match=r"metadata\.labels.*evals\.si/project.*'a b' is not a valid project"):
        parse_policy_text(labelled, source="p.yaml")


def test_embedded_evaluate_names_only_valid_projects() -> None:
    rows = [{"output": "a", "reference": "a"}]
    assert evalsi.evaluate(rows, ["exact-match"], project="acme-prod").run.project == "acme-prod"
    with pytest.raises(BadInputError, match=r"^project: 'acme\.prod' is not a valid project name"):
        evalsi.evaluate(rows, ["exact-match"], project="acme.prod")


@pytest.mark.parametrize("verb", [["runs", "list"], ["traces", "list"], ["compare", "a.json", "b.json"]])
def test_the_cli_refuses_a_bad_project_before_connecting(verb: list[str]) -> None:
    result = CliRunner().invoke(cli, [*verb, "--server", "http://127.0.0.1:9", "--project", "acme.prod"])
    assert result.exit_code == 2, result.output
    assert "'acme.prod' is not a valid project name" in result.output and "--project" in result.output
    from_env = CliRunner().invoke(cli, [*verb, "--server", "http://127.0.0.1:9"], env={"EVALSI_PROJECT": "a b"})
    assert from_env.exit_code == 2 and "'a b' is not a valid project name" in from_env.output

"""HTTP routes and request mapping derived from the descriptors' google.api.http options."""

from __future__ import annotations

import pytest

from evalsi.api import PUBLIC_SERVICES, Router, routes_for
from evalsi.api.transcoding import MethodNotAllowed, PathTemplate, RouteNotFound, build_request, to_json
from evalsi.errors import BadInputError
from evalsi.v1alpha1.run_pb2 import RUN_STATE_CANCELLED, RUN_STATE_RUNNING
from evalsi.v1alpha1.run_service_pb2 import RunEvent

ROUTES = routes_for(method for service in PUBLIC_SERVICES for method in service.methods)
ROUTER = Router(ROUTES)


def test_every_route_of_the_public_services_comes_from_the_descriptors() -> None:
    table = sorted((r.http_method, r.path, r.body, r.rpc) for r in ROUTES)
    assert table == sorted(
        [
            ("POST", "/v1alpha1/evaluate", "*", "evalsi.v1alpha1.EvaluationService/Evaluate"),
            ("POST", "/v1alpha1/runs", "*", "evalsi.v1alpha1.RunService/CreateRun"),
            ("GET", "/v1alpha1/runs/{id}", "", "evalsi.v1alpha1.RunService/GetRun"),
            ("GET", "/v1alpha1/runs", "", "evalsi.v1alpha1.RunService/ListRuns"),
            ("GET", "/v1alpha1/runs/{id}:watch", "", "evalsi.v1alpha1.RunService/WatchRun"),
            ("POST", "/v1alpha1/runs/{id}:cancel", "*", "evalsi.v1alpha1.RunService/CancelRun"),
            ("POST", "/v1alpha1/runs/{id}:resume", "*", "evalsi.v1alpha1.RunService/ResumeRun"),
            ("GET", "/v1alpha1/runs/{id}/results", "", "evalsi.v1alpha1.RunService/ListRunResults"),
            ("GET", "/v1alpha1/runs/{id}/records", "", "evalsi.v1alpha1.RunService/ListRunRecords"),
            ("POST", "/v1alpha1/runs:compare", "*", "evalsi.v1alpha1.RunService/CompareRuns"),
            ("GET", "/v1alpha1/datasets/{name}", "", "evalsi.v1alpha1.RunService/ListDatasetVersions"),
            ("GET", "/v1alpha1/evaluators", "", "evalsi.v1alpha1.CatalogService/ListEvaluators"),
            ("PUT", "/v1alpha1/packs/enabled", "*", "evalsi.v1alpha1.CatalogService/SetProjectPacks"),
            ("PUT", "/v1alpha1/packs/allowed", "*", "evalsi.v1alpha1.CatalogService/SetPackAllowlist"),
            ("GET", "/v1alpha1/traces", "", "evalsi.v1alpha1.TraceService/ListTraces"),
            ("GET", "/v1alpha1/traces/{trace_id}", "", "evalsi.v1alpha1.TraceService/GetTrace"),
            ("POST", "/v1alpha1/feedback", "*", "evalsi.v1alpha1.TraceService/AddFeedback"),
            ("POST", "/v1alpha1/policies", "policy", "evalsi.v1alpha1.MonitorService/ApplyPolicy"),
            ("GET", "/v1alpha1/policies", "", "evalsi.v1alpha1.MonitorService/ListPolicies"),
            ("GET", "/v1alpha1/policies/{name}", "", "evalsi.v1alpha1.MonitorService/GetPolicy"),
            ("DELETE", "/v1alpha1/policies/{name}", "", "evalsi.v1alpha1.MonitorService/DeletePolicy"),
            ("GET", "/v1alpha1/policies/{name}/stats", "", "evalsi.v1alpha1.MonitorService/GetPolicyStats"),
            ("GET", "/v1alpha1/policies/{name}/alerts", "", "evalsi.v1alpha1.MonitorService/ListPolicyAlerts"),
            ("GET", "/v1alpha1/auth/whoami", "", "evalsi.v1alpha1.AuthService/WhoAmI"),
            ("GET", "/v1alpha1/auth/projects", "", "evalsi.v1alpha1.AuthService/ListProjects"),
            ("POST", "/v1alpha1/auth/projects", "*", "evalsi.v1alpha1.AuthService/CreateProject"),
            ("GET", "/v1alpha1/auth/permissions", "", "evalsi.v1alpha1.AuthService/ListPermissions"),
            ("GET", "/v1alpha1/auth/roles", "", "evalsi.v1alpha1.AuthService/ListRoles"),
            ("POST", "/v1alpha1/auth/roles", "role", "evalsi.v1alpha1.AuthService/CreateRole"),
            ("PUT", "/v1alpha1/auth/roles/{role.name}", "role", "evalsi.v1alpha1.AuthService/UpdateRole"),
            ("DELETE", "/v1alpha1/auth/roles/{name}", "", "evalsi.v1alpha1.AuthService/DeleteRole"),
            ("GET", "/v1alpha1/auth/bindings", "", "evalsi.v1alpha1.AuthService/ListBindings"),
            ("POST", "/v1alpha1/auth/bindings", "binding", "evalsi.v1alpha1.AuthService/CreateBinding"),
            ("DELETE", "/v1alpha1/auth/bindings/{id}", "", "evalsi.v1alpha1.AuthService/DeleteBinding"),
            ("POST", "/v1alpha1/auth/keys", "*", "evalsi.v1alpha1.AuthService/CreateApiKey"),
            ("GET", "/v1alpha1/auth/keys", "", "evalsi.v1alpha1.AuthService/ListApiKeys"),
            ("POST", "/v1alpha1/auth/keys/{name}:revoke", "*", "evalsi.v1alpha1.AuthService/RevokeApiKey"),
            ("GET", "/v1alpha1/auth/audit", "", "evalsi.v1alpha1.AuthService/ListAuditEvents"),
            ("GET", "/v1alpha1/cases", "", "evalsi.v1alpha1.CaseService/ListCases"),
            ("GET", "/v1alpha1/cases/{case_id}", "", "evalsi.v1alpha1.CaseService/GetCase"),
            ("POST", "/v1alpha1/case-reports", "*", "evalsi.v1alpha1.CaseService/UploadCaseReport"),
            ("GET", "/v1alpha1/case-reports", "", "evalsi.v1alpha1.CaseService/ListCaseReports"),
            ("GET", "/v1alpha1/case-reports/{report_id}", "", "evalsi.v1alpha1.CaseService/GetCaseReport"),
        ]
    )


def test_only_the_client_streams_have_no_descriptor_route() -> None:
    rpcs = {r.rpc for r in ROUTES}
    every = {f"{s.full_name}/{m.name}" for s in PUBLIC_SERVICES for m in s.methods}
    # UploadDataset's HTTP twin is the raw-body upload route the HTTP server adds (tests/api/test_api_datasets.py).
    assert every - rpcs == {"evalsi.v1alpha1.EvaluationService/EvaluateStream",
                            "evalsi.v1alpha1.RunService/UploadDataset"}


@pytest.mark.parametrize(
    ("method", "path", "rpc", "captures"),
    [
        ("GET", "/v1alpha1/runs/run-1", "GetRun", {"id": "run-1"}),
        ("GET", "/v1alpha1/runs/run-1:watch", "WatchRun", {"id": "run-1"}),
        ("POST", "/v1alpha1/runs/run-1:cancel", "CancelRun", {"id": "run-1"}),
        ("POST", "/v1alpha1/runs/run-1:resume", "ResumeRun", {"id": "run-1"}),
        ("POST", "/v1alpha1/runs/a%3Ab:cancel", "CancelRun", {"id": "a:b"}),
        ("GET", "/v1alpha1/runs/a%2Fb/results", "ListRunResults", {"id": "a/b"}),
        ("POST", "/v1alpha1/runs:compare", "CompareRuns", {}),
        ("GET", "/v1alpha1/runs", "ListRuns", {}),
        ("POST", "/v1alpha1/runs", "CreateRun", {}),
    ],
)
def test_paths_captures_and_verb_suffixes(method: str, path: str, rpc: str, captures: dict) -> None:
    route, found = ROUTER.match(method, path)
    assert route.rpc.endswith("/" + rpc)
    assert found == captures


def test_unknown_paths_and_wrong_methods() -> None:
    for path in ("/v1alpha1/nope", "/v1alpha1/runs/a/b", "/v1alpha1/runs/a:explode", "/"):
        with pytest.raises(RouteNotFound):
            ROUTER.match("GET", path)
    with pytest.raises(MethodNotAllowed) as caught:
        ROUTER.match("DELETE", "/v1alpha1/runs/run-1")
    assert caught.value.allowed == ["GET"]
    with pytest.raises(MethodNotAllowed) as caught:
        ROUTER.match("PUT", "/v1alpha1/runs")
    assert caught.value.allowed == ["GET", "POST"]


def test_templates_with_patterns_and_deep_wildcards() -> None:
    template = PathTemplate.parse("/v1/{name=projects/*/runs/*}/files/{path=**}:download")
    assert template.verb == "download"
    assert template.match("/v1/projects/p/runs/r/files/a/b/c", "download") == {
        "name": "projects/p/runs/r",
        "path": "a/b/c",
    }
    assert template.match("/v1/projects/p/files/a", "download") is None
    assert template.match("/v1/projects/p/runs/r/files/a", "") is None
    for bad in ("v1/x", "/v1/{a", "/v1/{1a}", "/v1/x*"):
        with pytest.raises(ValueError):
            PathTemplate.parse(bad)


def _request(method: str, path: str, query=(), body: bytes = b""):
    route, captures = ROUTER.match(method, path)
    return build_request(route, captures, list(query), body)


def test_query_parameters_map_onto_fields_in_either_spelling() -> None:
    request = _request(
        "GET",
        "/v1alpha1/runs",
        [
            ("state", "RUN_STATE_RUNNING"),
            ("name_contains", "night"),
            ("pageSize", "7"),
            ("page_token", "t"),
            ("labels", "team=a"),
            ("labels", "env=prod"),
        ],
    )
    assert request.state == RUN_STATE_RUNNING
    assert (request.name_contains, request.page_size, request.page_token) == ("night", 7, "t")
    assert list(request.labels) == ["team=a", "env=prod"]


@pytest.mark.parametrize("value", ["RUN_STATE_CANCELLED", "cancelled", "CANCELLED", "5"])
def test_enums_by_full_name_short_name_or_number(value: str) -> None:
    assert _request("GET", "/v1alpha1/runs", [("state", value)]).state == RUN_STATE_CANCELLED


def test_path_captures_fill_the_request_and_the_query_fills_the_rest() -> None:
    request = _request("GET", "/v1alpha1/runs/run-9/results", [("evaluator", "exact-match"), ("pageSize", "3")])
    assert (request.id, request.evaluator, request.page_size) == ("run-9", "exact-match", 3)
    assert _request("POST", "/v1alpha1/runs/run-9:cancel").id == "run-9"  # no body at all is fine


@pytest.mark.parametrize(
    ("query", "message"),
    [
        ([("pageSize", "ten")], "pageSize: expected an integer from -2147483648 to 2147483647, got 'ten'"),
        ([("pageSize", "99999999999")], "pageSize: expected an integer"),
        ([("state", "EXPLODED")], "state: expected one of RUN_STATE_UNSPECIFIED"),
        ([("pageSize", "1"), ("page_size", "2")], "page_size: pageSize names the same field; give it once"),
        ([("page_size", "1"), ("page_size", "2")], "page_size: given 2 times, but it takes one value"),
        ([("colour", "red")],
         "colour: unknown query parameter; accepted: allProjects, createdAfter, createdBefore, labels, nameContains"),
        ([("state.x", "1")], "state.x: state is not a message"),
    ],
)
def test_query_parameter_errors_name_the_parameter(query, message: str) -> None:
    with pytest.raises(BadInputError, match=message.replace("[", "\\[")):
        _request("GET", "/v1alpha1/runs", query)


def test_a_path_field_cannot_be_repeated_in_the_query() -> None:
    with pytest.raises(BadInputError, match="id: already given in the path"):
        _request("GET", "/v1alpha1/runs/run-1", [("id", "run-2")])


def test_the_body_is_parsed_with_the_path_capture_added() -> None:
    request = _request("POST", "/v1alpha1/runs/run-1:cancel", body=b'{"project": "p"}')
    assert (request.id, request.project) == ("run-1", "p")
    with pytest.raises(BadInputError, match="id: the path says 'run-1' but the body says 'run-2'"):
        _request("POST", "/v1alpha1/runs/run-1:cancel", body=b'{"id": "run-2"}')
    with pytest.raises(BadInputError, match="x: query parameters are not accepted by POST /v1alpha1/runs"):
        _request("POST", "/v1alpha1/runs", [("x", "1")], b"{}")


@pytest.mark.parametrize(
    ("body", "message"),
    [
        (b'{"recrods": []}', "recrods: unknown field; accepted fields of EvaluateRequest: evaluators, judges"),
        (b'{"records": [{"input": {"txt": "a"}}]}', "records[0].input.txt: unknown field; accepted fields of Content"),
        (b'{"records": 5}', "records: expected a JSON array, got 5"),
        (b'{"store": "yes"}', 'store: expected true or false, got "yes"'),
        (b'{"records": [{"id": "a"}, {"id": 3}]}', "records[1].id: expected a string, got 3"),
        (b'{"judges": {"j": {"rpm": "many"}}}', 'judges["j"].rpm: expected an integer'),
        (b'{"summary": {"confidence": "high"}}', 'summary.confidence: expected a number, got "high"'),
        (b'{"records": [{"usage": {"latency": 3}}]}', 'records[0].usage.latency: expected a duration string'),
        (b'{"records": [{"input": {"text": "a", "json": {}}}]}', "records[0].input.json: text is already set"),
        (b'{"records": [', "request body: malformed JSON at line 1 column 14: Expecting value"),
        (b"[1, 2]", "request body: expected a JSON object (evalsi.v1alpha1.EvaluateRequest), got an array"),
        (b'{"store": true, "store": false}', "request body: key 'store' appears twice"),
        (b"\xff\xfe{}", "request body: not UTF-8"),
    ],
)
def test_json_body_errors_name_the_field_path(body: bytes, message: str) -> None:
    with pytest.raises(BadInputError) as caught:
        _request("POST", "/v1alpha1/evaluate", body=body)
    assert str(caught.value).startswith(message), str(caught.value)


def test_json_names_and_proto_names_are_both_accepted_in_bodies() -> None:
    request = _request("POST", "/v1alpha1/runs", body=b'{"dry_run": true, "run": {"apiVersion": "evals.si/v1alpha1"}}')
    assert request.dry_run and request.run.api_version == "evals.si/v1alpha1"


def test_responses_are_single_line_protobuf_json() -> None:
    text = to_json(RunEvent(run_id="r", state=RUN_STATE_CANCELLED, progress={"completed": 3}))
    assert "\n" not in text
    assert text == '{"runId": "r", "state": "RUN_STATE_CANCELLED", "progress": {"completed": "3"}}'


_VERBS = ("GET", "POST", "PUT", "PATCH", "DELETE")


def test_the_routes_table_in_docs_matches_the_descriptors() -> None:
    from pathlib import Path

    doc = (Path(__file__).resolve().parents[2] / "docs" / "api.md").read_text()
    documented = set()
    for line in doc.splitlines():
        cells = [cell.strip().strip("`") for cell in line.strip().strip("|").split("|")]
        if len(cells) == 5 and cells[1].startswith("/evalsi.v1alpha1.") and cells[2].split(" ")[0] in _VERBS:
            verb, path = cells[2].split(" ", 1)
            documented.add((verb, path, cells[1].lstrip("/")))
    assert documented == {(r.http_method, r.path, r.rpc) for r in ROUTES}

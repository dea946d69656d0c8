"""Global rules: agentgateway's precedence (deny, require, roles, allow, default deny), rules that fail to evaluate,
and §17's example rules."""

from __future__ import annotations

from typing import Any

from evalsi.auth.principal import Principal
from evalsi.authz.attributes import AttributeSources, create_run, evaluate, run_by_id, stored_run
from evalsi.authz.authorizer import Authorizer
from evalsi.authz.decision import AccessRequest
from evalsi.v1alpha1.evaluation_service_pb2 import EvaluateRequest
from evalsi.v1alpha1.evaluator_pb2 import EvaluatorRef
from evalsi.v1alpha1.run_pb2 import EvalRun, ModelTarget, ObjectMeta, Run, RunSpec, Target
from evalsi.v1alpha1.run_service_pb2 import CancelRunRequest, CreateRunRequest

ALICE = Principal(kind="user", provider="corp", subject="alice", groups=("eng",))


def _authorizer(rules: list[dict[str, str]], bindings: dict[str, list[str]] | None = None) -> Authorizer:
    rbac = {"projects": {"p": bindings if bindings is not None else {"runner": ["user:corp/alice"]}}}
    return Authorizer.from_config(rbac, {"rules": rules})


def _decide(authorizer: Authorizer, action: str = "runs.read", principal: Principal = ALICE,
            resource: dict[str, Any] | None = None, project: str = "p") -> tuple[bool, str]:
    decision = authorizer.decide(AccessRequest(principal, action, project, resource or {}))
    return decision.allowed, decision.deciding


def test_a_matching_deny_beats_a_role_and_an_allow() -> None:
    authorizer = _authorizer([{"allow": "true"}, {"deny": 'request.action == "runs.read"'}])
    allowed, deciding = _decide(authorizer)
    assert not allowed and deciding.startswith("deny rule authorization.rules[1]")
    assert _decide(authorizer, "runs.create")[0]


def test_a_require_that_does_not_hold_denies_despite_the_role() -> None:
    authorizer = _authorizer([{"require": '"admins" in principal.groups'}])
    allowed, deciding = _decide(authorizer)
    assert not allowed and "require rule authorization.rules[0]" in deciding and "does not hold" in deciding


def test_an_erroring_deny_does_not_deny_and_an_erroring_require_denies() -> None:
    # resource.target does not exist on runs.read: both rules fail to evaluate.
    erroring_deny = _authorizer([{"deny": 'resource.target.model == "x"'}])
    assert _decide(erroring_deny) == (True, _decide(_authorizer([]))[1])
    erroring_require = _authorizer([{"require": 'resource.target.model == "x"'}])
    allowed, deciding = _decide(erroring_require)
    assert not allowed and "require rule" in deciding
    trace = erroring_require.decide(AccessRequest(ALICE, "runs.read", "p")).trace
    assert any("failed to evaluate" in line and "does not hold" in line for line in trace)


def test_an_erroring_allow_does_not_allow() -> None:
    authorizer = _authorizer([{"allow": "jwt.iss == 'x'"}], bindings={})
    allowed, deciding = _decide(authorizer)
    assert not allowed and deciding.startswith("default deny")


def test_roles_decide_before_allow_rules_and_allow_rules_before_default_deny() -> None:
    authorizer = _authorizer([{"allow": 'request.action == "traces.read"'}])
    allowed, deciding = _decide(authorizer, "runs.read")
    assert allowed and deciding.startswith("role runner")
    allowed, deciding = _decide(authorizer, "traces.write")
    assert not allowed and deciding == "default deny: no role or allow rule grants traces.write in project p"
    stranger = Principal(kind="user", provider="corp", subject="bob")
    allowed, deciding = _decide(authorizer, "traces.read", principal=stranger)
    assert allowed and deciding.startswith("allow rule authorization.rules[0]")


# --- §17's example rules ----------------------------------------------------------------------------------------

EXAMPLE_RULES = [
    {"deny": 'request.action == "runs.create" && resource.target.connector == "anthropic" && '
             '!("llm-spenders" in principal.groups)'},
    {"require": '!resource.runs_code || "sandbox-users" in principal.groups'},
    {"require": 'request.action != "runs.cancel" || principal.id == resource.run.created_by || '
                '"admin" in principal.roles'},
    {"allow": 'jwt.iss == "https://token.actions.githubusercontent.com" && jwt.repository == "acme/agent" && '
              'request.action in ["runs.create", "runs.read"] && resource.project == "agent-ci"'},
]
EXAMPLE = Authorizer.from_config(
    {"projects": {"p": {"runner": ["group:corp/eng"], "admin": ["user:corp/lead"]}}}, {"rules": EXAMPLE_RULES})
SOURCES = AttributeSources(runs_code=lambda ref: ref.startswith("sandbox/"))


def _run_request(connector: str, evaluator: str = "exact-match", project: str = "p") -> dict[str, Any]:
    request = CreateRunRequest(project=project, run=EvalRun(metadata=ObjectMeta(name="r"), spec=RunSpec(
        target=Target(model=ModelTarget(connector=connector, model="m")), evaluators=[EvaluatorRef(ref=evaluator)])))
    return create_run(request, SOURCES)


def test_only_llm_spenders_run_against_a_paid_api() -> None:
    spender = Principal(kind="user", provider="corp", subject="s", groups=("eng", "llm-spenders"))
    allowed, deciding = _decide(EXAMPLE, "runs.create", resource=_run_request("anthropic"))
    assert not allowed and deciding.startswith("deny rule authorization.rules[0]")
    assert _decide(EXAMPLE, "runs.create", principal=spender, resource=_run_request("anthropic"))[0]
    assert _decide(EXAMPLE, "runs.create", resource=_run_request("openai"))[0]


def test_code_executing_evaluators_only_for_sandbox_users() -> None:
    sandboxer = Principal(kind="user", provider="corp", subject="s", groups=("eng", "sandbox-users"))
    code = _run_request("openai", evaluator="sandbox/unit-tests")
    allowed, deciding = _decide(EXAMPLE, "runs.create", resource=code)
    assert not allowed and "authorization.rules[1]" in deciding
    assert _decide(EXAMPLE, "runs.create", principal=sandboxer, resource=code)[0]
    evaluation = evaluate(EvaluateRequest(project="p", evaluators=[EvaluatorRef(ref="sandbox/x")]), SOURCES)
    assert not _decide(EXAMPLE, "evaluations.run", resource=evaluation)[0]
    assert _decide(EXAMPLE, "evaluations.run", principal=sandboxer, resource=evaluation)[0]


def test_runners_cancel_only_their_own_runs() -> None:
    mine = stored_run(run_by_id(CancelRunRequest(id="r1", project="p"), SOURCES),
                      Run(id="r1", project="p", created_by="corp/alice"))
    theirs = stored_run(run_by_id(CancelRunRequest(id="r2", project="p"), SOURCES),
                        Run(id="r2", project="p", created_by="corp/bob"))
    assert _decide(EXAMPLE, "runs.cancel", resource=mine)[0]
    allowed, deciding = _decide(EXAMPLE, "runs.cancel", resource=theirs)
    assert not allowed and "authorization.rules[2]" in deciding
    lead = Principal(kind="user", provider="corp", subject="lead")
    assert _decide(EXAMPLE, "runs.cancel", principal=lead, resource=theirs)[0]
    # Other actions pass the rule: it only speaks about cancel.
    assert _decide(EXAMPLE, "runs.read", resource=theirs)[0]


def test_github_actions_main_branch_runs_gated_evals_without_a_binding() -> None:
    claims = {"iss": "https://token.actions.githubusercontent.com", "repository": "acme/agent",
              "ref": "refs/heads/main", "sub": "repo:acme/agent:ref:refs/heads/main"}
    job = Principal(kind="service", provider="github", subject=claims["sub"], claims=claims)
    allowed, deciding = _decide(EXAMPLE, "runs.create", principal=job,
                                resource=_run_request("openai", project="agent-ci"), project="agent-ci")
    assert allowed and deciding.startswith("allow rule authorization.rules[3]")
    assert _decide(EXAMPLE, "runs.read", principal=job, project="agent-ci")[0]
    assert not _decide(EXAMPLE, "runs.cancel", principal=job, project="agent-ci")[0]
    assert not _decide(EXAMPLE, "runs.read", principal=job, project="p")[0]
    fork = Principal(kind="service", provider="github", subject="x", claims={**claims, "repository": "evil/agent"})
    assert not _decide(EXAMPLE, "runs.read", principal=fork, project="agent-ci")[0]


def test_the_trace_names_every_rule_and_role_considered() -> None:
    decision = EXAMPLE.decide(AccessRequest(ALICE, "runs.create", "p", _run_request("openai")))
    assert decision.allowed
    text = "\n".join(decision.trace)
    assert "deny rule authorization.rules[0]" in text and "not matched" in text
    assert "require rule authorization.rules[1]" in text and "holds" in text
    assert "roles in project p: runner (binding group:corp/eng in project p" in text
    assert "allow: role runner" in text


def test_credential_headers_are_invisible_to_rules() -> None:
    authorizer = _authorizer([{"require": '!("authorization" in request.headers)'}])
    request = AccessRequest(ALICE, "runs.read", "p", headers={"authorization": "Bearer secret", "x-team": "a"})
    assert authorizer.decide(request).allowed
    by_header = _authorizer([{"require": 'request.headers["x-team"] == "a"'}])
    assert by_header.decide(request).allowed


def test_a_partial_decision_leaves_to_the_stored_resource_what_only_it_decides() -> None:
    """The gate decides CancelRun before the run is loaded: §17's own-runs rule cannot be evaluated yet, so it does
    not deny; the handler's decision on the stored run is the final one."""
    first = run_by_id(CancelRunRequest(id="r2", project="p"), SOURCES)
    early = EXAMPLE.decide(AccessRequest(ALICE, "runs.cancel", "p", first, partial=True))
    assert early.allowed and "pending the stored resource" in early.deciding and "authorization.rules[2]" in \
        early.deciding
    # Without partial the same attributes deny: an erroring require does not hold.
    assert not EXAMPLE.decide(AccessRequest(ALICE, "runs.cancel", "p", first)).allowed
    theirs = stored_run(first, Run(id="r2", project="p", created_by="corp/bob"))
    assert not EXAMPLE.decide(AccessRequest(ALICE, "runs.cancel", "p", theirs)).allowed
    mine = stored_run(first, Run(id="r2", project="p", created_by="corp/alice"))
    assert EXAMPLE.decide(AccessRequest(ALICE, "runs.cancel", "p", mine)).allowed


def test_a_partial_decision_still_denies_what_is_already_decided() -> None:
    stranger = Principal(kind="user", provider="corp", subject="bob")
    first = run_by_id(CancelRunRequest(id="r2", project="p"), SOURCES)
    assert not EXAMPLE.decide(AccessRequest(stranger, "runs.cancel", "p", first, partial=True)).allowed
    viewer = Authorizer.from_config({"projects": {"p": {"viewer": ["user:corp/alice"]}}}, {"rules": EXAMPLE_RULES})
    assert not viewer.decide(AccessRequest(ALICE, "runs.cancel", "p", first, partial=True)).allowed
    denying = Authorizer.from_config({"projects": {"p": {"runner": ["user:corp/alice"]}}},
                                     {"rules": [{"deny": 'request.action == "runs.cancel"'}]})
    assert not denying.decide(AccessRequest(ALICE, "runs.cancel", "p", first, partial=True)).allowed
    # A role condition on a stored attribute: possible before the run is loaded, decided after.
    labelled = Authorizer.from_config(
        {"roles": [{"name": "team-a", "permissions": ["runs.read"], "condition": 'resource.run.labels.team == "a"'}],
         "projects": {"p": {"team-a": ["user:corp/alice"]}}}, None)
    assert labelled.decide(AccessRequest(ALICE, "runs.read", "p", first, partial=True)).allowed
    other = stored_run(first, Run(id="r2", project="p", labels={"team": "b"}))
    assert not labelled.decide(AccessRequest(ALICE, "runs.read", "p", other)).allowed
    team = stored_run(first, Run(id="r2", project="p", labels={"team": "a"}))
    assert labelled.decide(AccessRequest(ALICE, "runs.read", "p", team)).allowed

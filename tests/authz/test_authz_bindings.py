"""Bindings: each subject form, ``*`` bindings, owners, ``cel:`` subjects on JWT claims, list filtering."""

from __future__ import annotations

from evalsi.auth.principal import ANONYMOUS, Principal
from evalsi.authz.authorizer import ALL, Authorizer
from evalsi.authz.bindings import BindingDefinition
from evalsi.authz.decision import AccessRequest

RBAC = {
    "owners": ["group:corp/platform-admins"],
    "projects": {
        "support": {
            "admin": ["user:corp/lead"],
            "editor": ["email:Eng@Example.com"],
            "runner": ['cel:jwt.repository == "acme/support-agent" && jwt.ref == "refs/heads/main"'],
            "viewer": ["group:corp/everyone"],
            "ingest": ["key:otel-collector"],
        },
        "*": {"viewer": ["group:corp/auditors"]},
    },
}
AUTHORIZER = Authorizer.from_config(RBAC, None)


def _allowed(principal: Principal, action: str, project: str = "support") -> bool:
    return AUTHORIZER.decide(AccessRequest(principal, action, project)).allowed


def test_user_subjects_match_provider_and_subject() -> None:
    assert _allowed(Principal(kind="user", provider="corp", subject="lead"), "access.manage")
    assert not _allowed(Principal(kind="user", provider="other", subject="lead"), "access.manage")


def test_email_subjects_need_a_verified_email_and_ignore_case() -> None:
    verified = Principal(kind="user", provider="corp", subject="u", email="eng@example.com", email_verified=True)
    unverified = Principal(kind="user", provider="corp", subject="u", email="eng@example.com")
    assert _allowed(verified, "policies.write")
    assert not _allowed(unverified, "policies.write")


def test_group_subjects_are_per_provider() -> None:
    assert _allowed(Principal(kind="user", provider="corp", subject="u", groups=("everyone",)), "traces.read")
    assert not _allowed(Principal(kind="user", provider="gitlab", subject="u", groups=("everyone",)), "traces.read")


def test_key_subjects_match_api_keys_only() -> None:
    key = Principal(kind="apikey", provider="apikey", subject="otel-collector", key_name="otel-collector")
    assert _allowed(key, "traces.write")
    assert not _allowed(key, "traces.read")


def test_cel_subjects_read_jwt_claims() -> None:
    main = Principal(kind="service", provider="github", subject="repo:acme/support-agent",
                     claims={"repository": "acme/support-agent", "ref": "refs/heads/main"})
    branch = Principal(kind="service", provider="github", subject="repo:acme/support-agent",
                       claims={"repository": "acme/support-agent", "ref": "refs/heads/feature"})
    assert _allowed(main, "runs.create")
    assert not _allowed(branch, "runs.create")
    assert not _allowed(main, "runs.create", project="other")
    # A principal without those claims: the subject fails to evaluate, which is not a match, and says so.
    decision = AUTHORIZER.decide(AccessRequest(Principal(kind="user", provider="corp", subject="x"), "runs.create",
                                               "support"))
    assert not decision.allowed
    assert any("failed to evaluate" in line and "not matched" in line for line in decision.trace)


def test_star_bindings_and_owners_hold_everywhere() -> None:
    auditor = Principal(kind="user", provider="corp", subject="a", groups=("auditors",))
    assert _allowed(auditor, "runs.read", "support") and _allowed(auditor, "runs.read", "anything")
    assert not _allowed(auditor, "runs.create", "anything")
    admin = Principal(kind="user", provider="corp", subject="boss", groups=("platform-admins",))
    decision = AUTHORIZER.decide(AccessRequest(admin, "projects.manage", ""))
    assert decision.allowed and decision.deciding.startswith("role owner (binding group:corp/platform-admins")


def test_anonymous_matches_no_subject() -> None:
    for action in ("runs.read", "self.read", "traces.write"):
        assert not _allowed(ANONYMOUS, action)


def test_projects_readable_for_list_filtering() -> None:
    lead = Principal(kind="user", provider="corp", subject="lead")
    assert AUTHORIZER.projects_readable(lead, "runs.read") == frozenset({"support"})
    assert AUTHORIZER.projects_readable(lead, "metrics.read") == frozenset()
    auditor = Principal(kind="user", provider="corp", subject="a", groups=("auditors",))
    assert AUTHORIZER.projects_readable(auditor, "runs.read") is ALL
    owner = Principal(kind="user", provider="corp", subject="boss", groups=("platform-admins",))
    assert AUTHORIZER.projects_readable(owner, "audit.read") is ALL
    key = Principal(kind="apikey", provider="apikey", subject="k", key_name="k", roles={"team-a": ("viewer",)})
    assert AUTHORIZER.projects_readable(key, "runs.read") == frozenset({"team-a"})
    ruled = Authorizer.from_config(None, {"rules": [{"allow": 'resource.project == "open"'}]})
    stranger = Principal(kind="user", provider="corp", subject="s")
    assert ruled.projects_readable(stranger, "runs.read", known_projects=["open", "closed"]) == frozenset({"open"})


def test_bound_roles_for_whoami() -> None:
    lead = Principal(kind="user", provider="corp", subject="lead", groups=("everyone",))
    held = AUTHORIZER.bound_roles(lead, "support")
    assert sorted(b.role for b in held) == ["admin", "viewer"]
    assert all(b.source.startswith("binding ") for b in held)


def test_stored_bindings_take_effect_in_the_new_authorizer() -> None:
    dev = Principal(kind="user", provider="corp", subject="dev")
    assert not _allowed(dev, "runs.create")
    updated = AUTHORIZER.with_stored(bindings=[BindingDefinition("support", "runner", "user:corp/dev", id="b1")])
    assert updated.decide(AccessRequest(dev, "runs.create", "support")).allowed
    assert "binding user:corp/dev in project support" in updated.decide(
        AccessRequest(dev, "runs.create", "support")).deciding

"""The auth CLI against a real evalsi-api behind the gate and a local OIDC issuer: device and PKCE logins (the user's
approval done through the issuer's API), the 0600 cache, whoami, logout, credential precedence (flag > environment
> cache) with the token never printed, API keys, roles, bindings, projects and the audit log over AuthService, and
`auth check` decisions with their exit codes."""

from __future__ import annotations

import json
import os
import re
import stat
import subprocess
import sys
import urllib.parse
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml
from auth_cli_helpers import EVALSI, AuthStack, access_document, auth_stack

from evalsi.auth.api_keys import hash_api_key, new_api_key
from evalsi.client_auth.cache import CachedLogin, CredentialCache, cache_path
from evalsi.testing.issuer import CLI_CLIENT, ThreadedIssuer


@pytest.fixture(scope="module")
def stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[AuthStack]:
    with auth_stack(tmp_path_factory.mktemp("auth"), device_interval_s=0.2) as running:
        yield running


@pytest.fixture
def home(stack: AuthStack, tmp_path: Path) -> Path:
    """A fresh credential cache per test."""
    stack.home = tmp_path
    return tmp_path


def _cache(home: Path) -> CredentialCache:
    return CredentialCache(cache_path({"XDG_CONFIG_HOME": str(home)}, Path("/nonexistent")))


def _whoami(stack: AuthStack, *args: str, env: dict[str, str] | None = None) -> dict[str, object]:
    done = stack.run("whoami", "--server", stack.http, "--format", "json", *args, env=env)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


def test_device_login_caches_0600_then_whoami_and_logout(stack: AuthStack, home: Path) -> None:
    login = subprocess.Popen([EVALSI, "login", "--server", stack.http], stderr=subprocess.PIPE, text=True,
                             env=stack.env(), cwd=home)
    assert login.stderr is not None
    shown = login.stderr.readline()
    code = re.search(r"open (\S+) and enter the code (\S+)", shown)
    assert code and code[1] == f"{stack.issuer.url}/device", shown
    # The user approves in a browser: here, through the issuer's approval endpoint.
    form = urllib.parse.urlencode({"user_code": code[2], "subject": "alice"}).encode()
    urllib.request.urlopen(f"{stack.issuer.url}/device/approve", data=form, timeout=10).read()
    rest = login.stderr.read()
    assert login.wait(60) == 0, rest
    assert f"logged in to {stack.http} as local/alice with {stack.issuer.url}" in rest and "refreshed then" in rest
    cache = _cache(home)
    assert stat.S_IMODE(cache.path.stat().st_mode) == 0o600
    cached = cache.get(stack.http)
    assert cached is not None and cached.refresh_token and cached.access_token not in shown + rest

    me = _whoami(stack)
    assert me["id"] == "local/alice" and me["email"] == "alice@example.com"
    assert me["roles"] == {"support": {"roles": ["viewer"]}} and "support" in me["projects"]
    table = stack.run("whoami", "--server", stack.http)
    assert table.returncode == 0 and re.search(r"roles\s+support: viewer", table.stdout), table.stdout

    out = stack.run("logout", "--server", stack.http)
    assert out.returncode == 0 and f"logged out of {stack.http}" in out.stderr
    assert cache.get(stack.http) is None
    anonymous = stack.run("whoami", "--server", stack.http)
    assert anonymous.returncode == 2
    assert f"run `evalsi login --server {stack.http}`" in anonymous.stderr


def test_browser_login_with_pkce_through_a_loopback_redirect(stack: AuthStack, home: Path) -> None:
    # The "browser": opens the sign-in URL and follows the issuer's redirect to the CLI's loopback callback.
    browser = home / "browser"
    browser.write_text(f"#!{sys.executable}\nimport sys, urllib.request\nurllib.request.urlopen(sys.argv[1]).read()\n")
    browser.chmod(0o755)
    stack.issuer.sign_in("bob")  # the user is signed in to the issuer in that browser
    done = stack.run("login", "--server", stack.http, "--browser", env=stack.env(BROWSER=str(browser)))
    assert done.returncode == 0 and f"logged in to {stack.http} as local/bob" in done.stderr, done.stderr
    shown = re.search(r"visit:\n(\S+)", done.stderr)
    assert shown is not None
    query = dict(urllib.parse.parse_qsl(urllib.parse.urlsplit(shown[1]).query))
    assert query["code_challenge_method"] == "S256" and query["redirect_uri"].startswith("http://127.0.0.1:")
    assert "authorization_code" in stack.issuer.grants
    assert _whoami(stack, "--project", "support")["id"] == "local/bob"


def test_flag_beats_environment_beats_cache_and_tokens_are_never_printed(stack: AuthStack, home: Path) -> None:
    issuer = stack.issuer
    _cache(home).put(stack.http, CachedLogin(issuer.url, CLI_CLIENT, f"{issuer.url}/token", issuer.mint("alice")))
    bob = issuer.mint("bob")
    assert _whoami(stack)["id"] == "local/alice"
    assert _whoami(stack, env=stack.env(EVALSI_TOKEN=bob))["id"] == "local/bob"
    assert _whoami(stack, "--token", bob, env=stack.env(EVALSI_API_KEY=stack.root_key))["id"] == "local/bob"
    assert _whoami(stack, env=stack.env(EVALSI_API_KEY=stack.root_key))["id"] == "apikey/root"
    # Over gRPC too.
    done = stack.run("whoami", "--server", stack.grpc, "--format", "json", env=stack.env(EVALSI_TOKEN=bob))
    assert done.returncode == 0 and json.loads(done.stdout)["id"] == "local/bob", done.stderr

    expired = issuer.mint("bob", expires_in=-120)
    for server in (stack.http, stack.grpc):
        refused = stack.run("runs", "list", "--server", server, env=stack.env(EVALSI_TOKEN=expired))
        assert refused.returncode == 2
        assert "the server refused the credential from $EVALSI_TOKEN" in refused.stderr
        assert expired not in refused.stdout + refused.stderr
    flagged = stack.run("whoami", "--server", stack.http, "--token", expired)
    assert flagged.returncode == 2 and "credential from --token" in flagged.stderr
    assert expired not in flagged.stdout + flagged.stderr
    bad = stack.run("whoami", "--server", stack.http, "--api-key", "sk-not-ours")
    assert bad.returncode == 2 and "start with 'evk_'" in bad.stderr and "sk-not-ours" not in bad.stderr


def test_api_keys_created_listed_used_and_revoked(stack: AuthStack, home: Path) -> None:
    root = stack.env(EVALSI_API_KEY=stack.root_key)
    created = stack.run("auth", "keys", "create", "ci", "--role", "runner", "--label", "team=qa", "--expires", "30d",
                        "--server", stack.http, "--project", "support", env=root)
    assert created.returncode == 0, created.stderr
    key = created.stdout.strip()
    assert key.startswith("evk_") and "shown this once" in created.stderr and key not in created.stderr
    me = _whoami(stack, "--api-key", key)
    assert me["id"] == "apikey/support/ci" and me["roles"] == {"support": {"roles": ["runner"]}}
    listed = stack.run("auth", "keys", "list", "--server", stack.grpc, "--project", "support", "--format", "json",
                       env=root)
    keys = {k["name"]: k for k in json.loads(listed.stdout)}
    assert keys["ci"]["prefix"] == key[:12] and keys["ci"]["labels"] == {"team": "qa"} and key not in listed.stdout
    revoked = stack.run("auth", "keys", "revoke", "ci", "--server", stack.http, "--project", "support", env=root)
    assert revoked.returncode == 0 and "key ci in project support revoked" in revoked.stdout, revoked.stderr
    after = stack.run("whoami", "--server", stack.http, "--api-key", key)
    assert after.returncode == 2 and "credential from --api-key" in after.stderr


def test_roles_bindings_projects_and_the_audit_log(stack: AuthStack, home: Path) -> None:
    root = stack.env(EVALSI_API_KEY=stack.root_key)
    where = ("--server", stack.http, "--project", "support")
    made = stack.run("auth", "roles", "create", "trace-auditor", "--permission", "traces.read", "--permission",
                     "audit.read", *where, env=root)
    assert made.returncode == 0 and "role trace-auditor created in support" in made.stdout, made.stderr
    changed = stack.run("auth", "roles", "update", "trace-auditor", "--permission", "traces.read", *where, env=root)
    assert changed.returncode == 0, changed.stderr
    roles = json.loads(stack.run("auth", "roles", "list", *where, "--format", "json", env=root).stdout)
    assert {"name": "trace-auditor", "permissions": ["traces.read"]}.items() <= next(
        r for r in roles if r["name"] == "trace-auditor").items()
    bound = stack.run("auth", "bindings", "create", "trace-auditor", "group:local/ops", *where, "--format", "json",
                      env=root)
    assert bound.returncode == 0, bound.stderr
    binding = json.loads(bound.stdout)
    bob = stack.issuer.mint("bob")
    assert "trace-auditor" in _whoami(stack, "--token", bob)["roles"]["support"]["roles"]  # type: ignore[index]
    listed = stack.run("auth", "bindings", "list", *where, "--role", "trace-auditor", env=root)
    assert "group:local/ops" in listed.stdout
    assert stack.run("auth", "bindings", "delete", binding["id"], *where, env=root).returncode == 0
    assert stack.run("auth", "roles", "delete", "trace-auditor", *where, env=root).returncode == 0

    project = stack.run("auth", "projects", "create", "checkout", "--description", "the shop", "--server", stack.http,
                        env=root)
    assert project.returncode == 0 and "project checkout created" in project.stdout, project.stderr
    names = [p["name"] for p in json.loads(stack.run("auth", "projects", "list", "--server", stack.grpc,
                                                     "--format", "json", env=root).stdout)]
    assert "checkout" in names and "support" in names
    # bob (a runner in support) may not read the audit log: the denial itself is audited.
    denied = stack.run("auth", "audit", *where, env=stack.env(EVALSI_TOKEN=bob))
    assert denied.returncode == 2 and "audit.read" in denied.stderr
    audit = stack.run("auth", "audit", *where, "--decision", "deny", "--format", "json", env=root)
    events = json.loads(audit.stdout)
    assert any(e["principal"] == "local/bob" and e["action"] == "audit.read" for e in events), events


@pytest.fixture(scope="module")
def offline_config(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Path, str, object]]:
    with ThreadedIssuer(users={"alice": {"groups": ["eng"], "email": "alice@example.com"}}) as issuer:
        key = new_api_key()
        document = access_document(issuer, key)
        document["auth"]["api_keys"]["keys"].append({"name": "collector", "key": hash_api_key(new_api_key()),
                                                     "roles": {"support": ["ingest"]}})
        document["authorization"] = {"rules": [{"deny": 'request.action == "runs.create" && '
                                                        'resource.target.model == "gpt-5"'}]}
        path = tmp_path_factory.mktemp("offline") / "evalsi.yaml"
        path.write_text(yaml.safe_dump(document))
        yield path, key, issuer


def _check(config: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("EVALSI_")}
    return subprocess.run([EVALSI, "auth", "check", "--config", str(config), *args], capture_output=True, text=True,
                          timeout=120, env=env)


def test_auth_check_explains_decisions_and_exits_0_or_3(offline_config: tuple[Path, str, object]) -> None:
    config, root_key, issuer = offline_config
    token = issuer.mint("alice")  # type: ignore[attr-defined]
    viewer = _check(config, "--token", token, "--action", "runs.read", "--project", "support")
    assert viewer.returncode == 0, viewer.stdout + viewer.stderr
    assert "principal  local/alice (user)" in viewer.stdout and "decision   ALLOW: role viewer" in viewer.stdout
    assert token not in viewer.stdout
    runner = _check(config, "--token", token, "--action", "runs.create", "--project", "support")
    assert runner.returncode == 3 and "decision   DENY: default deny" in runner.stdout
    owner = _check(config, "--api-key", root_key, "--action", "runs.create", "--project", "support",
                   "--resource", '{"target": {"model": "gpt-5"}}', "--format", "json")
    decided = json.loads(owner.stdout)
    assert owner.returncode == 3 and decided["principal"] == "apikey/root" and decided["allowed"] is False
    assert decided["deciding"].startswith("deny rule") and decided["trace"]
    allowed = _check(config, "--principal", '{"provider": "local", "subject": "x", "roles": {"support": ["runner"]}}',
                     "--action", "runs.create", "--project", "support", "--resource", '{"target": {"model": "qwen3"}}')
    assert allowed.returncode == 0 and "ALLOW: role runner" in allowed.stdout, allowed.stdout
    expired = _check(config, "--token", issuer.mint("alice", expires_in=-120),  # type: ignore[attr-defined]
                     "--action", "runs.read", "--project", "support")
    assert expired.returncode == 3 and "DENY: unauthenticated" in expired.stdout
    usage = _check(config, "--action", "runs.read", "--project", "support")
    assert usage.returncode == 2 and "give one of --token, --api-key or --principal" in usage.stderr


def test_hash_key_and_new_key() -> None:
    key = new_api_key()
    hashed = subprocess.run([EVALSI, "auth", "hash-key"], input=key + "\n", capture_output=True, text=True,
                            timeout=60)
    assert hashed.returncode == 0 and hashed.stdout.strip() == hash_api_key(key)
    made = json.loads(subprocess.run([EVALSI, "auth", "new-key", "--format", "json"], capture_output=True,
                                     text=True, timeout=60).stdout)
    assert made["key"].startswith("evk_") and made["hash"] == hash_api_key(made["key"])
    wrong = subprocess.run([EVALSI, "auth", "hash-key", "--key", "sk-123"], capture_output=True, text=True, timeout=60)
    assert wrong.returncode == 2 and "start with 'evk_'" in wrong.stderr and "sk-123" not in wrong.stderr


def test_python_client_takes_token_or_api_key(stack: AuthStack, home: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from evalsi.client import AuthenticationError, Client

    for name in [n for n in os.environ if n.startswith("EVALSI_")]:
        monkeypatch.delenv(name)
    monkeypatch.setenv("XDG_CONFIG_HOME", str(home))
    with Client(stack.http, token=stack.issuer.mint("alice")) as client:
        assert client.auth.whoami().id == "local/alice"
    with Client(stack.grpc, api_key=stack.root_key) as client:
        assert client.auth.whoami().id == "apikey/root"
    monkeypatch.setenv("EVALSI_API_KEY", stack.root_key)
    with Client(stack.grpc) as client:  # from the environment
        assert client.auth.whoami().id == "apikey/root"
    monkeypatch.delenv("EVALSI_API_KEY")
    with Client(stack.http) as client, pytest.raises(AuthenticationError, match="evalsi login --server"):
        client.auth.whoami()


def _authority() -> object:
    """tests/access's CA made in the test (loaded by path: that directory is not on sys.path here)."""
    import importlib.util

    location = Path(__file__).resolve().parents[1] / "access" / "certificates.py"
    spec = importlib.util.spec_from_file_location("access_certificates", location)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.Authority.create()


def test_grpcs_and_https_carry_the_credential_verified_against_evalsi_ca_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    authority = _authority()
    cert_file, key_file = authority.write_server(tmp_path, "api")  # type: ignore[attr-defined]
    ca_file = tmp_path / "ca.pem"
    ca_file.write_bytes(authority.pem)  # type: ignore[attr-defined]
    with auth_stack(tmp_path, tls=(cert_file, key_file)) as tls_stack:
        tls_stack.home = tmp_path
        trusted = tls_stack.env(EVALSI_API_KEY=tls_stack.root_key, EVALSI_CA_FILE=str(ca_file))
        for server in (tls_stack.grpc, tls_stack.http):
            assert server.startswith(("grpcs://", "https://"))
            done = tls_stack.run("whoami", "--server", server, "--format", "json", env=trusted)
            assert done.returncode == 0 and json.loads(done.stdout)["id"] == "apikey/root", done.stderr
        untrusted = tls_stack.run("whoami", "--server", tls_stack.http,
                                  env=tls_stack.env(EVALSI_API_KEY=tls_stack.root_key))
        assert untrusted.returncode == 1 and "CERTIFICATE_VERIFY_FAILED" in untrusted.stderr
        assert tls_stack.root_key not in untrusted.stderr
        # evalsi login reads the server's login settings over the same verified TLS.
        from evalsi.client_auth.oauth import fetch_login_config

        monkeypatch.setenv("EVALSI_CA_FILE", str(ca_file))
        assert fetch_login_config(tls_stack.http).issuer == tls_stack.issuer.url


def test_a_github_actions_job_uses_its_own_oidc_token_scoped_by_a_cel_binding(stack: AuthStack, home: Path) -> None:
    main = stack.env(**stack.issuer.github_job(repository="acme/agent", audience=stack.issuer.audience))
    me = _whoami(stack, "--project", "agent-ci", env=main)
    assert me["id"] == "local/repo:acme/agent:ref:refs/heads/main"
    assert me["roles"] == {"agent-ci": {"roles": ["runner"]}}, me
    listed = stack.run("runs", "list", "--server", stack.grpc, "--project", "agent-ci", env=main)
    assert listed.returncode == 0, listed.stderr
    fork = stack.env(**stack.issuer.github_job(repository="someone/fork", audience=stack.issuer.audience))
    refused = stack.run("runs", "list", "--server", stack.http, "--project", "agent-ci", env=fork)
    assert refused.returncode == 2 and "runs.read" in refused.stderr, refused.stderr


def test_a_login_the_server_does_not_accept_is_reported_at_once(stack: AuthStack, home: Path) -> None:
    with ThreadedIssuer(users={"mallory": {}}, device_interval_s=0.2) as untrusted:
        login = subprocess.Popen([EVALSI, "login", "--server", stack.http, "--issuer", untrusted.url, "--client-id",
                                  CLI_CLIENT], stderr=subprocess.PIPE, text=True, env=stack.env(), cwd=home)
        assert login.stderr is not None
        code = re.search(r"enter the code (\S+)", login.stderr.readline())
        assert code is not None
        untrusted.approve(code[1], "mallory")
        rest = login.stderr.read()
        assert login.wait(60) == 0, rest
    assert "warning: the server did not accept the new login yet" in rest
    assert "the server refused the credential from the login cached in" in rest
    assert f"logged in to {stack.http} with {untrusted.url}" in rest

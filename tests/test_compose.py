"""compose.yaml and the Dockerfile, checked against the code they start (this machine has no Docker engine, so the
checks are static: the file as PyYAML reads it, merge keys applied, never a running container).

Every Evals.si service's command goes through that service's own flag parser, so a renamed or removed flag,
a URL pointing at a service the file does not define, or a misspelt environment variable fails here instead of
in a container that restarts forever. Every pool the code dispatches work to has a worker, every backing service
a healthcheck the services wait on, every image a pinned tag; the image installs its dependencies before the
source, and what `evalsi-policy --otlp-events` imports. Every service reads its own NATS user from the volume the
bus-credentials init service writes, mounted at its own subpath only (tests/test_compose_bus.py runs all of it).
"""

from __future__ import annotations

import argparse
import ast
import fnmatch
import importlib
import importlib.metadata
import importlib.util
import json
import re
import shlex
import tomllib
from dataclasses import replace
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import click
import pytest
import yaml
from click.testing import CliRunner

from evalsi.cli.main import cli
from evalsi.errors import BadInputError
from evalsi.judges import DEFAULT_API_KEY_ENVS
from evalsi.masking import flags_with_secrets
from evalsi.service.settings import CONFIG_ENV
from evalsi.stores import S3ObjectStore, open_metadata_store, open_object_store
from evalsi.stores.sql import SqlMetadataStore
from evalsi_api import main as api_main
from evalsi_ingest import main as ingest_main
from evalsi_policy import main as policy_main
from evalsi_scheduler import main as scheduler_main
from evalsi_worker import main as worker_main

ROOT = Path(__file__).resolve().parents[1]
COMPOSE = yaml.safe_load((ROOT / "compose.yaml").read_text())
SERVICES: dict[str, dict[str, Any]] = COMPOSE["services"]
SCRIPTS: dict[str, str] = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["scripts"]
SERVICE_SCRIPTS = ("evalsi-api", "evalsi-scheduler", "evalsi-worker", "evalsi-ingest", "evalsi-policy")
BACKING = ("nats", "postgres", "clickhouse", "minio")
OURS = ("api", "ingest", "policy", "scheduler", "worker-cpu", "worker-judge", "worker-harness", "worker-sandbox")


def command(name: str) -> list[str]:
    value = SERVICES[name].get("command")
    assert value, f"compose.yaml: services.{name}.command is missing"
    return shlex.split(value) if isinstance(value, str) else [str(v) for v in value]


def environment(name: str) -> dict[str, str]:
    value = SERVICES[name].get("environment") or {}
    if isinstance(value, list):  # the KEY=VALUE list form
        value = dict(item.partition("=")[::2] for item in value)
    return {str(k): "" if v is None else str(v) for k, v in value.items()}


def host_environment(name: str) -> dict[str, str]:
    """A service's environment with paths inside the container replaced by the host files mounted there."""
    mounted = mounts(name)
    return {key: str(mounted.get(value, value)) for key, value in environment(name).items()}


def flag(argv: list[str], name: str) -> str:
    """The value of ``--name=value`` or ``--name value`` in a command."""
    for i, arg in enumerate(argv):
        if arg.startswith(name + "="):
            return arg.split("=", 1)[1]
        if arg == name and i + 1 < len(argv):
            return argv[i + 1]
    raise AssertionError(f"{argv[0]}: {name} not given in compose.yaml")


def parse_service_flags(parser: argparse.ArgumentParser, argv: list[str]) -> argparse.Namespace:
    try:
        return parser.parse_args(argv)
    except SystemExit as exc:  # argparse's way of saying "unrecognized arguments" or "invalid choice"
        raise AssertionError(f"{parser.prog} rejects the flags compose.yaml gives it: {argv}") from exc


def ours_by_script(script: str) -> list[str]:
    return [name for name in OURS if command(name)[0] == script]


# --- the services -----------------------------------------------------------------------------------------


def test_every_service_is_defined() -> None:
    missing = [name for name in (*BACKING, *OURS) if name not in SERVICES]
    assert not missing, f"compose.yaml lacks services {missing}"


@pytest.mark.parametrize("name", OURS)
def test_each_evalsi_service_runs_a_declared_console_script_from_the_image(name: str) -> None:
    service = SERVICES[name]
    assert service.get("build") == "." and (ROOT / "Dockerfile").is_file()
    script = command(name)[0]
    assert script in SERVICE_SCRIPTS, f"services.{name}: {script!r} is not one of {SERVICE_SCRIPTS}"
    assert script in SCRIPTS, f"services.{name}: {script!r} is not in pyproject.toml [project.scripts]"
    module = SCRIPTS[script].split(":")[0]
    assert module == f"evalsi_{script.removeprefix('evalsi-')}.main"


def test_depends_on_names_defined_services() -> None:
    for name, service in SERVICES.items():
        depends = service.get("depends_on") or {}
        for target in depends if isinstance(depends, list) else depends.keys():
            assert target in SERVICES, f"services.{name}.depends_on: {target!r} is not a service"
            condition = {} if isinstance(depends, list) else depends[target] or {}
            if condition.get("condition") == "service_healthy":
                assert "healthcheck" in SERVICES[target], f"{name} waits for {target} to be healthy; it has no check"


def test_healthchecks_use_tools_their_image_has() -> None:
    # The default nats image is FROM scratch (just the binary): a wget check would never pass there, and
    # every service waiting for nats to be healthy would never start. The alpine variant has busybox wget.
    nats = SERVICES["nats"]
    if "wget" in nats["healthcheck"]["test"]:
        assert nats["image"].split(":")[1].endswith("alpine"), "the wget healthcheck needs the alpine nats image"
    assert command("nats")[0] == "nats-server"
    assert {"-js", "-sd", "-m"} <= set(command("nats")), "JetStream, a store directory and the monitor port"
    monitor = command("nats")[command("nats").index("-m") + 1]
    assert f"127.0.0.1:{monitor}/healthz" in " ".join(nats["healthcheck"]["test"])


# --- each command, through its service's real parser -------------------------------------------------------


def test_the_api_command_parses_and_validates(tmp_path: Path) -> None:
    (name,) = ours_by_script("evalsi-api")
    argv = command(name)[1:]
    try:
        settings = api_main.parse_settings(argv, environ=host_environment(name))
    except SystemExit as exc:
        raise AssertionError(f"evalsi-api rejects the flags compose.yaml gives it: {argv}") from exc
    # --datasets-dir is a path inside the container: it must be a mounted volume whose host side exists.
    mounted = mounts(name)
    assert str(settings.datasets_dir) in mounted, f"--datasets-dir {settings.datasets_dir} is not a mounted volume"
    assert mounted[str(settings.datasets_dir)].is_dir()
    settings = replace(settings, datasets_dir=tmp_path)
    settings.validate()  # would refuse 0.0.0.0 without --no-auth (compose has no auth section)
    assert settings.server.host == "0.0.0.0" and settings.access.no_auth
    published = SERVICES[name]["ports"]
    for port in (settings.server.http_port, settings.server.grpc_port):
        assert f"127.0.0.1:{port}:{port}" in published, f"the api's port {port} is not published on loopback"


def test_without_no_auth_the_compose_api_command_is_refused(tmp_path: Path) -> None:
    (name,) = ours_by_script("evalsi-api")
    argv = [a for a in command(name)[1:] if a != "--no-auth"]
    settings = replace(api_main.parse_settings(argv, environ={}), datasets_dir=tmp_path)
    with pytest.raises(BadInputError, match=r"--host 0\.0\.0\.0: not a loopback address, and there is no auth"):
        settings.validate()


def test_the_ingest_command_parses_validates_and_publishes_otlp_on_loopback() -> None:
    (name,) = ours_by_script("evalsi-ingest")
    argv = command(name)[1:]
    settings = ingest_main.settings_from_args(argv)
    settings.validate()  # would refuse 0.0.0.0 without --no-auth
    assert settings.host == "0.0.0.0" and settings.access.no_auth and settings.nats == "nats://nats:4222"
    without = ingest_main.settings_from_args([a for a in argv if a != "--no-auth"])
    with pytest.raises(BadInputError, match="--no-auth"):
        without.validate()
    for port in (settings.http_port, settings.grpc_port):
        assert f"127.0.0.1:{port}:{port}" in SERVICES[name]["ports"]


def test_the_policy_command_parses_and_every_trace_store_is_the_clickhouse_service() -> None:
    (name,) = ours_by_script("evalsi-policy")
    args = parse_service_flags(policy_main.build_parser(), command(name)[1:])
    assert args.traces_url.startswith("clickhouse://")
    from evalsi.stores.traces.clickhouse import parse_clickhouse_url

    for service in ("api", "ingest", "policy"):
        url = flag(command(service), "--traces-url")
        assert parse_clickhouse_url(url) == ("clickhouse", 9000, "evalsi"), f"services.{service}: {url}"
        assert "clickhouse" in SERVICES[service]["depends_on"]


def test_ports_are_published_on_loopback_only() -> None:
    for name, service in SERVICES.items():
        for port in service.get("ports", []):
            assert str(port).startswith("127.0.0.1:"), f"services.{name}.ports {port!r} is reachable from outside"


@pytest.mark.parametrize("name", ours_by_script("evalsi-scheduler"))
def test_the_scheduler_command_parses(name: str, monkeypatch: pytest.MonkeyPatch) -> None:
    for key, value in environment(name).items():  # the parser reads its defaults from the environment
        monkeypatch.setenv(key, value)
    args = parse_service_flags(scheduler_main.build_parser(), command(name)[1:])
    assert args.lease_ttl > 0


@pytest.mark.parametrize("name", ours_by_script("evalsi-worker"))
def test_each_worker_command_parses_and_serves_the_pool_it_is_named_for(
    name: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    for key, value in environment(name).items():
        monkeypatch.setenv(key, value)
    args = parse_service_flags(worker_main.build_parser(), command(name)[1:])
    assert name == f"worker-{args.pool}"
    assert args.concurrency >= 1


@pytest.mark.parametrize("name", OURS)
def test_each_service_has_a_healthcheck_on_the_port_it_serves_readyz_on(name: str) -> None:
    argv = command(name)
    port = flag(argv, "--http-port") if argv[0] == "evalsi-api" else flag(argv, "--metrics-port")
    test = SERVICES[name]["healthcheck"]["test"]
    assert test[:3] == ["CMD", "python", "-c"], "the image has python, not curl or wget"
    assert f"http://127.0.0.1:{port}/readyz" in test[3], f"services.{name}: the healthcheck does not ask /readyz"


def pools_work_is_dispatched_to() -> set[str]:
    """The pools a run or a policy can send tasks to with what ships: generation (models, agents and the harness)
    and every built-in evaluator's pool (the packs this project registers in pyproject.toml)."""
    from evalsi.evaluators import Registry
    from evalsi.runs.plan import AGENT_POOL, GENERATE_POOL

    entry_points = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["entry-points"]["evalsi.packs"]
    packs = []
    for reference in entry_points.values():
        module, _, name = reference.partition(":")
        packs.append(getattr(importlib.import_module(module), name))
    return {GENERATE_POOL, AGENT_POOL} | {evaluator.pool for evaluator in Registry(packs).evaluators()}


def test_every_pool_work_is_dispatched_to_has_a_worker() -> None:
    pools = pools_work_is_dispatched_to()
    assert {"cpu", "judge", "harness"} <= pools  # the scan finds what is known to be dispatched
    served = {flag(command(name), "--pool") for name in ours_by_script("evalsi-worker")}
    assert not pools - served, f"compose.yaml has no worker for the pools {sorted(pools - served)}: tasks would wait"


def test_every_pool_work_is_dispatched_to_has_a_worker_in_evalsi_serve_by_default() -> None:
    from evalsi.service.config import Config

    pools = pools_work_is_dispatched_to()
    assert not pools - {worker.pool for worker in Config().workers}


# --- backing services: healthchecks and pinned images ------------------------------------------------------


@pytest.mark.parametrize("name", BACKING)
def test_every_backing_service_has_a_healthcheck_that_our_services_wait_for(name: str) -> None:
    check = SERVICES[name].get("healthcheck") or {}
    test = check.get("test")
    assert isinstance(test, list) and test[:1] == ["CMD"] and len(test) > 1, f"services.{name}: no exec healthcheck"
    users = [ours for ours in OURS if name in (SERVICES[ours].get("depends_on") or {})]
    assert users, f"no Evals.si service depends on {name}"
    for ours in users:
        condition = SERVICES[ours]["depends_on"][name]
        assert condition == {"condition": "service_healthy"}, f"services.{ours} starts before {name} is healthy"


def test_the_backing_healthchecks_ask_what_the_services_use() -> None:
    clickhouse = SERVICES["clickhouse"]["healthcheck"]["test"]
    assert clickhouse[1] == "clickhouse-client"  # the native protocol on 9000, which --traces-url names
    assert SERVICES["minio"]["healthcheck"]["test"][1:] == ["mc", "ready", "local"]


@pytest.mark.parametrize("name", list(SERVICES))
def test_every_image_has_a_pinned_tag(name: str) -> None:
    image = str(SERVICES[name].get("image", ""))
    assert image, f"services.{name}: no image"
    repository, _, tag = image.rpartition(":")
    assert repository and "/" not in tag, f"services.{name}: {image!r} has no tag"
    assert tag != "latest", f"services.{name}: {image!r} is not pinned"


# --- the URLs point at services in the file ----------------------------------------------------------------


@pytest.mark.parametrize("name", OURS)
def test_nats_url_points_at_the_nats_service(name: str) -> None:
    url = urlsplit(flag(command(name), "--nats"))
    assert (url.scheme, url.hostname, url.port) == ("nats", "nats", 4222)
    assert "nats" in (SERVICES[name].get("depends_on") or {})


@pytest.mark.parametrize("name", [n for n in OURS if command(n)[0] not in ("evalsi-worker", "evalsi-ingest")])
async def test_metadata_url_is_the_postgres_service_with_its_credentials(
    name: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The password travels in the environment, never on the command line (ps shows every command line).
    assert flags_with_secrets(command(name)) == []
    url = environment(name)["EVALSI_METADATA_URL"]
    opened: list[str] = []

    async def fake_open_postgres(cls: type, dsn: str, *, pool_size: int = 10) -> str:
        opened.append(dsn)
        return dsn

    monkeypatch.setattr(SqlMetadataStore, "open_postgres", classmethod(fake_open_postgres))
    await open_metadata_store(url)  # the code's own URL dispatch: a form it does not accept raises
    assert opened == [url], f"{url} is not opened as Postgres"
    parts = urlsplit(url)
    postgres = environment("postgres")
    assert parts.hostname == "postgres" and parts.port == 5432
    assert (parts.username, parts.password, parts.path.lstrip("/")) == (
        postgres["POSTGRES_USER"],
        postgres["POSTGRES_PASSWORD"],
        postgres["POSTGRES_DB"],
    )
    assert "postgres" in SERVICES[name]["depends_on"]
    assert postgres["POSTGRES_USER"] in " ".join(SERVICES["postgres"]["healthcheck"]["test"])


@pytest.mark.parametrize("name", [n for n in OURS if command(n)[0] != "evalsi-ingest"])
async def test_objects_url_is_the_minio_service_with_its_credentials(
    name: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    url = flag(command(name), "--objects-url")
    for key in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_REGION", "AWS_DEFAULT_REGION"):
        monkeypatch.delenv(key, raising=False)
    for key, value in environment(name).items():
        monkeypatch.setenv(key, value)

    async def no_connect(self: S3ObjectStore) -> S3ObjectStore:
        return self

    monkeypatch.setattr(S3ObjectStore, "open", no_connect)
    store = await open_object_store(url)
    assert isinstance(store, S3ObjectStore), f"{url} is not opened as S3"
    endpoint = urlsplit(store.endpoint_url or "")
    assert (endpoint.hostname, endpoint.port) == ("minio", 9000)
    assert command("minio")[:1] == ["server"] and "--address" not in command("minio")  # MinIO's API on 9000
    minio = environment("minio")
    assert (store._access_key, store._secret_key) == (minio["MINIO_ROOT_USER"], minio["MINIO_ROOT_PASSWORD"])
    assert "minio" in SERVICES[name]["depends_on"]


# --- environment variables are spelled as the code reads them ----------------------------------------------


SERVICE_OPTIONS = {"api": api_main.OPTIONS, "ingest": ingest_main.OPTIONS, "policy": policy_main.OPTIONS,
                   "scheduler": scheduler_main.OPTIONS, "worker": worker_main.OPTIONS}


def variables_the_code_reads() -> set[str]:
    # The services' settings name their variables by the kit's rule (EVALSI_<SERVICE>_<KEY>, shared EVALSI_<KEY>).
    names: set[str] = {CONFIG_ENV, *DEFAULT_API_KEY_ENVS.values()}
    for service, options in SERVICE_OPTIONS.items():
        names.update(item.variable(service) for item in options if not item.repeat)
    pattern = re.compile(r"""["'](EVALSI_[A-Z0-9_]+|AWS_[A-Z0-9_]+)["']""")
    for base in (ROOT / "services", ROOT / "libs" / "common" / "evalsi"):
        for path in base.rglob("*.py"):
            if "v1alpha1" in path.parts or "testing" in path.parts:
                continue
            names.update(pattern.findall(path.read_text(encoding="utf-8")))
    return names


def test_the_code_scan_finds_the_variables_services_are_known_to_read() -> None:
    read = variables_the_code_reads()
    assert {"EVALSI_NATS_URL", "EVALSI_NO_AUTH", "EVALSI_WORKER_POOL", "AWS_ACCESS_KEY_ID",
            "EVALSI_CONNECTIONS_FILE"} <= read


@pytest.mark.parametrize("name", OURS)
def test_every_variable_compose_sets_is_one_the_code_reads(name: str) -> None:
    read = variables_the_code_reads()
    unknown = sorted(set(environment(name)) - read)
    assert not unknown, f"services.{name}.environment sets {unknown}, which no Evals.si code reads"


# --- the image ------------------------------------------------------------------------------------------------


def dockerfile() -> list[tuple[str, str]]:
    text = (ROOT / "Dockerfile").read_text().replace("\\\n", " ")
    instructions = []
    for line in text.splitlines():
        line = line.strip()
        if line and not line.startswith("#"):
            keyword, _, rest = line.partition(" ")
            instructions.append((keyword.upper(), rest.strip()))
    return instructions


def test_the_dockerfile_installs_the_project_and_its_packages() -> None:
    steps = dockerfile()
    assert steps[0][0] == "FROM" and "python:3.11" in steps[0][1]
    copied = " ".join(rest for keyword, rest in steps if keyword == "COPY")
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())
    needed = ["pyproject.toml", project["project"]["readme"]]
    needed += [where.split("/")[0] for where in project["tool"]["setuptools"]["packages"]["find"]["where"]]
    for item in needed:
        assert item in copied, f"the Dockerfile does not COPY {item}, which `pip install .` needs"
    assert any(keyword == "RUN" and re.search(r"pip install (\S+ )*\.( |&|$)", rest) for keyword, rest in steps)


def test_the_dockerfile_cmd_is_a_real_cli_verb_with_real_flags() -> None:
    (cmd,) = [rest for keyword, rest in dockerfile() if keyword == "CMD"]
    argv = json.loads(cmd)  # the exec form, so SIGTERM reaches the process
    assert argv[0] in SCRIPTS and SCRIPTS[argv[0]] == "evalsi.cli.main:main"
    verb = argv[1]
    assert verb in cli.list_commands(click.Context(cli)), f"CMD runs `evalsi {verb}`, which is not a verb of the CLI"
    result = CliRunner().invoke(cli, [verb, "--help"])
    assert result.exit_code == 0, result.output
    # Parse (without running) the CMD's own flags, so a renamed option fails here.
    command_ = cli.get_command(click.Context(cli), verb)
    assert command_ is not None
    with (
        cli.make_context("evalsi", list(argv[1:])) as parent,
        command_.make_context(verb, list(argv[2:]), parent=parent) as ctx,
    ):
        if "state_dir" in ctx.params:  # the image's USER may write only below /data
            assert ctx.params["state_dir"].startswith("/data/")


def image_extras() -> list[str]:
    (extras,) = [rest.partition("=")[2] for keyword, rest in dockerfile() if keyword == "ARG"
                 and rest.startswith("EXTRAS=")]
    return extras.split(",")


def requirement_name(requirement: str) -> str:
    return re.split(r"[\s\[<>=!~;]", requirement, maxsplit=1)[0].lower().replace("_", "-")


def test_the_dockerfile_installs_the_dependencies_before_it_copies_the_source() -> None:
    steps = dockerfile()
    installs = [i for i, (keyword, rest) in enumerate(steps) if keyword == "RUN" and "pip install" in rest]
    sources = [i for i, (keyword, rest) in enumerate(steps) if keyword == "COPY"
               and rest.split()[0] in ("libs", "services", "proto")]
    assert installs and sources and installs[0] < min(sources), "a change to the source would reinstall everything"
    before = [rest.split()[0] for keyword, rest in steps[: installs[0]] if keyword == "COPY"]
    assert before == ["pyproject.toml"], f"only pyproject.toml may be copied before the dependencies: {before}"
    first = steps[installs[0]][1]
    assert "pip install -r" in first and "tomllib" in first and "dependencies" in first
    # The source itself is installed without resolving anything again.
    assert any(keyword == "RUN" and "pip install --no-deps ." in rest for keyword, rest in steps[max(sources):])
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    unknown = [extra for extra in image_extras() if extra not in project["optional-dependencies"]]
    assert not unknown, f"the Dockerfile's EXTRAS name extras pyproject.toml does not define: {unknown}"


def test_the_image_installs_what_evalsi_policy_otlp_events_imports() -> None:
    """--otlp-events imports the OpenTelemetry SDK and exporter when asked for: they must be in the image."""
    # The policy's events are built on the one OTel log-event provider, which imports the SDK when built.
    assert "OtelLogEvents" in (ROOT / "libs/common/evalsi/policy/exports.py").read_text()
    tree = ast.parse((ROOT / "libs/common/evalsi/service/otel_events.py").read_text())
    (method,) = [node for node in ast.walk(tree) if isinstance(node, ast.FunctionDef) and node.name == "to_otlp_http"]
    modules = {node.module for node in ast.walk(method) if isinstance(node, ast.ImportFrom) and node.module}
    assert any(module.startswith("opentelemetry.exporter.otlp") for module in modules)
    providers: dict[str, str] = {}  # a module's file -> the distribution that installs it
    for distribution in importlib.metadata.distributions():
        name = distribution.metadata["Name"].lower().replace("_", "-")
        if name.startswith("opentelemetry"):
            for file in distribution.files or ():
                providers[str(distribution.locate_file(file))] = name
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    installed = {requirement_name(r) for r in project["dependencies"]}
    for extra in image_extras():
        installed |= {requirement_name(r) for r in project["optional-dependencies"][extra]}
    for module in sorted(modules):
        spec = importlib.util.find_spec(module)
        assert spec is not None and spec.origin, f"{module} is not installed here"
        assert providers.get(spec.origin) in installed, (
            f"{module} comes from {providers.get(spec.origin)}, which neither the dependencies nor the image's "
            f"extras ({', '.join(image_extras())}) install: `evalsi-policy --otlp-events` would fail in the image"
        )


def test_the_dockerignore_keeps_local_state_out_and_lets_the_source_in() -> None:
    patterns = [line.strip() for line in (ROOT / ".dockerignore").read_text().splitlines()
                if line.strip() and not line.startswith("#")]
    assert {".git", ".venv", ".evalsi", "**/__pycache__"} <= set(patterns)
    copied = [rest.split()[0] for keyword, rest in dockerfile() if keyword == "COPY"]
    assert copied
    for path in copied:
        assert not any(fnmatch.fnmatch(path, pattern) for pattern in patterns), f".dockerignore leaves out {path}"


# --- connections ----------------------------------------------------------------------------------------------


def mounts(name: str) -> dict[str, Path]:
    """Container path -> host file of each bind mount of a service (merge keys already applied by PyYAML)."""
    found: dict[str, Path] = {}
    for volume in SERVICES[name].get("volumes") or []:
        source, _, rest = str(volume).partition(":")
        if source.startswith("./"):
            found[rest.split(":")[0]] = ROOT / source
    return found


@pytest.mark.parametrize("name", OURS)
def test_every_service_reads_the_mounted_connections_file(name: str) -> None:
    from evalsi.connections import CONNECTIONS_ENV

    path = environment(name).get(CONNECTIONS_ENV)
    assert path, f"services.{name}.environment: {CONNECTIONS_ENV} is missing (served judges would all be refused)"
    assert path in mounts(name), f"services.{name}: {path} is not mounted"


def test_the_connections_file_loads_and_its_keys_reach_the_judge_worker() -> None:
    from evalsi.connections import Connections

    connections = Connections.load(ROOT / "compose.connections.yaml")
    assert set(connections.judges) == {"openai", "anthropic"}
    variables = {judge.api_key.env for judge in connections.judges.values()}
    assert variables == set(DEFAULT_API_KEY_ENVS.values())
    assert variables <= set(environment("worker-judge"))


# --- the bus's users: one per service, written by the bus-credentials init service ------------------------------

INIT = "bus-credentials"
NATS_CREDENTIALS_ENV = "EVALSI_NATS_CREDENTIALS"


def init_argv() -> list[str]:
    """What the init service runs: its entrypoint (so `docker compose run --rm bus-credentials --rotate` appends)."""
    service = SERVICES[INIT]
    return [str(v) for v in service.get("entrypoint") or []] + [str(v) for v in service.get("command") or []]


def identity_of(name: str) -> str:
    """The NATS user a compose service must connect as: `evalsi serve`'s rule (evalsi.bus.permissions)."""
    from evalsi.bus.permissions import identity_for

    script = command(name)[0].removeprefix("evalsi-")
    return identity_for(script, flag(command(name), "--pool") if script == "worker" else None)


def volume_mounts(name: str, volume: str) -> list[dict[str, Any]]:
    """The long-form mounts of the named volume ``volume`` in a service."""
    return [v for v in SERVICES[name].get("volumes") or []
            if isinstance(v, dict) and v.get("type") == "volume" and v.get("source") == volume]


def host_path(name: str, container_path: str, volumes: dict[str, Path]) -> Path:
    """Where a path inside a service's container is on this machine: bind mounts at their source in the repository,
    named volumes (and their subpaths) under the directories ``volumes`` gives for them."""
    for volume in SERVICES[name].get("volumes") or []:
        if isinstance(volume, dict):
            source, target = volume["source"], volume["target"]
            subpath = (volume.get("volume") or {}).get("subpath", "")
        else:
            source, target = str(volume).split(":")[:2]
            subpath = ""
        if container_path != target and not container_path.startswith(target.rstrip("/") + "/"):
            continue
        rest = container_path[len(target):].lstrip("/")
        base = ROOT / source if source.startswith("./") else volumes[source] / subpath
        return base / rest if rest else base
    raise AssertionError(f"services.{name}: {container_path} is on no mounted volume")


def test_the_init_service_writes_the_users_of_every_worker_pool_before_anything_connects() -> None:
    argv = init_argv()
    assert argv[:3] == ["evalsi", "bus", "credentials"] and SCRIPTS["evalsi"] == "evalsi.cli.main:main"
    group = cli.get_command(click.Context(cli), "bus")
    assert isinstance(group, click.Group)
    credentials = group.get_command(click.Context(group), "credentials")
    assert credentials is not None
    with credentials.make_context("credentials", argv[3:]) as ctx:  # the flags parse, pools included
        params = ctx.params
    served = {flag(command(name), "--pool") for name in ours_by_script("evalsi-worker")}
    assert set(params["pools"]) == served, "a worker without a user could not connect; a user without a worker is idle"
    # --out is the volume every user's file is read from, writable here only.
    assert f"{INIT}:{params['out']}" in SERVICES[INIT]["volumes"] and INIT in COMPOSE["volumes"]
    # One shot: `restart: unless-stopped` would run it forever and never let `service_completed_successfully` hold.
    assert SERVICES[INIT].get("restart", "no") == "no"
    # Root only to hand the files to the services' user, which is the image's USER, and nothing more.
    (user,) = [rest for keyword, rest in dockerfile() if keyword == "USER"]
    assert SERVICES[INIT]["user"] == "root" and params["owner"] == user
    assert SERVICES[INIT]["cap_drop"] == ["ALL"]
    assert set(SERVICES[INIT]["cap_add"]) == {"CHOWN", "DAC_OVERRIDE", "FOWNER"}  # chown; read and chmod a kept file
    assert SERVICES[INIT]["network_mode"] == "none"
    for name in ("nats", *OURS):
        assert SERVICES[name]["depends_on"].get(INIT) == {"condition": "service_completed_successfully"}, name


@pytest.mark.parametrize("name", OURS)
def test_each_service_mounts_only_its_own_users_directory(name: str) -> None:
    from evalsi.service.bus_users_files import CREDENTIALS_FILE

    path = environment(name).get(NATS_CREDENTIALS_ENV, "")
    assert path.endswith("/" + CREDENTIALS_FILE), f"services.{name}: {NATS_CREDENTIALS_ENV} is {path!r}"
    (mount,) = volume_mounts(name, INIT)  # one directory of the volume, never its root with everyone's files
    assert mount["target"] == path.rsplit("/", 1)[0] and mount["read_only"] is True
    assert mount["volume"]["subpath"] == identity_of(name), f"services.{name} would connect as another user"
    assert not [v for v in SERVICES[name].get("volumes") or [] if isinstance(v, str) and v.startswith(f"{INIT}:")]


def test_nats_admits_only_the_users_the_init_service_writes() -> None:
    from evalsi.service.bus_users_files import AUTHORIZATION_FILE, SERVER_DIRECTORY

    argv = command("nats")
    config = argv[argv.index("-c") + 1]
    (mount,) = volume_mounts("nats", INIT)
    assert config == f"{mount['target']}/{AUTHORIZATION_FILE}" and mount["read_only"] is True
    assert mount["volume"]["subpath"] == SERVER_DIRECTORY

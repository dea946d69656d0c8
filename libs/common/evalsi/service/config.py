"""``evalsi.yaml``: one file configures the standalone server and every service; secrets stay in the environment.

    nats: {url: ""}                          # empty: `evalsi serve` starts the bundled nats-server (credentials made)
    nats: {url: nats://host:4222, credentials_file: /run/secrets/nats}   # external: user:password or .creds file
    metadata: {url: sqlite:///.evalsi/state/evalsi.db}   # or postgresql://user@host:5432/evalsi
    metadata: {url: postgresql://evalsi@db:5432/evalsi, password_file: /run/secrets/pg}   # the password by reference
    objects: {url: .evalsi/state/objects}    # or s3://bucket/prefix?endpoint=http://host:9000
    objects: {url: s3://bucket, credentials_file: /run/secrets/aws}   # an AWS shared credentials file
    traces: {url: ""}                        # empty: <state>/traces.db; or clickhouse://host:9000/database
    datasets_dir: .                          # run specs may only read datasets below this directory
    api: {host: 127.0.0.1, http_port: 8080, grpc_port: 8081}
    ingest: {http_port: 4318, grpc_port: 4317, grace_s: 5}   # evalsi-ingest (OTLP)
    scheduler: {replicas: 1, lease_ttl_s: 15}
    workers: [{pool: cpu, replicas: 1, concurrency: 16}, {pool: judge, replicas: 1, concurrency: 32},
              {pool: harness, replicas: 1, concurrency: 8},   # harness: agent targets and the built-in harness
              {pool: sandbox, replicas: 1, concurrency: 8}]   # sandbox: code evaluators, through evalsi-sandboxd
    judges: {default: {connector: openai-compatible, base_url: http://127.0.0.1:8000/v1, model: my-judge,
                       api_key: {env: JUDGE_KEY}}}   # model endpoints requests may name (evalsi.connections)
    agents: {shop: {protocol: http, url: http://127.0.0.1:9000, agent: shop, token: {env: SHOP_TOKEN}}}
    harness_tools: [weather_tools:get_weather]   # python tools served runs may give the built-in harness
    cli_agents: {commands: [sh], min_isolation: namespaced}   # served CLI agents (docs/environments.md); none: refused
    evaluators: {packs: [core, judge], allowed_packs: [core, judge, rag]}   # packs per project (docs/packs.md)
    client: {server: http://127.0.0.1:8080, project: quickstart}   # the CLI's defaults (evalsi.client_config)
    auth: {jwt: {providers: [...]}, api_keys: {keys: [...]}, tls: {cert_file: ..., key_file: ...}}   # docs/auth.md
    rbac: {owners: [...], roles: [...], projects: {...}}     # who may do what, per project (docs/auth.md)
    sandbox: {ladder: [bwrap, landlock], min_isolation: namespaced}   # the isolation ladder (docs/sandbox.md)
    sandboxd: {enabled: true, listen: "", max_sandboxes: 0, lease_s: 300}   # evalsi-sandboxd under evalsi serve
    authorization: {rules: [...]}                            # global allow / deny / require CEL rules

Every key is checked at start; an error names the key path and what is accepted.
"""

from __future__ import annotations

import difflib
from collections.abc import Mapping
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any

from evalsi.client_config import parse_section
from evalsi.connections import Connections
from evalsi.errors import BadInputError
from evalsi.gate.exposure import AccessSettings
from evalsi.masking import mask_url
from evalsi.sandbox.config import load_sandbox_config
from evalsi.service.defaults import DEFAULT_METADATA_URL, DEFAULT_OBJECTS_URL
from evalsi.yaml_files import read_yaml_file

POOLS = ("cpu", "judge", "gpu", "sandbox", "harness")
# The top-level keys of evalsi.yaml (docs/server.md lists each; tests/cli/test_serve_docs.py checks it does).
KEYS = ("nats", "metadata", "objects", "traces", "datasets_dir", "api", "ingest", "scheduler", "workers", "judges",
        "agents", "harness_tools", "client", "auth", "rbac", "authorization", "audit", "sandbox", "sandboxd",
        "cli_agents", "evaluators")


@dataclass(frozen=True)
class ApiConfig:
    host: str = "127.0.0.1"
    http_port: int = 8080
    grpc_port: int = 8081


@dataclass(frozen=True)
class IngestConfig:
    """evalsi-ingest's OTLP listeners (loopback, as the api's)."""

    http_port: int = 4318
    grpc_port: int = 4317
    grace_s: float = 5.0  # seconds after a trace's root span arrives before it counts as complete


@dataclass(frozen=True)
class SchedulerConfig:
    replicas: int = 1
    lease_ttl_s: float = 15.0


@dataclass(frozen=True)
class WorkerConfig:
    pool: str = "cpu"
    replicas: int = 1
    concurrency: int = 16


@dataclass(frozen=True)
class SandboxdConfig:
    """evalsi-sandboxd as `evalsi serve` starts it (docs/sandbox.md); the ladder itself is the sandbox: section."""

    enabled: bool = True
    listen: str = ""  # empty: a Unix socket in the state directory (0700)
    max_sandboxes: int = 0  # 0: the CPU count
    lease_s: float = 300.0


@dataclass(frozen=True)
class Config:
    nats_url: str = ""
    # The credentials services present to an external NATS (nats.url): a user:password or .creds file, by path.
    nats_credentials_file: str = ""
    metadata_url: str = DEFAULT_METADATA_URL
    metadata_password_file: str = ""  # the Postgres password, by path (never in the URL on disk)
    objects_url: str = DEFAULT_OBJECTS_URL
    objects_credentials_file: str = ""  # an AWS shared credentials file for S3, by path
    traces_url: str = ""  # the trace and online-score store; empty: SQLite in `evalsi serve`'s state directory
    traces_password_file: str = ""  # the ClickHouse user's password, by path (never in the URL on disk)
    datasets_dir: str = "."
    api: ApiConfig = field(default_factory=ApiConfig)
    ingest: IngestConfig = field(default_factory=IngestConfig)
    scheduler: SchedulerConfig = field(default_factory=SchedulerConfig)
    workers: tuple[WorkerConfig, ...] = (
        WorkerConfig("cpu", 1, 16),
        WorkerConfig("judge", 1, 32),
        # Generation for agent targets and the built-in harness runs on its own pool (planning.AGENT_POOL).
        WorkerConfig("harness", 1, 8),
        # Code evaluators (the code pack) run programs through evalsi-sandboxd from their own pool.
        WorkerConfig("sandbox", 1, 8),
    )
    # The judges: and agents: sections: the only endpoints and credentials a served request may name.
    connections: Connections = field(default_factory=Connections)
    # The auth:, rbac: and authorization: sections (evalsi.gate.exposure): who may call the api and ingest.
    access: AccessSettings = field(default_factory=AccessSettings)
    sandboxd: SandboxdConfig = field(default_factory=SandboxdConfig)
    # The sandbox: section as written (checked by evalsi.sandbox.config at load), handed to sandboxd.
    sandbox: Mapping[str, Any] = field(default_factory=dict)

    @classmethod
    def load(cls, path: str | Path | None, *, state_dir: Path | None = None) -> Config:
        """The file at ``path`` (None: no file, every default). With ``state_dir`` (`evalsi serve --state-dir`),
        the metadata database and the object directory the file does not name live there."""
        if path is None and state_dir is None:
            return cls()
        document = {} if path is None else read_yaml_file(path)
        return cls.from_mapping(document, where=str(path or "the flags"), state_dir=state_dir)

    @classmethod
    def from_mapping(cls, document: Any, *, where: str = "evalsi.yaml", state_dir: Path | None = None) -> Config:
        if not isinstance(document, Mapping):
            raise BadInputError(f"{where}: the config must be a mapping of keys")
        _known(document, KEYS, where)
        # client: is the CLI's (evalsi.client_config: the server and project of `evalsi runs`); checked, not used.
        parse_section(document, where)
        workers = document.get(
            "workers", [{"pool": "cpu"}, {"pool": "judge", "concurrency": 32}, {"pool": "harness", "concurrency": 8},
                        {"pool": "sandbox", "concurrency": 8}]
        )
        if not isinstance(workers, list) or not workers:
            raise BadInputError(f"{where}: workers: a non-empty list of {{pool, replicas, concurrency}}")
        config = cls(
            nats_url=_url(document, "nats", where, "", extra=("credentials_file",)),
            nats_credentials_file=_string(document, "nats", "credentials_file", where),
            metadata_url=_url(document, "metadata", where,
                              cls.metadata_url if state_dir is None else f"sqlite:///{state_dir / 'evalsi.db'}",
                              extra=("password_file",)),
            metadata_password_file=_string(document, "metadata", "password_file", where),
            objects_url=_url(document, "objects", where,
                             cls.objects_url if state_dir is None else str(state_dir / "objects"),
                             extra=("credentials_file",)),
            objects_credentials_file=_string(document, "objects", "credentials_file", where),
            traces_url=_url(document, "traces", where, "", extra=("password_file",)),
            traces_password_file=_string(document, "traces", "password_file", where),
            datasets_dir=str(document.get("datasets_dir", ".")),
            api=_section(ApiConfig, document.get("api", {}), f"{where}: api"),
            ingest=_section(IngestConfig, document.get("ingest", {}), f"{where}: ingest"),
            scheduler=_section(SchedulerConfig, document.get("scheduler", {}), f"{where}: scheduler"),
            workers=tuple(_section(WorkerConfig, w, f"{where}: workers[{i}]") for i, w in enumerate(workers)),
            connections=Connections.from_mapping(document.get("judges"), document.get("agents"),
                                                 document.get("harness_tools"), where=where,
                                                 cli_agents=document.get("cli_agents"),
                                                 evaluators=document.get("evaluators")),
            access=AccessSettings.from_document(document, where=where),
            sandboxd=_section(SandboxdConfig, document.get("sandboxd", {}), f"{where}: sandboxd"),
            sandbox=dict(document.get("sandbox") or {}),
        )
        load_sandbox_config(document.get("sandbox"), f"{where}: sandbox")  # the ladder's own checks, naming keys
        config.validate(where)
        return config

    def validate(self, where: str = "evalsi.yaml") -> None:
        for i, worker in enumerate(self.workers):
            if worker.pool not in POOLS:
                raise BadInputError(
                    f"{where}: workers[{i}].pool: must be one of {', '.join(POOLS)}, got {worker.pool!r}"
                )
            if worker.replicas < 1 or worker.concurrency < 1:
                raise BadInputError(f"{where}: workers[{i}]: replicas and concurrency must be at least 1")
        if self.traces_url and not self.traces_url.startswith(("sqlite:///", "clickhouse://")):
            raise BadInputError(f"{where}: traces.url: {mask_url(self.traces_url)!r} is not a trace store; accepted: "
                                "sqlite:///path or clickhouse://host[:tcp_port]/database (empty: SQLite in the "
                                "state directory)")
        if self.scheduler.replicas < 1 or self.scheduler.lease_ttl_s <= 0:
            raise BadInputError(f"{where}: scheduler: replicas must be at least 1 and lease_ttl_s positive")
        for section in ("api", "ingest"):
            for name in ("http_port", "grpc_port"):
                port = getattr(getattr(self, section), name)
                if not 0 <= port < 65536:
                    raise BadInputError(f"{where}: {section}.{name}: must be a port number, got {port}")
        if self.ingest.http_port and self.ingest.http_port == self.ingest.grpc_port:
            raise BadInputError(f"{where}: ingest: http_port and grpc_port are both {self.ingest.http_port}")
        api_ports = {self.api.http_port, self.api.grpc_port} - {0}
        for name in ("http_port", "grpc_port"):
            port = getattr(self.ingest, name)
            if port and port in api_ports:
                raise BadInputError(f"{where}: ingest.{name}: {port} is also an api port; give each its own")


def _known(document: Mapping[str, Any], keys: tuple[str, ...], where: str) -> None:
    for key in document:
        if key not in keys:
            close = difflib.get_close_matches(str(key), keys, n=1)
            hint = f"; did you mean {close[0]}?" if close else f"; accepted: {', '.join(keys)}"
            raise BadInputError(f"{where}: {key}: unknown key{hint}")


def _url(document: Mapping[str, Any], key: str, where: str, default: str, extra: tuple[str, ...] = ()) -> str:
    section = document.get(key, {})
    if section is None:
        return default
    if not isinstance(section, Mapping):
        raise BadInputError(f"{where}: {key}: expected a mapping like {{url: ...}}")
    _known(section, ("url", *extra), f"{where}: {key}")
    value = section.get("url", default)
    if not isinstance(value, str):
        raise BadInputError(f"{where}: {key}.url: must be a string")
    return value


def _string(document: Mapping[str, Any], section: str, key: str, where: str) -> str:
    """``section.key`` as a string ("" when absent); the section itself is checked by ``_url``."""
    values = document.get(section) or {}
    value = values.get(key, "") if isinstance(values, Mapping) else ""
    if not isinstance(value, str):
        raise BadInputError(f"{where}: {section}.{key}: must be a string (a file path), got {value!r}")
    return value


def _section(cls: type, values: Any, where: str) -> Any:
    if not isinstance(values, Mapping):
        raise BadInputError(f"{where}: expected a mapping")
    names = tuple(f.name for f in fields(cls))
    _known(values, names, where)
    defaults = cls()
    for name, value in values.items():
        expected = type(getattr(defaults, name))
        ok = isinstance(value, expected) or (expected is float and isinstance(value, int))
        if not ok or (isinstance(value, bool) and expected is not bool):
            raise BadInputError(f"{where}.{name}: must be {expected.__name__}, got {value!r}")
    return cls(**values)

"""``evalsi serve`` plans an ingest process beside the api, both on one trace store; ``ingest:`` in evalsi.yaml."""

from __future__ import annotations

from pathlib import Path

import pytest

from evalsi.errors import BadInputError
from evalsi.service.config import Config
from evalsi.service.supervisor import plan_children, traces_url_for


def _flag(argv: list[str], name: str) -> str:
    return argv[argv.index(name) + 1]


def test_serve_plans_ingest_and_shares_the_trace_store(tmp_path: Path) -> None:
    children = {c.name: c for c in plan_children(Config(), "nats://127.0.0.1:4222", tmp_path)}
    ingest, api = children["ingest"], children["api"]
    assert ingest.argv[1:3] == ["-m", "evalsi_ingest.main"]
    assert (_flag(ingest.argv, "--http-port"), _flag(ingest.argv, "--grpc-port")) == ("4318", "4317")
    url = traces_url_for(tmp_path)
    assert url == f"sqlite:///{tmp_path.resolve()}/traces.db"
    # URLs travel in the environment, never on a command line (ps shows every process's argv to everyone).
    assert ingest.env["EVALSI_TRACES_URL"] == url == api.env["EVALSI_TRACES_URL"]
    assert "--traces-url" not in ingest.argv + api.argv
    assert _flag(ingest.argv, "--host") == "127.0.0.1"
    assert ingest.log_path == tmp_path / "logs" / "ingest.log"


def test_ingest_ports_come_from_config(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    config = Config.from_mapping({"ingest": {"http_port": 14318, "grpc_port": 14317}})
    (ingest,) = [c for c in plan_children(config, "nats://x", tmp_path) if c.name == "ingest"]
    assert (_flag(ingest.argv, "--http-port"), _flag(ingest.argv, "--grpc-port")) == ("14318", "14317")
    # The flags and variables the plan passes are ones evalsi-ingest accepts.
    from evalsi_ingest.main import settings_from_args

    for name, value in ingest.env.items():
        if name.startswith("EVALSI_"):
            monkeypatch.setenv(name, value)

    settings = settings_from_args(ingest.argv[3:])
    settings.validate()
    assert settings.http_port == 14318 and settings.traces_url == traces_url_for(tmp_path)


@pytest.mark.parametrize(
    ("document", "message"),
    [
        ({"ingest": {"http_port": 70000}}, "ingest.http_port"),
        ({"ingest": {"http_port": 5000, "grpc_port": 5000}}, "both 5000"),
        ({"ingest": {"grpc_port": 8081}}, "ingest.grpc_port: 8081 is also an api port"),
        ({"ingest": {"http_port": "4318"}}, "ingest.http_port: must be int"),
        ({"ingest": {"port": 1}}, "ingest: port: unknown key"),
    ],
)
def test_bad_ingest_config_names_the_key(document: dict, message: str) -> None:
    with pytest.raises(BadInputError, match=message):
        Config.from_mapping(document)


def test_traces_url_from_config_goes_to_ingest_policy_and_api(tmp_path: Path) -> None:
    config = Config.from_mapping({"traces": {"url": "clickhouse://127.0.0.1:9000/evalsi"}})
    children = {c.name: c for c in plan_children(config, "nats://x", tmp_path)}
    for name in ("ingest", "policy", "api"):
        assert children[name].env["EVALSI_TRACES_URL"] == "clickhouse://127.0.0.1:9000/evalsi", name
    with pytest.raises(BadInputError, match=r"traces\.url: 'postgres://x' is not a trace store"):
        Config.from_mapping({"traces": {"url": "postgres://x"}})

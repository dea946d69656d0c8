"""The client's defaults: the server and project of `evalsi runs|traces|policies|compare|cases|datasets` from the
flag, the environment, ./evalsi.yaml and the user's config, highest first; and run states by name."""

from __future__ import annotations

import socket
from pathlib import Path

import pytest
from click.testing import CliRunner

from evalsi.cli.main import cli
from evalsi.client import RunHandle, _state_number, state_name
from evalsi.client_config import ClientSection, parse_section, resolve, user_config_path
from evalsi.errors import BadInputError
from evalsi.service.config import Config
from evalsi.v1alpha1.run_pb2 import RUN_STATE_BUDGET_EXCEEDED, RUN_STATE_SUCCEEDED, Run

NO_SERVER = (
    "Error: no server given: pass --server URL, set EVALSI_SERVER, or set client.server in ./evalsi.yaml or "
    "~/.config/evalsi/config.yaml (e.g. http://127.0.0.1:8080, which `evalsi serve` listens on)\n"
)


def refused_port() -> int:
    """A loopback port nothing listens on: connecting to it is refused at once, naming the URL tried."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def test_each_key_comes_from_the_first_place_that_gives_it() -> None:
    project_file = ClientSection("./evalsi.yaml", server="http://127.0.0.1:1001", project="from-project-file")
    user_file = ClientSection("/home/u/.config/evalsi/config.yaml", server="http://127.0.0.1:1002", project="user")
    env = {"EVALSI_SERVER": "grpc://127.0.0.1:1003", "EVALSI_PROJECT": "from-env"}

    flags = resolve(server_flag="http://127.0.0.1:1004", project_flag="flag", env=env, files=[project_file, user_file])
    assert (flags.server, flags.server_from, flags.project, flags.project_from) == (
        "http://127.0.0.1:1004", "--server", "flag", "--project")
    from_env = resolve(server_flag=None, project_flag=None, env=env, files=[project_file, user_file])
    assert (from_env.server_from, from_env.project) == ("$EVALSI_SERVER", "from-env")
    from_files = resolve(server_flag=None, project_flag=None, env={}, files=[project_file, user_file])
    assert (from_files.server, from_files.server_from) == ("http://127.0.0.1:1001", "./evalsi.yaml client.server")
    only_user = resolve(server_flag=None, project_flag=None, env={}, files=[ClientSection("./evalsi.yaml"), user_file])
    assert (only_user.server, only_user.project) == ("http://127.0.0.1:1002", "user")
    # Independent keys: the project from the environment, the server from the user's file.
    mixed = resolve(server_flag=None, project_flag=None, env={"EVALSI_PROJECT": "e"}, files=[user_file])
    assert (mixed.server, mixed.project) == ("http://127.0.0.1:1002", "e")
    nothing = resolve(server_flag=None, project_flag=None, env={}, files=[])
    assert (nothing.server, nothing.project, nothing.effective_project) == ("", "", "default")
    with pytest.raises(BadInputError, match=r"^no server given: pass --server URL, set EVALSI_SERVER"):
        nothing.require_server()


def test_values_are_checked_naming_where_they_came_from() -> None:
    with pytest.raises(BadInputError, match=r"^\$EVALSI_PROJECT: 'a b' is not a valid project name"):
        resolve(server_flag=None, project_flag=None, env={"EVALSI_PROJECT": "a b"}, files=[])
    with pytest.raises(BadInputError, match=r"^\$EVALSI_SERVER: 'ftp://u:\*\*\*@h' is not a server URL"):
        resolve(server_flag=None, project_flag=None, env={"EVALSI_SERVER": "ftp://u:secret@h"}, files=[])
    with pytest.raises(BadInputError) as bad_scheme:
        resolve(server_flag="ftp://h:1", project_flag=None, env={}, files=[])
    assert str(bad_scheme.value) == ("--server: 'ftp://h:1' is not a server URL; use grpc://host:8081 or "
                                     "http://host:8080 (grpcs:// or https:// for TLS)")


def test_a_client_section_is_parsed_and_refused_with_the_file_and_key() -> None:
    section = parse_section({"client": {"server": "grpc://127.0.0.1:8081", "project": "qs"}, "api": {}}, "f.yaml")
    assert section == ClientSection("f.yaml", "grpc://127.0.0.1:8081", "qs")
    assert parse_section({"metadata": {"url": "x"}}, "f.yaml") == ClientSection("f.yaml")
    problems = {
        "f.yaml: client.sever: unknown key; did you mean server?": {"client": {"sever": "http://h:1"}},
        "f.yaml: client.colour: unknown key; accepted: server, project": {"client": {"colour": 1}},
        "f.yaml: client.project: must be a string, got 3": {"client": {"project": 3}},
        "f.yaml client.project: 'a.b' is not a valid project name": {"client": {"project": "a.b"}},
        "f.yaml: client: expected a mapping like": {"client": "http://h:1"},
    }
    for message, document in problems.items():
        with pytest.raises(BadInputError) as caught:
            parse_section(document, "f.yaml")
        assert str(caught.value).startswith(message)


def test_the_server_config_accepts_and_checks_the_client_section() -> None:
    Config.from_mapping({"client": {"server": "http://127.0.0.1:8080", "project": "quickstart"}})
    with pytest.raises(BadInputError, match=r"^evalsi.yaml: client.sever: unknown key; did you mean server\?"):
        Config.from_mapping({"client": {"sever": "http://127.0.0.1:8080"}})


def test_the_user_config_follows_xdg(tmp_path: Path) -> None:
    home = tmp_path / "home"
    assert user_config_path({}, home) == home / ".config" / "evalsi" / "config.yaml"
    assert user_config_path({"XDG_CONFIG_HOME": str(tmp_path / "x")}, home) == tmp_path / "x" / "evalsi" / "config.yaml"
    # The XDG rule: a relative XDG_CONFIG_HOME is invalid and ignored.
    assert user_config_path({"XDG_CONFIG_HOME": "rel"}, home) == home / ".config" / "evalsi" / "config.yaml"


@pytest.fixture
def place(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> dict[str, str | None]:
    """A current directory and a HOME of the test's own, and no client variable from the machine."""
    work = tmp_path / "work"
    work.mkdir()
    monkeypatch.chdir(work)
    return {"HOME": str(tmp_path / "home"), "XDG_CONFIG_HOME": None, "EVALSI_SERVER": None, "EVALSI_PROJECT": None}


def write_client(path: Path, **values: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("client:\n" + "".join(f"  {key}: {value}\n" for key, value in values.items()))


@pytest.mark.parametrize("verb", [["runs", "list"], ["runs", "get", "run-x"], ["traces", "list"],
                                  ["policies", "list"], ["datasets", "list", "qa"]])
def test_no_server_anywhere_is_a_usage_error_naming_the_flag_variable_and_key(verb: list[str], place) -> None:
    result = CliRunner().invoke(cli, verb, env=place)
    assert result.exit_code == 2
    assert result.output.endswith(NO_SERVER)


def test_the_server_comes_from_flag_then_env_then_evalsi_yaml_then_user_config(tmp_path: Path, place) -> None:
    ports = {name: refused_port() for name in ("flag", "env", "project", "user")}
    url = {name: f"http://127.0.0.1:{port}" for name, port in ports.items()}
    write_client(tmp_path / "home" / ".config" / "evalsi" / "config.yaml", server=url["user"])

    def reached(*extra: str, env: dict[str, str | None] | None = None) -> str:
        result = CliRunner().invoke(cli, ["runs", "list", *extra], env={**place, **(env or {})})
        assert result.exit_code == 1, result.output
        return result.output

    assert reached() == f"error: cannot reach {url['user']}: [Errno 111] Connection refused\n"
    write_client(Path("evalsi.yaml"), server=url["project"])
    assert f"cannot reach {url['project']}:" in reached()
    assert f"cannot reach {url['env']}:" in reached(env={"EVALSI_SERVER": url["env"]})
    assert f"cannot reach {url['flag']}:" in reached("--server", url["flag"], env={"EVALSI_SERVER": url["env"]})
    # XDG_CONFIG_HOME moves the user's file.
    Path("evalsi.yaml").unlink()
    write_client(tmp_path / "xdg" / "evalsi" / "config.yaml", server=url["env"])
    assert f"cannot reach {url['env']}:" in reached(env={"XDG_CONFIG_HOME": str(tmp_path / "xdg")})


def test_the_project_comes_from_flag_then_env_then_evalsi_yaml_then_user_config(tmp_path: Path, place) -> None:
    # `evalsi cases list` reaches a store, not a server, and says which project it read.
    store = ["cases", "list", "--metadata-url", f"sqlite:///{tmp_path / 'cases.db'}"]

    def project_read(*extra: str, env: dict[str, str | None] | None = None) -> str:
        result = CliRunner().invoke(cli, [*store, *extra], env={**place, **(env or {})})
        assert result.exit_code == 0, result.output
        return result.output.strip()

    assert project_read() == "0 case(s) in project default, tenant platform"
    write_client(tmp_path / "home" / ".config" / "evalsi" / "config.yaml", project="from-user")
    assert project_read() == "0 case(s) in project from-user, tenant platform"
    write_client(Path("evalsi.yaml"), project="from-dir")
    assert project_read() == "0 case(s) in project from-dir, tenant platform"
    assert project_read(env={"EVALSI_PROJECT": "from-env"}) == "0 case(s) in project from-env, tenant platform"
    flagged = project_read("--project", "from-flag", env={"EVALSI_PROJECT": "from-env"})
    assert flagged == "0 case(s) in project from-flag, tenant platform"


def test_a_bad_value_in_a_file_is_refused_before_connecting(place) -> None:
    write_client(Path("evalsi.yaml"), server="http://127.0.0.1:9", project="a.b")
    result = CliRunner().invoke(cli, ["runs", "list"], env=place)
    assert result.exit_code == 2
    assert result.output.endswith(
        "Error: ./evalsi.yaml client.project: 'a.b' is not a valid project name (letters, digits, '-' and '_', "
        "starting with a letter or digit, at most 63 characters)\n")


def test_compare_reads_files_when_both_exist_even_with_a_default_server(tmp_path: Path, place) -> None:
    import evalsi

    rows = [{"id": str(i), "output": "a", "reference": "a" if i % 2 else "b"} for i in range(6)]
    evalsi.evaluate(rows, ["exact-match"]).save(str(tmp_path / "a.json"))
    evalsi.evaluate(rows, ["exact-match"]).save(str(tmp_path / "b.json"))
    env = {**place, "EVALSI_SERVER": f"http://127.0.0.1:{refused_port()}"}
    files = CliRunner().invoke(cli, ["compare", str(tmp_path / "a.json"), str(tmp_path / "b.json")], env=env)
    assert files.exit_code == 0, files.output
    assert "exact-match" in files.output
    runs = CliRunner().invoke(cli, ["compare", "run-a", "run-b"], env=place)
    assert runs.exit_code == 2
    assert runs.output == (
        "error: run-a and run-b are not both saved result files here, so they would be runs on a server, and no "
        "server given: pass --server URL, set EVALSI_SERVER, or set client.server in ./evalsi.yaml or "
        "~/.config/evalsi/config.yaml (e.g. http://127.0.0.1:8080, which `evalsi serve` listens on)\n")


def test_run_states_have_names() -> None:
    assert state_name(RUN_STATE_SUCCEEDED) == "succeeded"
    assert state_name(RUN_STATE_BUDGET_EXCEEDED) == "budget_exceeded"
    assert state_name(99) == "unknown(99)"
    assert _state_number("Running") == 2
    with pytest.raises(BadInputError) as caught:
        _state_number("done")
    assert str(caught.value) == ("state: 'done' is not a run state; accepted: pending, running, succeeded, failed, "
                                 "cancelled, budget_exceeded")
    handle = RunHandle(runs=None, run=Run(id="run-1", project="qs", state=RUN_STATE_SUCCEEDED))  # type: ignore[arg-type]
    assert (handle.state, repr(handle)) == ("succeeded", "RunHandle(id='run-1', project='qs', state='succeeded')")

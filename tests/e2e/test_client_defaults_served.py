"""Where did my run go: against a real stack (bundled NATS, api, scheduler, workers on loopback), a run made in
project `quickstart` is found through the client's defaults, and a look in the wrong project says where it is."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from click.testing import CliRunner, Result

from evalsi.cli.main import cli
from evalsi.client import Client, RunHandle, state_name
from evalsi.service.config import WorkerConfig
from evalsi.testing.stack import Stack

ROOT = Path(__file__).resolve().parents[2]
SPEC = ROOT / "examples" / "runs" / "qa-outputs.yaml"  # its project: quickstart
HINT = "hint: choose the project with --project NAME or EVALSI_PROJECT=NAME (or client.project in ./evalsi.yaml)"


@pytest.fixture(scope="module")
def stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Stack]:
    # The spec's evaluators run on the cpu pool alone: no judge or harness worker needed.
    running = Stack(tmp_path_factory.mktemp("stack"), datasets_dir=ROOT / "examples",
                    workers=[WorkerConfig("cpu", 1, 8)]).start()
    try:
        yield running
    finally:
        running.stop()


@pytest.fixture
def env(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> dict[str, str | None]:
    work = tmp_path / "work"
    work.mkdir()
    monkeypatch.chdir(work)
    return {"HOME": str(tmp_path / "home"), "XDG_CONFIG_HOME": None, "EVALSI_SERVER": None, "EVALSI_PROJECT": None}


def evalsi(env: dict[str, str | None], *args: str) -> Result:
    return CliRunner().invoke(cli, list(args), env=env)


def test_a_run_in_another_project_is_found_and_pointed_to(stack: Stack, env: dict[str, str | None]) -> None:
    created = evalsi(env, "run", "-f", str(SPEC), "--server", stack.http, "--no-wait")
    assert created.exit_code == 0, created.output
    run_id = created.stdout.strip()
    assert (f"next:\n  evalsi runs watch {run_id} --server {stack.http} --project quickstart\n"
            f"  evalsi runs get {run_id} --server {stack.http} --project quickstart\n"
            f"  evalsi runs results {run_id} --server {stack.http} --project quickstart\n") in created.stderr
    with Client(stack.grpc, project="quickstart") as client:
        handle = client.runs.create(SPEC)
        finished = handle.wait()
        assert (handle.state, state_name(finished.state)) == ("succeeded", "succeeded")
        assert handle.id in [r.id for r in client.runs.list(state="succeeded")]
        assert RunHandle(client.runs, client.runs.get(run_id)).wait().id == run_id  # the CLI's run, finished

    missing = evalsi(env, "runs", "get", run_id, "--server", stack.http)
    assert missing.exit_code == 2
    assert missing.output == (f"error: id: run '{run_id}' not found in project 'default'; it is in project "
                              f"'quickstart'\n{HINT}\n")
    over_grpc = evalsi({**env, "EVALSI_SERVER": stack.grpc}, "runs", "results", run_id)
    assert over_grpc.exit_code == 2
    assert over_grpc.output.startswith(f"error: id: run '{run_id}' not found in project 'default'; it is in ")

    empty = evalsi(env, "runs", "list", "--server", stack.http)
    assert empty.exit_code == 0, empty.output
    assert empty.stderr == (f"no runs in project 'default' on {stack.http}; choose the project with --project NAME "
                            "or EVALSI_PROJECT=NAME (or client.project in ./evalsi.yaml), or list every project's "
                            "runs with --all-projects (a server on loopback only)\n")

    # EVALSI_PROJECT is only a default, which --all-projects replaces; a --project flag contradicts it.
    every = evalsi({**env, "EVALSI_SERVER": stack.grpc, "EVALSI_PROJECT": "elsewhere"},
                   "runs", "list", "--all-projects")
    assert every.exit_code == 0, every.output
    assert run_id in every.stdout and "quickstart" in every.stdout and "project" in every.stdout
    both = evalsi(env, "runs", "list", "--all-projects", "--project", "quickstart", "--server", stack.http)
    assert both.exit_code == 2
    assert both.output == "error: --all-projects lists every project's runs; give it or --project, not both\n"

    # The project's evalsi.yaml names the server and project: no flags at all.
    Path("evalsi.yaml").write_text(f"client:\n  server: {stack.grpc}\n  project: quickstart\n")
    found = evalsi(env, "runs", "get", run_id)
    assert found.exit_code == 0, found.output
    assert found.output.startswith(f"{run_id}  qa-outputs  [succeeded]\n")
    listed = evalsi(env, "runs", "list", "--format", "json")
    assert listed.exit_code == 0 and run_id in listed.stdout and '"state": "RUN_STATE_' in listed.stdout

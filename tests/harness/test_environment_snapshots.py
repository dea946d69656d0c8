"""Snapshots of a prepared environment between trials (Phase 3: set up once, snapshot, restore clones), on the real
bubblewrap rung in process and through a real evalsi-sandboxd: the setup runs once (its nanosecond stamp is the
same in every trial, the harness's counters say one setup and k-1 restores), every trial starts in a fresh sandbox
(a file one trial writes is absent from the next), the record says which snapshot it came from, `snapshot: false`
sets up per trial, a failing setup keeps no snapshot, and a run's trials share one setup. Through sandboxd, a
granted escalation is its Restore with the wider network."""

from __future__ import annotations

import asyncio
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from evalsi.harness.environment import environment_from_mapping
from evalsi.harness.environment_run import EnvironmentFailure, prepared
from evalsi.harness.environment_snapshots import SharedSetups
from evalsi.judges import RetryPolicy
from evalsi.records import from_value
from evalsi.runs.embedded import execute_run
from evalsi.runs.spec import load_eval_run
from evalsi.sandbox.access import LadderOpener
from evalsi.sandbox.config import SandboxConfig
from evalsi.sandbox.ladder import Ladder
from evalsi.testing import FakeOpenAI
from evalsi.testing.reachable_tmp import reachable_tmp_dir

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = ROOT / "examples" / "agents" / "env-fix"
# The stamp (random) proves which setup a trial's files came from; the sub-directory and mode that the snapshot
# keeps them.
ENVIRONMENT = {"files": {"a.txt": "from the environment\n"},
               "setup": ["python3 -c 'import secrets; print(secrets.token_hex(8))' > stamp; echo ran >> setup-runs; "
                         "mkdir -p sub && echo x > sub/y.sh && chmod 755 sub/y.sh"]}


@pytest.fixture(scope="module")
def cache() -> Iterator[Path]:
    """One sandbox cache for the module (its runtime image built once), where the sandbox's host user reaches it."""
    with reachable_tmp_dir("cache") as path:
        yield path


@pytest.fixture
def setups(tmp_path: Path, cache: Path, monkeypatch: pytest.MonkeyPatch) -> SharedSetups:
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))  # the workspaces land here, so leftovers are seen
    return SharedSetups(LadderOpener(Ladder(SandboxConfig(ladder=("bwrap",), cache_dir=cache))))


async def _trial(env_doc: dict, opener: object, write: str | None = None) -> tuple[str, dict | None, str]:
    """(what the trial saw: stamp, setup runs, files, its snapshot metadata, its sandbox id)."""
    env = environment_from_mapping(env_doc, "env")
    async with prepared(env, opener, "p") as session:  # type: ignore[arg-type]
        seen = await session.exec(["sh", "-c", "cat stamp setup-runs; ls -R; stat -c %a sub/y.sh"])
        assert seen.outcome.kind == "exit" and seen.outcome.code == 0, seen
        if write:
            await session.write_files({write: b"this trial's\n"})
        return seen.stdout.decode(), session.snapshot, session.id


async def test_trials_of_one_environment_share_one_setup_and_start_isolated(setups: SharedSetups,
                                                                            tmp_path: Path) -> None:
    first, first_snapshot, first_id = await _trial(ENVIRONMENT, setups, write="mine.txt")
    second, second_snapshot, second_id = await _trial(ENVIRONMENT, setups, write="mine.txt")
    third, third_snapshot, third_id = await _trial(ENVIRONMENT, setups)
    assert first == second == third  # same stamp (one setup), same files: mine.txt of a trial is not in the next
    assert "mine.txt" not in third and "a.txt" in first and first.count("ran") == 1 and first.endswith("755\n")
    assert len({first_id, second_id, third_id}) == 3  # a fresh sandbox each time
    assert first_snapshot is not None and second_snapshot is not None and third_snapshot is not None
    assert first_snapshot["restored"] is False and second_snapshot["restored"] is third_snapshot["restored"] is True
    assert first_snapshot["kind"] == "workspace" and first_snapshot["digest"].startswith("sha256:")
    assert first_snapshot["digest"] == second_snapshot["digest"] == third_snapshot["digest"]
    assert (setups.setups, setups.restores) == (1, 2)
    assert not list(tmp_path.glob("evalsi-ws-*"))  # every sandbox destroyed


async def test_concurrent_trials_wait_for_the_one_setup(setups: SharedSetups) -> None:
    seen = await asyncio.gather(*(_trial(ENVIRONMENT, setups) for _ in range(3)))
    assert len({stdout for stdout, _, _ in seen}) == 1
    assert sorted(snapshot["restored"] for _, snapshot, _ in seen) == [False, True, True]  # type: ignore[index]
    assert (setups.setups, setups.restores) == (1, 2)


async def test_another_environment_or_snapshot_false_sets_up_again(setups: SharedSetups) -> None:
    once, _, _ = await _trial(ENVIRONMENT, setups)
    changed, snapshot, _ = await _trial({**ENVIRONMENT, "files": {"a.txt": "other\n"}}, setups)
    assert once != changed and snapshot is not None and snapshot["restored"] is False
    fresh = [await _trial({**ENVIRONMENT, "snapshot": False}, setups) for _ in range(2)]
    assert fresh[0][0] != fresh[1][0] and fresh[0][1] is None  # a setup each, no snapshot said
    assert (setups.setups, setups.restores) == (2, 0)


async def test_a_failing_setup_keeps_no_snapshot(setups: SharedSetups, tmp_path: Path) -> None:
    broken = {"setup": ["echo half > stamp; exit 3"]}
    for _ in range(2):  # the second trial tries the setup again rather than restoring a half-prepared state
        with pytest.raises(EnvironmentFailure, match=r"setup\[0\] .* exited 3"):
            await _trial(broken, setups)
    assert (setups.setups, setups.restores) == (0, 0)
    assert not list(tmp_path.glob("evalsi-ws-*"))


async def test_a_runs_trials_share_one_setup_and_their_records_say_so(tmp_path: Path,
                                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.syspath_prepend(str(EXAMPLE))
    monkeypatch.chdir(tmp_path)  # no evalsi.yaml here: the default ladder
    from fix_model import reply

    async with FakeOpenAI(reply=reply) as model:
        run = load_eval_run(EXAMPLE / "env-fix.yaml")
        run.spec.target.model.base_url = model.base_url
        run.spec.trials = 3
        outcome = await execute_run(run, base_dir=EXAMPLE, retry=RetryPolicy(base_delay_s=0.001, max_delay_s=0.005))
    assert [r.scores[0].passed for r in outcome.results.run.results] == [True] * 3
    snapshots = [from_value(record.metadata["environment.snapshot"]) for record in outcome.records]
    assert sorted(s["restored"] for s in snapshots) == [False, True, True]
    assert len({s["digest"] for s in snapshots}) == 1


@pytest.fixture(scope="module")
def sandboxd() -> Iterator[str]:
    with pytest.MonkeyPatch.context() as patch:  # its helper lives beside the sandbox tests
        patch.syspath_prepend(str(ROOT / "tests" / "sandbox"))
        from sandboxd_process import running_sandboxd

        with reachable_tmp_dir("sbxd") as directory, running_sandboxd(directory) as (address, _):
            yield address


async def test_through_sandboxd_trials_restore_its_snapshot(sandboxd: str) -> None:
    from evalsi.sandbox.sandboxd_opener import SandboxdOpener

    opener = SandboxdOpener(sandboxd)
    setups = SharedSetups(opener)
    try:
        first, first_snapshot, _ = await _trial(ENVIRONMENT, setups, write="mine.txt")
        second, second_snapshot, _ = await _trial(ENVIRONMENT, setups)
    finally:
        await opener.close()
    assert first == second and "mine.txt" not in second
    assert first_snapshot is not None and second_snapshot is not None
    assert (first_snapshot["kind"], first_snapshot["restored"], second_snapshot["restored"]) == (
        "sandboxd", False, True)
    assert first_snapshot["id"] == second_snapshot["id"] and first_snapshot["id"].startswith("snap-")
    assert (setups.setups, setups.restores) == (1, 1)


async def test_through_sandboxd_a_granted_escalation_restores_with_the_wider_network(sandboxd: str) -> None:
    import http.server
    import threading

    from evalsi.harness.sandbox_tools import sandbox_tools
    from evalsi.sandbox.sandboxd_opener import SandboxdOpener

    class Handler(http.server.BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            self.send_response(200)
            self.send_header("Content-Length", "3")
            self.end_headers()
            self.wfile.write(b"hi\n")

        def log_message(self, *args: object) -> None:
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    endpoint = f"127.0.0.1:{server.server_address[1]}"
    fetch = f"python3 -c \"import urllib.request; print(urllib.request.urlopen('http://{endpoint}/').read())\""
    opener = SandboxdOpener(sandboxd)
    env = environment_from_mapping({"files": {"a.txt": "kept\n"}, "escalation": {"allow": {"network": [endpoint]}},
                                    "snapshot": False}, "env")
    try:
        async with prepared(env, opener, "p") as session:
            tools = sandbox_tools(session)
            first = session.id
            answer = await tools["request_escalation"].call({"network": [endpoint], "reason": "fetch"})
            assert answer.value == {"granted": True, "why": f"granted: egress to {endpoint}", "network": [endpoint]}
            assert session.id != first and "logging proxy" in session.isolation.bounds["network"]
            fetched = await tools["run_shell"].call({"command": f"cat a.txt; {fetch}"})
            assert fetched.value["stdout"] == "kept\nb'hi\\n'\n", fetched
            file_access = await tools["request_escalation"].call({"file_access": "workspace-write", "reason": "r"})
            assert file_access.error is not None and file_access.error.startswith("escalation refused")
    finally:
        await opener.close()
        server.shutdown()
        server.server_close()

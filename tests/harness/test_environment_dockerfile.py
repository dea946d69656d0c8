"""A harness environment whose root is built from a Dockerfile (examples/environments/dockerfile), embedded on the
real bubblewrap rung: the scripted model fixes the file the image put in its WORKDIR and the checker passes; the
record's provenance names the image's digest; a record whose Dockerfile's RUN fails, or whose Dockerfile is outside
the subset, is an infrastructure error naming the line; the reader reads no file; a restored trial keeps what its
setup removed."""

from __future__ import annotations

import json
import shutil
import tempfile
from pathlib import Path

import pytest

from evalsi.errors import BadInputError
from evalsi.harness.environment import environment_from_mapping
from evalsi.harness.environment_run import prepared
from evalsi.harness.environment_snapshots import SharedSetups
from evalsi.judges import RetryPolicy
from evalsi.runs.embedded import execute_run
from evalsi.runs.spec import load_eval_run
from evalsi.sandbox.access import LadderOpener
from evalsi.sandbox.image_build import find_image
from evalsi.sandbox.model import RootFilesystem
from evalsi.testing import FakeOpenAI
from evalsi.v1alpha1.run_pb2 import RUN_STATE_SUCCEEDED
from evalsi.v1alpha1.score_pb2 import ERROR_KIND_INFRA, OUTCOME_ERROR, OUTCOME_SCORED

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = ROOT / "examples" / "environments" / "dockerfile"
FAST = RetryPolicy(base_delay_s=0.001, max_delay_s=0.005)


@pytest.fixture(autouse=True)
def task(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """The example copied into this test's directory, run from there (its paths are relative to the working
    directory) with a sandbox cache of its own, so every build starts cold."""
    shutil.copytree(EXAMPLE, tmp_path / "task")
    (tmp_path / "task" / "evalsi.yaml").write_text(f"sandbox:\n  cache_dir: {tmp_path / 'cache'}\n")
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    monkeypatch.syspath_prepend(str(ROOT / "examples" / "agents" / "env-fix"))  # fix_model, the scripted model
    monkeypatch.chdir(tmp_path / "task")
    return tmp_path / "task"


async def test_the_agent_fixes_the_images_file_and_the_checker_passes(task: Path, tmp_path: Path) -> None:
    from fix_model import reply

    async with FakeOpenAI(reply=reply) as model:
        run_spec = load_eval_run(task / "env.yaml")
        run_spec.spec.target.model.base_url = model.base_url
        outcome = await execute_run(run_spec, base_dir=task, retry=FAST)
    run = outcome.results.run
    assert run.state == RUN_STATE_SUCCEEDED, run.message
    assert [(r.outcome, r.scores[0].passed, r.scores[0].explanation) for r in run.results] == [
        (OUTCOME_SCORED, True, "3/3 cases pass")]
    assert all(gate.passed for gate in run.gates)
    # What the agent read was the file COPY put in the image's WORKDIR, now its workspace.
    assert model.requests[1]["messages"][-1]["content"] == "def add(a, b):\n    return a - b\n"
    root = environment_from_mapping({"root": {"dockerfile": "Dockerfile"}}, "env").root
    assert root is not None
    image = find_image(root, tmp_path / "cache")
    [record] = outcome.records
    assert f"root: dockerfile {image.digest} (Dockerfile) read-only" in record.provenance.isolation.enforced
    assert (image.path / "app" / "BUILD_INFO").read_text() == "built with 3 cases\n"
    assert (image.path / "app" / "calc.py").read_text() == "def add(a, b):\n    return a - b\n"  # image unchanged
    assert not list(tmp_path.glob("evalsi-ws-*"))  # the sandbox was destroyed


async def test_a_failing_run_step_is_the_records_infra_error_naming_the_line(task: Path) -> None:
    from fix_model import reply

    (task / "broken").mkdir()
    (task / "broken" / "Dockerfile").write_text("FROM evalsi/runtime\nRUN echo cannot fetch deps >&2; exit 4\n")
    rows = [{"id": "fix-add", "input": "Fix calc.py."},
            {"id": "broken", "input": "Fix calc.py.",
             "metadata": {"environment": {"root": {"dockerfile": "broken/Dockerfile"}, "check": "true"}}}]
    (task / "rows.jsonl").write_text("".join(json.dumps(row) + "\n" for row in rows))
    async with FakeOpenAI(reply=reply) as model:
        run_spec = load_eval_run(task / "env.yaml")
        run_spec.spec.target.model.base_url = model.base_url
        run_spec.spec.dataset.path = "rows.jsonl"
        del run_spec.spec.gates[:]
        outcome = await execute_run(run_spec, base_dir=task, retry=FAST)
    results = {r.record_id: r for r in outcome.results.run.results}
    assert results["fix-add"].outcome == OUTCOME_SCORED and results["fix-add"].scores[0].passed
    assert (results["broken"].outcome, results["broken"].error_kind) == (OUTCOME_ERROR, ERROR_KIND_INFRA)
    assert "broken/Dockerfile:2: RUN" in results["broken"].reason
    assert "exited 4: cannot fetch deps" in results["broken"].reason


async def test_a_dockerfile_outside_the_subset_fails_each_record_naming_the_line(task: Path) -> None:
    from fix_model import reply

    (task / "Dockerfile").write_text("FROM evalsi/runtime\nEXPOSE 8080\n")
    async with FakeOpenAI(reply=reply) as model:
        run_spec = load_eval_run(task / "env.yaml")
        run_spec.spec.target.model.base_url = model.base_url
        del run_spec.spec.gates[:]
        outcome = await execute_run(run_spec, base_dir=task, retry=FAST)
    [result] = outcome.results.run.results
    assert (result.outcome, result.error_kind) == (OUTCOME_ERROR, ERROR_KIND_INFRA)
    assert "Dockerfile:2: EXPOSE: not supported" in result.reason and "accepted: FROM, RUN" in result.reason
    assert not model.requests  # the agent never started


def test_the_reader_checks_the_roots_shape_and_reads_no_file(task: Path) -> None:
    secret = task / "secret"
    secret.write_text("root:$6$not-for-the-caller rest\n")
    # The API reads specs too: a path a caller chose is not opened there (the build reads it, embedded).
    environment = environment_from_mapping({"root": {"dockerfile": str(secret), "context": "/"}}, "env")
    assert environment.root == RootFilesystem("dockerfile", str(secret), "/")
    with pytest.raises(BadInputError, match=r"spec.harness.environment.root.tag: unknown key"):
        environment_from_mapping({"root": {"dockerfile": "Dockerfile", "tag": "x"}}, "spec.harness.environment")
    with pytest.raises(BadInputError, match=r"spec.harness.environment.root.dockerfile: expected a path"):
        environment_from_mapping({"root": {"dockerfile": ""}}, "spec.harness.environment")
    with pytest.raises(BadInputError, match=r"spec.harness.environment.root.context: expected a path"):
        environment_from_mapping({"root": {"dockerfile": "D", "context": 3}}, "spec.harness.environment")


async def test_a_trial_restored_from_a_snapshot_has_the_setups_files_not_the_images_again(task: Path) -> None:
    env = environment_from_mapping({"root": {"dockerfile": "Dockerfile"},
                                    "setup": ["rm test_calc.py && echo 1 > n"]}, "env")
    setups = SharedSetups(LadderOpener())
    listings = []
    for _ in range(2):
        async with prepared(env, setups, project="default", run_id="r1") as session:
            listings.append((await session.exec(["sh", "-c", "ls"])).stdout.decode().split())
    assert (setups.setups, setups.restores) == (1, 1)
    assert listings == [["BUILD_INFO", "calc.py", "n"]] * 2  # what the setup removed stays removed

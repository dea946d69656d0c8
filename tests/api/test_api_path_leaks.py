"""Errors an API caller sees never reveal the server's absolute paths or where a symbolic link leads: dataset
paths are named relative to the datasets directory (as the caller wrote them), object-store errors relative to
its root; and no request makes the server read a file its evaluator params name. The run handlers are wired as
evalsi-api wires them (the real validation and loader)."""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator
from functools import partial
from pathlib import Path

import pytest
from google.protobuf import json_format

from evalsi.api import EvaluationHandlers, MonitorHandlers, RunHandlers, load_run_dataset
from evalsi.api.context import CallContext
from evalsi.api.errors import error_status
from evalsi.errors import BadInputError, InfraError
from evalsi.evaluators import Registry
from evalsi.policy import parse_policy_text
from evalsi.runs.spec import validate_eval_run
from evalsi.stores import LocalObjectStore, SqlMetadataStore
from evalsi.v1alpha1.evaluation_service_pb2 import EvaluateRequest, EvaluateResponse
from evalsi.v1alpha1.monitor_service_pb2 import ApplyPolicyRequest
from evalsi.v1alpha1.run_pb2 import EvalRun
from evalsi.v1alpha1.run_service_pb2 import CreateRunRequest

REGISTRY = Registry.from_entry_points()


@pytest.fixture
def server_files(tmp_path: Path) -> Path:
    """The server's tree: datasets/ (reached through a link, as /srv/data -> /mnt/disk often is) and a private
    directory outside it holding a secret file and a directory."""
    real = tmp_path / "disk" / "datasets"
    (real / "sub").mkdir(parents=True)
    (tmp_path / "datasets").symlink_to(real)
    private = tmp_path / "private-7ae1"
    (private / "dir").mkdir(parents=True)
    (private / "secret.jsonl").write_text('{"id": "s", "input": "secret"}\n')
    (real / "ok.jsonl").write_text('{"id": "a", "output": "x", "reference": "x"}\n')
    (real / "bad.jsonl").write_text('{"id": "a", "output": "x"}\n{oops\n')
    (real / "escape.jsonl").symlink_to(private / "secret.jsonl")
    (real / "escape-dir").symlink_to(private / "dir")
    (real / "alias.jsonl").symlink_to(real / "bad.jsonl")  # inside: allowed, but its target is not said
    (real / "dangling.jsonl").symlink_to(private / "gone.jsonl")
    return tmp_path


@pytest.fixture
async def runs(server_files: Path) -> AsyncIterator[RunHandlers]:
    datasets = (server_files / "datasets").resolve()  # as evalsi-api resolves --datasets-dir
    store = await SqlMetadataStore.open_sqlite(server_files / "evalsi.db")

    async def control(_message: object) -> None:
        return None

    try:
        yield RunHandlers(
            store=store,
            objects=LocalObjectStore(server_files / "objects"),
            control=control,
            watch=None,  # type: ignore[arg-type]
            validate_run=partial(validate_eval_run, registry=REGISTRY, datasets_dir=datasets),
            load_records=partial(load_run_dataset, datasets_dir=datasets),
        )
    finally:
        await store.close()


def run_with(path: str) -> EvalRun:
    return json_format.ParseDict(
        {"apiVersion": "evals.si/v1alpha1", "kind": "EvalRun", "metadata": {"name": "r"},
         "spec": {"dataset": {"path": path}, "evaluators": [{"ref": "builtin/exact-match"}]}},
        EvalRun(),
    )


OUTSIDE = (
    "leads outside the allowed datasets directory (through '..', an absolute path or a symbolic link); give the "
    "path of a file under that directory, relative to it"
)


@pytest.mark.parametrize(
    ("path", "message"),
    [
        ("escape.jsonl", f"spec.dataset.path: 'escape.jsonl' {OUTSIDE}"),
        ("escape-dir/secret.jsonl", f"spec.dataset.path: 'escape-dir/secret.jsonl' {OUTSIDE}"),
        ("../private-7ae1/secret.jsonl", f"spec.dataset.path: '../private-7ae1/secret.jsonl' {OUTSIDE}"),
        ("missing.jsonl", "spec.dataset.path: 'missing.jsonl': no such file in the datasets directory"),
        ("dangling.jsonl", f"spec.dataset.path: 'dangling.jsonl' {OUTSIDE}"),
        ("sub", "spec.dataset.path: 'sub': no such file in the datasets directory"),
        ("bad.jsonl", "spec.dataset.path: bad.jsonl:2: not valid JSON (Expecting property name enclosed in double "
                      "quotes at column 2); each line must hold one JSON object"),
        ("alias.jsonl", "spec.dataset.path: alias.jsonl:2: not valid JSON (Expecting property name enclosed in double "
                        "quotes at column 2); each line must hold one JSON object"),
        ("ok.jsonl\0", "spec.dataset.path: contains a NUL character, which no file name holds"),
    ],
)
async def test_create_run_errors_name_paths_as_given(
    runs: RunHandlers, server_files: Path, path: str, message: str
) -> None:
    ctx = CallContext(method="CreateRun", request_id="r1")
    with pytest.raises(BadInputError) as raised:
        await runs.create_run(CreateRunRequest(run=run_with(path), dry_run=True), ctx)
    status = error_status(raised.value, request_id="r1", method="CreateRun", logger=logging.getLogger())
    assert (status.http_status, status.message) == (400, message)
    assert str(server_files) not in status.message and "private-7ae1/" not in status.message.replace(path, "")


async def test_an_absolute_path_inside_is_named_relative_to_the_datasets_directory(
    runs: RunHandlers, server_files: Path
) -> None:
    ctx = CallContext(method="CreateRun", request_id="r2")
    inside = str(server_files / "datasets" / "ok.jsonl")
    run = await runs.create_run(CreateRunRequest(run=run_with(inside), dry_run=True), ctx)
    assert run.message.startswith("dry run: ")
    with pytest.raises(BadInputError) as raised:
        await runs.create_run(CreateRunRequest(run=run_with(str(server_files / "disk/datasets/bad.jsonl")),
                                               dry_run=True), ctx)
    assert str(raised.value).startswith("spec.dataset.path: bad.jsonl:2: not valid JSON")


async def test_object_store_errors_name_no_server_path(tmp_path: Path) -> None:
    root = tmp_path / "objects-91c"
    objects = LocalObjectStore(root)
    with pytest.raises(KeyError) as missing:
        await objects.get("sha256/" + "0" * 64)
    assert str(root) not in str(missing.value) and "not found in the object store" in str(missing.value)
    # A file where the store's temporary directory should be: the write fails with an OS error.
    (root / ".tmp").rmdir()
    (root / ".tmp").write_text("")
    with pytest.raises(InfraError) as failed:
        await objects.put(b"data")
    assert str(tmp_path) not in str(failed.value)
    assert str(failed.value).startswith("object store: Not a directory")


SECRET_LINE = "db_password: hunter2-never-shown: x"  # a YAML error would quote this line back


async def test_no_request_makes_the_server_read_a_file_it_names(runs: RunHandlers, tmp_path: Path) -> None:
    """Evaluate, a run spec and a policy alike: an evaluator param naming a file is refused before anything binds
    (binding json-schema's schema_file reads and parses the file, and its parse error quotes the file's lines)."""
    private = tmp_path / "server-secret.yaml"
    private.write_text(SECRET_LINE + "\n")
    ctx = CallContext(method="Evaluate", request_id="r3")
    evaluation = EvaluationHandlers(_never_called, registry=REGISTRY)
    request = json_format.ParseDict(
        {"records": [{"output": {"json": {}}}],
         "evaluators": [{"ref": "builtin/exact-match"}, {"ref": "builtin/json-schema",
                                                         "params": {"schema_file": str(private)}}]},
        EvaluateRequest(),
    )
    refusals = []
    with pytest.raises(BadInputError) as raised:
        await evaluation.evaluate(request, ctx)
    refusals.append(str(raised.value))

    run = run_with("ok.jsonl")
    run.spec.evaluators[0].ref = "builtin/prompt-judge"
    run.spec.evaluators[0].params.update({"template_file": str(private)})
    with pytest.raises(BadInputError) as raised:
        await runs.create_run(CreateRunRequest(run=run, dry_run=True), ctx)
    refusals.append(str(raised.value))

    store = await SqlMetadataStore.open_sqlite(tmp_path / "policies.db")
    try:
        policy = parse_policy_text(
            "apiVersion: evals.si/v1alpha1\nkind: OnlineEvalPolicy\nmetadata: {name: p}\nspec:\n  cascade:\n"
            f"    - {{ref: builtin/json-schema, params: {{schema_file: '{private}'}}}}\n", source="p.yaml")
        with pytest.raises(BadInputError) as raised:
            await MonitorHandlers(store, None, registry=REGISTRY).apply_policy(ApplyPolicyRequest(policy=policy), ctx)
        refusals.append(str(raised.value))
        assert await store.list_policies("default") == []
    finally:
        await store.close()
    refused = "a server reads no file a request names (it would disclose the server's files); "
    assert refusals == [
        f"evaluators[1].params.schema_file: {refused}give the schema inline (params.schema)",
        f"spec.evaluators[0].params.template_file: {refused}prompt-judge with a template file runs embedded only "
        "(evalsi eval, evalsi run)",
        f"spec.cascade[0].params.schema_file: {refused}give the schema inline (params.schema)",
    ]
    assert all("hunter2" not in message for message in refusals)


async def _never_called(request: EvaluateRequest, *args: object) -> EvaluateResponse:
    raise AssertionError("a refused request reached the workers")

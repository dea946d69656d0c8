"""Datasets through the API: a run's records go once into shards (never one blob); a file uploaded over HTTP or
gRPC becomes a stored version that a run names by ref, used as stored; uploads are bounded and refused by name."""

from __future__ import annotations

import asyncio
import json
import urllib.error
import urllib.request
from collections.abc import AsyncIterator, Iterable
from functools import partial
from pathlib import Path

import pytest
from api_doubles import Api
from google.protobuf import json_format

import evalsi
from evalsi.api import DATASET_LABEL, CallContext, HandlerLimits
from evalsi.api.datasets_handlers import UPLOAD_RPC
from evalsi.api.run_dataset import count_run_dataset, describe_run_dataset, load_run_dataset
from evalsi.bus.v1alpha1.bus_pb2 import TaskRecords
from evalsi.datasets import load_dataset
from evalsi.datasets.shards import read_manifest
from evalsi.datasets.stored import DatasetStore
from evalsi.errors import BadInputError
from evalsi.evaluators import Registry
from evalsi.stores.objects import LocalObjectStore
from evalsi.v1alpha1.record_pb2 import Record
from evalsi.v1alpha1.run_pb2 import EvalRun
from evalsi.v1alpha1.run_service_pb2 import CreateRunRequest

UPLOAD_LIMIT = 256 * 1024


def ctx(project: str = "p") -> CallContext:
    return CallContext(method="test", request_id="req-1", project=project, header_project=project)


def eval_run(dataset: dict[str, object], project: str = "p") -> EvalRun:
    return json_format.ParseDict(
        {
            "metadata": {"name": "n", "project": project},
            "spec": {"dataset": dataset, "evaluators": [{"ref": "exact-match"}]},
        },
        EvalRun(),
    )


def write_rows(path: Path, rows: int) -> Path:
    with path.open("w") as f:
        for i in range(rows):
            f.write(json.dumps({"id": f"r{i}", "output": str(i % 3), "reference": "1"}) + "\n")
    return path


def stored_objects(root: Path) -> set[str]:
    return {str(p.relative_to(root)) for p in root.rglob("*") if p.is_file() and p.relative_to(root).parts[0] ==
            "sha256"}


@pytest.fixture
async def served(registry: Registry, datasets_dir: Path, tmp_path: Path) -> AsyncIterator[Api]:
    api = Api(registry, datasets_dir, HandlerLimits(max_dataset_upload_bytes=UPLOAD_LIMIT),
              objects=LocalObjectStore(tmp_path / "objects"))
    await api.start()
    yield api
    assert api.server is not None
    await api.server.stop()


async def test_a_run_stores_its_records_as_shards_and_a_manifest(served: Api, datasets_dir: Path,
                                                                  tmp_path: Path) -> None:
    data = write_rows(datasets_dir / "big.jsonl", 1234)  # three shards of the plan's 500
    run = await served.runs.create_run(CreateRunRequest(run=eval_run({"path": "big.jsonl"})), ctx())
    manifest = await read_manifest(served.objects, run.labels[DATASET_LABEL])
    assert [s.records for s in manifest.shards] == [500, 500, 234]
    # What was written is the shards and the manifest: no blob holding every record.
    assert stored_objects(tmp_path / "objects") == {run.labels[DATASET_LABEL], *(s.key for s in manifest.shards)}
    assert max(s.bytes for s in manifest.shards) < data.stat().st_size / 2
    expected = load_dataset(data, mapping=None)
    read = [r for s in manifest.shards for r in TaskRecords.FromString(await served.objects.get(s.key)).records]
    assert [r.id for r in read] == [r.id for r in expected.records]
    assert [r.output for r in read] == [r.output for r in expected.records]
    assert manifest.version == run.manifest.dataset_version == expected.version
    assert run.progress.total_tasks == 3  # from the manifest: one evaluation task per shard


async def test_an_upload_over_http_is_a_version_a_run_names_by_ref(served: Api, tmp_path: Path) -> None:
    data = write_rows(tmp_path / "local.jsonl", 1100)
    with evalsi.Client(served.http) as client:
        version = await asyncio.to_thread(client.datasets.push, data, name="qa", project="p")
        assert (version.name, version.records, version.version) == ("qa", 1100, load_dataset(data).version)
        assert version.ref == f"datasets/qa@{version.version}"
        # The same file again over gRPC is the same version, not a second one.
        with evalsi.Client(f"grpc://{served.grpc_target}") as over_grpc:
            again = await asyncio.to_thread(over_grpc.datasets.push, data, name="qa", project="p")
        assert again.version == version.version
        listed = await asyncio.to_thread(client.datasets.versions, "qa", project="p")
        assert [v.version for v in listed] == [version.version]

    before = stored_objects(tmp_path / "objects")
    run = await served.runs.create_run(CreateRunRequest(run=eval_run({"ref": version.ref})), ctx())
    assert stored_objects(tmp_path / "objects") == before  # the stored version is used as it is: nothing copied
    manifest = await read_manifest(served.objects, run.labels[DATASET_LABEL])
    assert (manifest.records, run.manifest.dataset_version) == (1100, version.version)
    assert run.manifest.dataset == version.ref and run.progress.total_tasks == 3
    latest = await served.runs.create_run(CreateRunRequest(run=eval_run({"ref": "datasets/qa"})), ctx())
    assert latest.labels[DATASET_LABEL] == run.labels[DATASET_LABEL]


async def test_a_served_run_of_a_local_file_uploads_it(served: Api, tmp_path: Path) -> None:
    data = write_rows(tmp_path / "mine.jsonl", 20)
    spec = tmp_path / "run.yaml"
    spec.write_text(
        "apiVersion: evals.si/v1alpha1\nkind: EvalRun\nmetadata: {name: n, project: p}\n"
        "spec:\n  dataset: {path: mine.jsonl, limit: 12}\n  evaluators: [{ref: exact-match}]\n"
    )
    with evalsi.Client(served.http) as client:
        handle = await asyncio.to_thread(client.runs.create, spec)
    run = handle.run
    assert run.spec.dataset.ref.startswith("datasets/mine@") and not run.spec.dataset.limit
    assert run.manifest.dataset_version == load_dataset(data, limit=12).version  # the limit applied on upload
    stored = await served.store.get_run("p", run.id)
    assert stored is not None and (await read_manifest(served.objects, stored.labels[DATASET_LABEL])).records == 12


async def test_uploads_over_the_limit_or_with_bad_input_are_refused_by_name(served: Api, tmp_path: Path) -> None:
    big = write_rows(tmp_path / "big.jsonl", 20_000)
    assert big.stat().st_size > UPLOAD_LIMIT

    def post(name: str, body: bytes, query: str = "filename=x.jsonl", chunked: bool = False) -> tuple[int, str]:
        headers = {} if chunked else {"content-length": str(len(body))}
        data = iter([body[i : i + 65536] for i in range(0, len(body), 65536)]) if chunked else body
        request = urllib.request.Request(f"{served.http}/v1alpha1/datasets/{name}:upload?{query}", data=data,
                                         method="POST", headers=headers)
        try:
            with urllib.request.urlopen(request) as response:
                return response.status, response.read().decode()
        except urllib.error.HTTPError as exc:
            return exc.code, json.loads(exc.read())["message"]

    body = big.read_bytes()
    status, message = await asyncio.to_thread(post, "big", body)
    assert status == 413 and "max_dataset_upload_bytes" in message and str(UPLOAD_LIMIT) in message
    status, message = await asyncio.to_thread(post, "big", body, chunked=True)  # no length given: counted
    assert status == 413 and "max_dataset_upload_bytes" in message
    status, message = await asyncio.to_thread(post, "bad%20name", b'{"id": "a"}\n')
    assert status == 400 and message.startswith("dataset name 'bad name'")
    status, message = await asyncio.to_thread(post, "d", b'{"id": "a"}\nnot json\n', "filename=rows.jsonl")
    assert status == 400 and message.startswith("rows.jsonl:2: not valid JSON")
    status, message = await asyncio.to_thread(post, "d", b"a,b\n", "filename=rows.txt")
    assert status == 400 and "cannot tell the format" in message
    status, message = await asyncio.to_thread(post, "d", b'{"id": "a"}\n', "filename=r.jsonl&limit=x")
    assert status == 400 and message.startswith("limit:")
    with evalsi.Client(f"grpc://{served.grpc_target}") as client, pytest.raises(BadInputError) as refused:
        await asyncio.to_thread(client.datasets.push, big, name="big", project="p")
    assert "max_dataset_upload_bytes" in str(refused.value)
    assert stored_objects(tmp_path / "objects") == set()  # nothing refused was stored


async def test_a_run_over_a_stored_dataset_refuses_options_for_reading_files(served: Api, tmp_path: Path) -> None:
    with evalsi.Client(served.http) as client:
        version = await asyncio.to_thread(client.datasets.push, write_rows(tmp_path / "d.jsonl", 3), project="p")
    for field, value in (("mapping", {"input": "q"}), ("limit", 2), ("format", "csv")):
        with pytest.raises(BadInputError, match=rf"^spec\.dataset\.{field}: applies when reading a file"):
            await served.runs.create_run(CreateRunRequest(run=eval_run({"ref": version.ref, field: value})), ctx())
    with pytest.raises(BadInputError, match="has no dataset 'nope'"):
        await served.runs.create_run(CreateRunRequest(run=eval_run({"ref": "datasets/nope"})), ctx())


async def test_the_cli_pushes_and_lists_datasets(served: Api, tmp_path: Path) -> None:
    from click.testing import CliRunner

    from evalsi.cli.main import cli

    data = tmp_path / "questions.csv"
    data.write_text("id,question,answer\n1,a?,x\n2,b?,y\n3,c?,z\n")
    runner = CliRunner()
    pushed = await asyncio.to_thread(
        runner.invoke, cli, ["datasets", "push", str(data), "--server", served.http, "--project", "p",
                             "--map", "input=question", "--map", "reference=answer", "--limit", "2"],
    )
    assert pushed.exit_code == 0, pushed.output
    ref = pushed.stdout.strip().splitlines()[-1]
    assert ref.startswith("datasets/questions@")
    listed = await asyncio.to_thread(
        runner.invoke, cli, ["datasets", "list", "questions", "--server", f"grpc://{served.grpc_target}",
                             "--project", "p", "--format", "json"],
    )
    assert listed.exit_code == 0, listed.output
    [version] = json.loads(listed.stdout)
    assert version["ref"] == ref and version["records"] == "2"
    stored = await DatasetStore(served.objects).load("p", ref)  # the mapping applied as the server read it
    assert [(r.input.text, r.reference.text) for r in stored.records] == [("a?", "x"), ("b?", "y")]
    refused = await asyncio.to_thread(
        runner.invoke, cli, ["datasets", "push", str(tmp_path / "missing.jsonl"), "--server", served.http],
    )
    assert refused.exit_code == 2 and "missing.jsonl: cannot read" in refused.output


async def test_a_dataset_refused_at_its_last_row_leaves_nothing_stored(
        served: Api, datasets_dir: Path, tmp_path: Path) -> None:
    # A bad row after two shards' worth: those shards were cut (and spooled) as the file was read, but none reaches
    # the object store before the last row is read, so a refused dataset leaves no shard nobody references.
    data = write_rows(datasets_dir / "late-error.jsonl", 1000)
    with data.open("a") as f:
        f.write("not json\n")
    with pytest.raises(BadInputError, match=r"^spec\.dataset\.path: late-error\.jsonl:1001: not valid JSON"):
        await served.runs.create_run(CreateRunRequest(run=eval_run({"path": "late-error.jsonl"})), ctx())
    assert stored_objects(tmp_path / "objects") == set() and served.store.runs == {}
    # The same file without its bad row is stored: two shards and the manifest.
    write_rows(datasets_dir / "late-error.jsonl", 1000)
    await served.runs.create_run(CreateRunRequest(run=eval_run({"path": "late-error.jsonl"})), ctx())
    assert len(stored_objects(tmp_path / "objects")) == 3


async def test_an_upload_over_http_is_counted_and_answered_like_every_other_call(served: Api, tmp_path: Path) -> None:
    # The upload route shares the unary calls' wrapper: its calls are counted by status code, its errors map to
    # statuses, its answers carry the request id, and a deadline header is read as everywhere else.
    def post(query: str, headers: dict[str, str]) -> tuple[int, dict[str, str], str]:
        request = urllib.request.Request(f"{served.http}/v1alpha1/datasets/counted:upload?{query}",
                                         data=b'{"id": "a", "output": "x"}\n', method="POST", headers=headers)
        try:
            with urllib.request.urlopen(request) as response:
                return response.status, dict(response.headers), response.read().decode()
        except urllib.error.HTTPError as exc:
            return exc.code, dict(exc.headers), exc.read().decode()

    def calls(code: str) -> float:
        labels = {"transport": "http", "rpc": UPLOAD_RPC, "code": code}
        return served.metrics.registry.get_sample_value("evalsi_api_requests_total", labels) or 0.0

    status, headers, body = await asyncio.to_thread(post, "filename=r.jsonl&project=p", {"x-request-id": "up-1"})
    assert (status, headers["x-request-id"], json.loads(body)["records"]) == (200, "up-1", "1")
    status, headers, body = await asyncio.to_thread(post, "filename=r.jsonl", {"x-evalsi-timeout": "soon"})
    assert status == 400 and json.loads(body)["message"].startswith("x-evalsi-timeout header: expected seconds")
    status, _, body = await asyncio.to_thread(post, "filename=r.txt", {})
    assert status == 400 and "cannot tell the format" in json.loads(body)["message"]
    assert (calls("OK"), calls("INVALID_ARGUMENT")) == (1.0, 2.0)
    assert served.metrics.registry.get_sample_value("evalsi_api_requests_in_flight", {"transport": "http"}) == 0.0


async def test_a_dry_run_counts_a_dataset_without_holding_its_records(datasets_dir: Path, tmp_path: Path) -> None:
    # A file is read through (and checked) without a Record made; a stored version is counted from its manifest
    # alone: its shards are gone here, and counting it still works.
    data = write_rows(datasets_dir / "count.jsonl", 1234)
    objects = LocalObjectStore(tmp_path / "objects")
    open_records = partial(load_run_dataset, datasets_dir=datasets_dir)
    counted = await count_run_dataset(eval_run({"path": "count.jsonl"}), project="p", objects=objects,
                                      open_records=open_records)
    assert (counted.records, counted.version, counted.source) == (1234, load_dataset(data).version, "count.jsonl")
    assert stored_objects(tmp_path / "objects") == set()  # nothing stored
    version = await DatasetStore(objects).push("p", "qa", load_dataset(data).records, format="jsonl")
    for shard in (tmp_path / "objects" / "sha256").iterdir():
        if shard.name != version.key.removeprefix("sha256/"):
            shard.unlink()
    by_ref = await count_run_dataset(eval_run({"ref": "datasets/qa"}), project="p", objects=objects,
                                     open_records=open_records)
    assert (by_ref.records, by_ref.version) == (1234, version.version)
    with data.open("a") as f:
        f.write("[1]\n")
    with pytest.raises(BadInputError, match=r"^spec\.dataset\.path: count\.jsonl:1235: expected an object"):
        await count_run_dataset(eval_run({"path": "count.jsonl"}), project="p", objects=objects,
                                open_records=open_records)


async def test_a_dry_run_describes_a_dataset_from_its_records_read_once_one_at_a_time(
    datasets_dir: Path, tmp_path: Path
) -> None:
    # The describer sees an iterator (never a list), and the records it reads are the dataset's, in order: a file
    # read through, a stored version a shard at a time.
    data = write_rows(datasets_dir / "described.jsonl", 1234)
    expected = [r.id for r in load_dataset(data).records]
    objects = LocalObjectStore(tmp_path / "objects")
    open_records = partial(load_run_dataset, datasets_dir=datasets_dir)
    seen: list[list[str]] = []

    def describe(records: Iterable[Record]) -> str:
        assert not isinstance(records, list | tuple)
        seen.append([r.id for r in records])
        return f"{len(seen[-1])} records"

    text, counted = await describe_run_dataset(eval_run({"path": "described.jsonl"}), project="p", objects=objects,
                                               open_records=open_records, describe=describe)
    assert (text, counted.records, counted.version) == ("1234 records", 1234, load_dataset(data).version)
    version = await DatasetStore(objects).push("p", "qa", load_dataset(data).records, format="jsonl")
    text, counted = await describe_run_dataset(eval_run({"ref": "datasets/qa"}), project="p", objects=objects,
                                               open_records=open_records, describe=describe)
    assert (text, counted.records, counted.version) == ("1234 records", 1234, version.version)
    assert seen == [expected, expected]

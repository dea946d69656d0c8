"""``evalsi.Client``: the server's API from Python, over gRPC (``grpc://host:8081``) or HTTP/JSON
(``http://host:8080``). Both transports derive every call from the proto descriptors, so the client never
hand-mirrors a route or a message.
"""

from __future__ import annotations

import json
import re
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Iterator, Mapping, Sequence
from datetime import datetime
from pathlib import Path
from typing import Any, BinaryIO, cast

from google.api import annotations_pb2
from google.protobuf import json_format
from google.protobuf.message import Message

from evalsi.errors import BadInputError, InfraError
from evalsi.projects import PROJECT_HEADER, PROJECT_LABEL, check_project
from evalsi.stats.defaults import DEFAULT_ADJUSTMENT, DEFAULT_CONFIDENCE
from evalsi.v1alpha1 import (
    catalog_service_pb2,
    evaluation_service_pb2,
    monitor_service_pb2,
    run_service_pb2,
    trace_service_pb2,
)
from evalsi.v1alpha1.catalog_service_pb2 import ListEvaluatorsRequest, ListEvaluatorsResponse
from evalsi.v1alpha1.evaluation_service_pb2 import EvaluateRequest, EvaluateResponse
from evalsi.v1alpha1.monitor_service_pb2 import (
    ApplyPolicyRequest,
    DeletePolicyRequest,
    GetPolicyRequest,
    GetPolicyStatsRequest,
    ListPoliciesRequest,
    Policy,
    PolicyStats,
)
from evalsi.v1alpha1.policy_pb2 import OnlineEvalPolicy
from evalsi.v1alpha1.run_pb2 import (
    RUN_STATE_BUDGET_EXCEEDED,
    RUN_STATE_CANCELLED,
    RUN_STATE_FAILED,
    RUN_STATE_SUCCEEDED,
    Comparison,
    EvalRun,
    Run,
    RunState,
)
from evalsi.v1alpha1.run_service_pb2 import (
    CancelRunRequest,
    CompareRunsRequest,
    CreateRunRequest,
    DatasetVersion,
    GetRunRequest,
    ListDatasetVersionsRequest,
    ListDatasetVersionsResponse,
    ListRunResultsRequest,
    ListRunsRequest,
    ResumeRunRequest,
    RunEvent,
    UploadDatasetRequest,
    WatchRunRequest,
)
from evalsi.v1alpha1.score_pb2 import EvaluationResult
from evalsi.v1alpha1.trace_service_pb2 import GetTraceRequest, ListTracesRequest, Trace, TraceSummary

TERMINAL_STATES = (RUN_STATE_SUCCEEDED, RUN_STATE_FAILED, RUN_STATE_CANCELLED, RUN_STATE_BUDGET_EXCEEDED)
_SERVICES = {
    "EvaluationService": evaluation_service_pb2.DESCRIPTOR.services_by_name["EvaluationService"],
    "RunService": run_service_pb2.DESCRIPTOR.services_by_name["RunService"],
    "CatalogService": catalog_service_pb2.DESCRIPTOR.services_by_name["CatalogService"],
    "TraceService": trace_service_pb2.DESCRIPTOR.services_by_name["TraceService"],
    "MonitorService": monitor_service_pb2.DESCRIPTOR.services_by_name["MonitorService"],
}


class _Grpc:
    def __init__(self, target: str, project: str | None, timeout: float) -> None:
        import grpc

        self._grpc = grpc
        self._channel = grpc.insecure_channel(target)
        self._metadata = ((PROJECT_HEADER, project),) if project else ()
        self._timeout = timeout

    def _method(self, service: str, method: str, response_type: type[Message], streaming: bool) -> Any:
        path = f"/{_SERVICES[service].full_name}/{method}"
        make = self._channel.unary_stream if streaming else self._channel.unary_unary
        return make(
            path, request_serializer=lambda m: m.SerializeToString(), response_deserializer=response_type.FromString
        )

    def unary(self, service: str, method: str, request: Message, response_type: type[Message]) -> Any:
        try:
            return self._method(service, method, response_type, False)(
                request, metadata=self._metadata, timeout=self._timeout
            )
        except self._grpc.RpcError as exc:
            raise _grpc_error(exc) from None

    def stream(self, service: str, method: str, request: Message, response_type: type[Message]) -> Iterator[Any]:
        try:
            yield from self._method(service, method, response_type, True)(request, metadata=self._metadata)
        except self._grpc.RpcError as exc:
            raise _grpc_error(exc) from None

    def upload(self, first: UploadDatasetRequest, file: BinaryIO, size: int) -> DatasetVersion:
        call = self._channel.stream_unary(
            f"/{_SERVICES['RunService'].full_name}/UploadDataset",
            request_serializer=lambda m: m.SerializeToString(),
            response_deserializer=DatasetVersion.FromString,
        )

        def chunks() -> Iterator[UploadDatasetRequest]:
            yield first
            while data := file.read(UPLOAD_CHUNK_BYTES):
                yield UploadDatasetRequest(data=data)

        try:
            return call(chunks(), metadata=self._metadata)  # no deadline: a big file takes as long as it takes
        except self._grpc.RpcError as exc:
            raise _grpc_error(exc) from None

    def close(self) -> None:
        self._channel.close()


def _grpc_error(exc: Any) -> Exception:
    import grpc

    code, details = exc.code(), exc.details()
    # As over HTTP (400, 404, 409, 413): what the caller sent, not the server, is at fault.
    if code in (grpc.StatusCode.INVALID_ARGUMENT, grpc.StatusCode.NOT_FOUND, grpc.StatusCode.FAILED_PRECONDITION,
                grpc.StatusCode.RESOURCE_EXHAUSTED):
        return BadInputError(details)
    return InfraError(f"server answered {code.name}: {details}")


class _Http:
    def __init__(self, base: str, project: str | None, timeout: float) -> None:
        self._base = base.rstrip("/")
        self._headers = {"content-type": "application/json", **({PROJECT_HEADER: project} if project else {})}
        self._timeout = timeout

    def _request(self, service: str, method: str, request: Message, timeout: float | None) -> Any:
        rule = _SERVICES[service].methods_by_name[method].GetOptions().Extensions[annotations_pb2.http]
        verb = rule.WhichOneof("pattern")
        template = getattr(rule, verb)
        fields = json_format.MessageToDict(request, preserving_proto_field_name=True)
        used: set[str] = set()

        def fill(match: re.Match[str]) -> str:
            name = match.group(1)
            used.add(name)
            return urllib.parse.quote(str(fields.get(name, "")), safe="")

        path = re.sub(r"\{([a-z_]+)\}", fill, template)
        body = None
        if rule.body == "*":
            body = json_format.MessageToJson(request).encode()
        else:
            if rule.body:  # one field is the body (ApplyPolicy's policy); the others go in the query
                body = json_format.MessageToJson(getattr(request, rule.body)).encode()
                used.add(rule.body)
            query = {k: v for k, v in fields.items() if k not in used}
            if query:
                path += "?" + urllib.parse.urlencode(query, doseq=True)
        return urllib.request.urlopen(
            urllib.request.Request(self._base + path, data=body, method=verb.upper(), headers=self._headers),
            timeout=timeout,
        )

    def unary(self, service: str, method: str, request: Message, response_type: type[Message]) -> Any:
        try:
            with self._request(service, method, request, self._timeout) as response:
                return json_format.Parse(response.read(), response_type(), ignore_unknown_fields=True)
        except urllib.error.HTTPError as exc:
            raise _http_error(exc) from None
        except urllib.error.URLError as exc:
            raise InfraError(f"cannot reach {self._base}: {exc.reason}") from None

    def stream(self, service: str, method: str, request: Message, response_type: type[Message]) -> Iterator[Any]:
        try:
            with self._request(service, method, request, None) as response:
                for line in response:
                    if not line.strip():
                        continue
                    document = json.loads(line)
                    if "error" in document:  # the server failed after the stream started
                        error = document["error"]
                        raise InfraError(f"server stream ended with {error.get('code')}: {error.get('message')}")
                    yield json_format.ParseDict(document, response_type(), ignore_unknown_fields=True)
        except urllib.error.HTTPError as exc:
            raise _http_error(exc) from None
        except urllib.error.URLError as exc:
            raise InfraError(f"cannot reach {self._base}: {exc.reason}") from None

    def upload(self, first: UploadDatasetRequest, file: BinaryIO, size: int) -> DatasetVersion:
        """The file as the body of ``POST /v1alpha1/datasets/{name}:upload``, streamed from disk."""
        query: list[tuple[str, str]] = [
            (key, str(value)) for key, value in (("filename", first.filename), ("format", first.format),
                                                 ("project", first.project), ("limit", first.limit)) if value
        ]
        query += [("map", f"{target}={source}") for target, source in first.mapping.items()]
        url = f"{self._base}/v1alpha1/datasets/{urllib.parse.quote(first.name, safe='')}:upload"
        if query:
            url += "?" + urllib.parse.urlencode(query)
        headers = {**self._headers, "content-type": "application/octet-stream", "content-length": str(size)}
        try:
            with urllib.request.urlopen(urllib.request.Request(url, data=file, method="POST", headers=headers)) as r:
                return json_format.Parse(r.read(), DatasetVersion(), ignore_unknown_fields=True)
        except urllib.error.HTTPError as exc:
            raise _http_error(exc) from None
        except urllib.error.URLError as exc:
            raise InfraError(f"cannot reach {self._base}: {exc.reason}") from None

    def close(self) -> None:
        pass


def _http_error(exc: urllib.error.HTTPError) -> Exception:
    try:
        message = json.loads(exc.read()).get("message", exc.reason)
    except (ValueError, AttributeError):
        message = exc.reason
    if exc.code in (400, 404, 409, 413):
        return BadInputError(str(message))
    return InfraError(f"server answered HTTP {exc.code}: {message}")


def _transport(url: str, project: str | None, timeout: float) -> _Grpc | _Http:
    parsed = urllib.parse.urlparse(url)
    if parsed.scheme == "grpc":
        return _Grpc(parsed.netloc, project, timeout)
    if parsed.scheme in ("http", "https"):
        return _Http(url, project, timeout)
    raise BadInputError(f"server URL {url!r}: use grpc://host:8081 or http://host:8080")


def load_run_document(spec: str | Path | EvalRun | Mapping[str, Any]) -> EvalRun:
    if isinstance(spec, EvalRun):
        return spec
    from evalsi.runs import spec as specs

    if isinstance(spec, Mapping):
        return specs.parse_eval_run(spec, source="<mapping>")
    run = specs.load_eval_run(spec)
    # A relative dataset path means "next to the spec file", as it does embedded; the server only knows
    # absolute paths (which it confines to its datasets directory) or paths relative to that directory.
    if run.spec.dataset.path and not Path(run.spec.dataset.path).is_absolute():
        local = (Path(spec).resolve().parent / run.spec.dataset.path).resolve()
        if local.exists():
            run.spec.dataset.path = str(local)
    return run


UPLOAD_CHUNK_BYTES = 1 << 20
_NOT_IN_NAMES = re.compile(r"[^A-Za-z0-9._-]+")


class Datasets:
    """Stored datasets: upload a file as a version, list a dataset's versions."""

    def __init__(self, transport: _Grpc | _Http) -> None:
        self._t = transport

    def push(
        self, path: str | Path, *, name: str = "", format: str = "", mapping: Mapping[str, str] | None = None,
        limit: int = 0, project: str = "",
    ) -> DatasetVersion:
        """Upload ``path`` (JSONL, CSV, JSON or Parquet) as a version of ``name`` (default: from the file's name);
        ``mapping`` and ``limit`` apply while the server reads it, as in a run spec."""
        path = Path(path)
        first = UploadDatasetRequest(
            name=name or dataset_name_for(path), filename=path.name, format=format, project=project,
            mapping=dict(mapping or {}), limit=limit,
        )
        try:
            with path.open("rb") as file:
                return self._t.upload(first, file, path.stat().st_size)
        except OSError as exc:
            raise BadInputError(f"{path}: cannot read ({exc.strerror or exc})") from None

    def versions(self, name: str, *, project: str = "") -> list[DatasetVersion]:
        request = ListDatasetVersionsRequest(name=name, project=project)
        return list(self._t.unary("RunService", "ListDatasetVersions", request, ListDatasetVersionsResponse).versions)


def dataset_name_for(path: Path) -> str:
    """A stored dataset's name from a file's: its stem, with what a name cannot hold as '-'."""
    name = _NOT_IN_NAMES.sub("-", path.stem).strip("-._")[:128]
    return name or "dataset"


def upload_local_dataset(document: EvalRun, datasets: Datasets) -> DatasetVersion | None:
    """Upload the spec's dataset file when it is here, and point the spec at the stored version; its mapping,
    limit and format are applied by the upload, so they leave the spec. None when the path is not a file here."""
    source = document.spec.dataset
    if source.WhichOneof("kind") != "path" or not Path(source.path).is_absolute() or not Path(source.path).is_file():
        return None
    metadata = document.metadata
    version = datasets.push(
        source.path, format=source.format, mapping=dict(source.mapping), limit=source.limit,
        project=metadata.project or metadata.labels.get(PROJECT_LABEL, ""),
    )
    source.ref = version.ref
    for field in ("mapping", "limit", "format"):
        source.ClearField(field)
    return version


class RunHandle:
    """A run on the server: its last known state, and ways to follow it."""

    def __init__(self, runs: Runs, run: Run) -> None:
        self._runs = runs
        self.run = run

    @property
    def id(self) -> str:
        return self.run.id

    def refresh(self) -> Run:
        self.run = self._runs.get(self.id, project=self.run.project)
        return self.run

    def watch(self) -> Iterator[RunEvent]:
        return self._runs.watch(self.id, project=self.run.project)

    def wait(self, poll_s: float = 0.5) -> Run:
        """Block until the run ends; returns it with its summaries and gates."""
        for event in self.watch():
            if event.state in TERMINAL_STATES:
                break
        while self.refresh().state not in TERMINAL_STATES:
            time.sleep(poll_s)
        return self.run


class Runs:
    def __init__(self, transport: _Grpc | _Http) -> None:
        self._t = transport

    def create(
        self, spec: str | Path | EvalRun | Mapping[str, Any], *, dry_run: bool = False, upload: bool = True
    ) -> RunHandle:
        """Submit a run. A ``spec.dataset.path`` naming a file here is uploaded first (unless ``upload`` is
        False) and the run names the stored version (``spec.dataset.ref``), so the server needs no shared
        filesystem; a path with no file here is the server's, under its datasets directory."""
        document = load_run_document(spec)
        if upload:
            upload_local_dataset(document, Datasets(self._t))
        request = CreateRunRequest(run=document, dry_run=dry_run)
        return RunHandle(self, self._t.unary("RunService", "CreateRun", request, Run))

    def get(self, run_id: str, *, project: str = "") -> Run:
        return self._t.unary("RunService", "GetRun", GetRunRequest(id=run_id, project=project), Run)

    def list(
        self, *, state: int = 0, name_contains: str = "", labels: Sequence[str] = (), page_size: int = 100
    ) -> Iterator[Run]:
        token = ""
        while True:
            # The generated stubs type enum fields by their class; protobuf takes the plain int a caller gives.
            request = ListRunsRequest(
                state=cast(RunState, state), name_contains=name_contains, labels=list(labels), page_size=page_size,
                page_token=token,
            )
            page = self._t.unary("RunService", "ListRuns", request, run_service_pb2.ListRunsResponse)
            yield from page.runs
            token = page.next_page_token
            if not token:
                return

    def watch(self, run_id: str, *, project: str = "") -> Iterator[RunEvent]:
        return self._t.stream("RunService", "WatchRun", WatchRunRequest(id=run_id, project=project), RunEvent)

    def cancel(self, run_id: str, *, project: str = "") -> Run:
        return self._t.unary("RunService", "CancelRun", CancelRunRequest(id=run_id, project=project), Run)

    def resume(self, run_id: str, *, project: str = "") -> Run:
        return self._t.unary("RunService", "ResumeRun", ResumeRunRequest(id=run_id, project=project), Run)

    def results(
        self, run_id: str, *, evaluator: str = "", page_size: int = 1000, project: str = ""
    ) -> Iterator[EvaluationResult]:
        token = ""
        while True:
            request = ListRunResultsRequest(
                id=run_id, evaluator=evaluator, page_size=page_size, page_token=token, project=project
            )
            page = self._t.unary("RunService", "ListRunResults", request, run_service_pb2.ListRunResultsResponse)
            yield from page.results
            token = page.next_page_token
            if not token:
                return

    def compare(self, run_a: str, run_b: str, *, confidence: float = DEFAULT_CONFIDENCE,
                adjust: str = DEFAULT_ADJUSTMENT) -> Comparison:
        """B against A per metric; p-values adjusted across the metrics by ``adjust`` (holm, bh or none)."""
        request = CompareRunsRequest(run_a=run_a, run_b=run_b, confidence=confidence, adjust=adjust)
        return self._t.unary("RunService", "CompareRuns", request, Comparison)


class Traces:
    """Watch: the traces evalsi-ingest stored (the server needs ``--traces-url``)."""

    def __init__(self, transport: _Grpc | _Http) -> None:
        self._t = transport

    def list(
        self,
        *,
        service: str = "",
        session_id: str = "",
        since: datetime | None = None,
        until: datetime | None = None,
        has_error: bool | None = None,
        score_metric: str = "",
        min_score: float | None = None,
        max_score: float | None = None,
        page_size: int = 100,
        project: str = "",
    ) -> Iterator[TraceSummary]:
        """Trace summaries, newest first, page after page (stop iterating to stop reading).

        ``score_metric`` keeps traces with an online score of that metric, within ``min_score``/``max_score``.
        """
        token = ""
        while True:
            request = ListTracesRequest(
                service_name=service, session_id=session_id, page_size=page_size, page_token=token, project=project,
                score_metric=score_metric, min_score=min_score, max_score=max_score,
            )
            if since is not None:
                request.start_time.FromDatetime(since)
            if until is not None:
                request.end_time.FromDatetime(until)
            if has_error is not None:
                request.has_error = has_error
            page = self._t.unary("TraceService", "ListTraces", request, trace_service_pb2.ListTracesResponse)
            yield from page.traces
            token = page.next_page_token
            if not token:
                return

    def get(self, trace_id: str, *, project: str = "") -> Trace:
        """The trace's summary, its span tree, its Record (trajectory included), online scores and feedback."""
        return self._t.unary("TraceService", "GetTrace", GetTraceRequest(trace_id=trace_id, project=project), Trace)

    def feedback(
        self,
        *,
        name: str,
        trace_id: str = "",
        session_id: str = "",
        value: float | None = None,
        label: str = "",
        comment: str = "",
        source: str = "",
        negative: bool = False,
        id: str = "",
        project: str = "",
    ) -> trace_service_pb2.TraceFeedback:
        """Join a late signal to a trace (or a session's traces); negative feedback re-triggers the policies."""
        item = trace_service_pb2.TraceFeedback(id=id, trace_id=trace_id, session_id=session_id, name=name,
                                               value=value, label=label, comment=comment, source=source,
                                               negative=negative)
        request = trace_service_pb2.AddFeedbackRequest(project=project, feedback=item)
        return self._t.unary("TraceService", "AddFeedback", request, trace_service_pb2.TraceFeedback)


class Policies:
    """Watch: online policies on the server, and the statistics of the scores they stored."""

    def __init__(self, transport: _Grpc | _Http) -> None:
        self._t = transport

    def apply(
        self, policy: str | Path | OnlineEvalPolicy | Mapping[str, Any], *, dry_run: bool = False, project: str = ""
    ) -> Policy:
        """Create or replace the policy by name (a YAML file, a mapping or the message); ``changed`` says if it did."""
        request = ApplyPolicyRequest(policy=load_policy_document(policy), dry_run=dry_run, project=project)
        return self._t.unary("MonitorService", "ApplyPolicy", request, Policy)

    def list(self, *, page_size: int = 100, project: str = "") -> Iterator[Policy]:
        """The project's policies by name, page after page."""
        token = ""
        while True:
            request = ListPoliciesRequest(page_size=page_size, page_token=token, project=project)
            page = self._t.unary("MonitorService", "ListPolicies", request, monitor_service_pb2.ListPoliciesResponse)
            yield from page.policies
            token = page.next_page_token
            if not token:
                return

    def get(self, name: str, *, project: str = "") -> Policy:
        return self._t.unary("MonitorService", "GetPolicy", GetPolicyRequest(name=name, project=project), Policy)

    def delete(self, name: str, *, project: str = "") -> Policy:
        """Removes the policy and returns it as it was (its stored scores stay with the traces)."""
        return self._t.unary("MonitorService", "DeletePolicy", DeletePolicyRequest(name=name, project=project), Policy)

    def stats(
        self,
        name: str,
        *,
        since: datetime | None = None,
        until: datetime | None = None,
        last_windows: int = 0,
        per_window: bool = False,
        project: str = "",
    ) -> PolicyStats:
        """Per metric n, mean and interval, skipped and errors; ``per_window`` adds each window's."""
        request = GetPolicyStatsRequest(name=name, last_windows=last_windows, per_window=per_window, project=project)
        if since is not None:
            request.start_time.FromDatetime(since)
        if until is not None:
            request.end_time.FromDatetime(until)
        return self._t.unary("MonitorService", "GetPolicyStats", request, PolicyStats)


def load_policy_document(policy: str | Path | OnlineEvalPolicy | Mapping[str, Any]) -> OnlineEvalPolicy:
    """The message itself, or parsed from a mapping or a YAML/JSON file (errors name the file, line and field)."""
    if isinstance(policy, OnlineEvalPolicy):
        return policy
    from evalsi.policy import load_policy, parse_policy

    if isinstance(policy, Mapping):
        return parse_policy(policy, source="<mapping>")
    return load_policy(policy)


class Client:
    """The Evals.si API: ``Client("grpc://127.0.0.1:8081")`` or ``Client("http://127.0.0.1:8080")``.

    ``project`` scopes every call (the ``x-evalsi-project`` header); unset, runs go to the project their
    spec names and other calls to ``default``.
    """

    def __init__(self, url: str, *, project: str | None = None, timeout: float = 60.0) -> None:
        self.url = url
        if project:
            check_project(project, "Client(project=...)")
        self._t = _transport(url, project, timeout)
        self.runs = Runs(self._t)
        self.traces = Traces(self._t)
        self.policies = Policies(self._t)
        self.datasets = Datasets(self._t)

    def evaluate(self, request: EvaluateRequest) -> EvaluateResponse:
        return self._t.unary("EvaluationService", "Evaluate", request, EvaluateResponse)

    def list_evaluators(self, pack: str = "") -> ListEvaluatorsResponse:
        return self._t.unary(
            "CatalogService", "ListEvaluators", ListEvaluatorsRequest(pack=pack), ListEvaluatorsResponse
        )

    def close(self) -> None:
        self._t.close()

    def __enter__(self) -> Client:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

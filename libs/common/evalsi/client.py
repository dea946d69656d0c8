"""``evalsi.Client``: the server's API from Python, over gRPC (``grpc://host:8081``) or HTTP/JSON
(``http://host:8080``). Both transports (``evalsi.client_transports``) derive every call from the proto
descriptors, so the client never hand-mirrors a route or a message.
"""

from __future__ import annotations

import re
import time
from collections.abc import Iterator, Mapping, Sequence
from datetime import datetime
from pathlib import Path
from typing import Any, cast

from evalsi.client_access import Access
from evalsi.client_auth.sources import CredentialSource, default_credentials
from evalsi.client_cases import Cases
from evalsi.client_transports import AuthenticationError, NotFoundError, Transport, open_transport
from evalsi.errors import BadInputError
from evalsi.projects import PROJECT_LABEL, check_project
from evalsi.stats.defaults import DEFAULT_ADJUSTMENT, DEFAULT_CONFIDENCE
from evalsi.v1alpha1 import monitor_service_pb2, run_service_pb2, trace_service_pb2
from evalsi.v1alpha1.catalog_service_pb2 import (
    ListEvaluatorsRequest,
    ListEvaluatorsResponse,
    PackNames,
    ProjectPacks,
    SetPackAllowlistRequest,
    SetProjectPacksRequest,
)
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
from evalsi.v1alpha1.record_pb2 import Record
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

__all__ = ["AuthenticationError", "Client", "NotFoundError", "RunHandle", "state_name"]

TERMINAL_STATES = (RUN_STATE_SUCCEEDED, RUN_STATE_FAILED, RUN_STATE_CANCELLED, RUN_STATE_BUDGET_EXCEEDED)


def state_name(state: int) -> str:
    """A run state as people write it (``pending``, ``running``, ``succeeded``, ``budget_exceeded``), not the
    number protobuf stores; ``unknown(N)`` for a state this client does not know (a newer server)."""
    if state not in RunState.values():
        return f"unknown({state})"
    return RunState.Name(cast(RunState, state)).removeprefix("RUN_STATE_").lower()


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


_NOT_IN_NAMES = re.compile(r"[^A-Za-z0-9._-]+")


class Datasets:
    """Stored datasets: upload a file as a version, list a dataset's versions."""

    def __init__(self, transport: Transport) -> None:
        self._t = transport

    @property
    def project(self) -> str:
        """The client's project (its header on every call), or '' for the server's default."""
        return self._t.project

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
    # The dataset goes where CreateRun puts the run: the client's project header when it has one (it wins over
    # the document's project there), else the document's own.
    version = datasets.push(
        source.path, format=source.format, mapping=dict(source.mapping), limit=source.limit,
        project="" if datasets.project else metadata.project or metadata.labels.get(PROJECT_LABEL, ""),
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

    @property
    def state(self) -> str:
        """The last known state by name (``succeeded``); ``run.state`` is protobuf's number."""
        return state_name(self.run.state)

    def __repr__(self) -> str:
        return f"RunHandle(id={self.id!r}, project={self.run.project!r}, state={self.state!r})"

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
    def __init__(self, transport: Transport) -> None:
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
        self, *, state: int | str = 0, name_contains: str = "", labels: Sequence[str] = (), page_size: int = 100,
        all_projects: bool = False, created_after: datetime | None = None, created_before: datetime | None = None,
    ) -> Iterator[Run]:
        """Runs newest first, every page; ``state`` by name (``"running"``) or number. ``all_projects``: every
        project's runs, which only a server listening on loopback alone grants (else PERMISSION_DENIED).
        ``created_after`` (inclusive) and ``created_before`` (exclusive) bound when a run was created; a time
        without a zone is UTC."""
        if isinstance(state, str):
            state = _state_number(state)
        token = ""
        while True:
            # The generated stubs type enum fields by their class; protobuf takes the plain int a caller gives.
            request = ListRunsRequest(
                state=cast(RunState, state), name_contains=name_contains, labels=list(labels), page_size=page_size,
                page_token=token, all_projects=all_projects,
            )
            if created_after is not None:
                request.created_after.FromDatetime(created_after)
            if created_before is not None:
                request.created_before.FromDatetime(created_before)
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

    def records(
        self, run_id: str, *, record_ids: Sequence[str] = (), trial: int = 0, page_size: int = 1000, project: str = ""
    ) -> Iterator[Record]:
        """The run's records as it evaluated them (ListRunRecords): input, output, reference, trajectory, metadata,
        with a generating target's outputs of ``trial``. Those of ``record_ids`` (asked 100 at a time), else all."""
        ids = list(record_ids)
        for start in range(0, len(ids), 100):
            request = run_service_pb2.ListRunRecordsRequest(id=run_id, project=project, trial=trial,
                                                            record_ids=ids[start:start + 100])
            yield from self._t.unary("RunService", "ListRunRecords", request,
                                     run_service_pb2.ListRunRecordsResponse).records
        token = ""
        while not ids:
            request = run_service_pb2.ListRunRecordsRequest(id=run_id, project=project, trial=trial,
                                                            page_size=page_size, page_token=token)
            page = self._t.unary("RunService", "ListRunRecords", request, run_service_pb2.ListRunRecordsResponse)
            yield from page.records
            token = page.next_page_token
            if not token:
                return

    def compare(self, run_a: str, run_b: str, *, confidence: float = DEFAULT_CONFIDENCE,
                adjust: str = DEFAULT_ADJUSTMENT) -> Comparison:
        """B against A per metric; p-values adjusted across the metrics by ``adjust`` (holm, bh or none)."""
        request = CompareRunsRequest(run_a=run_a, run_b=run_b, confidence=confidence, adjust=adjust)
        return self._t.unary("RunService", "CompareRuns", request, Comparison)


def _state_number(name: str) -> int:
    key = f"RUN_STATE_{name.strip().upper()}"
    if key not in RunState.DESCRIPTOR.values_by_name or key == "RUN_STATE_UNSPECIFIED":
        accepted = ", ".join(state_name(v) for v in RunState.values() if v)
        raise BadInputError(f"state: {name!r} is not a run state; accepted: {accepted}")
    return RunState.Value(key)


class Traces:
    """Watch: the traces evalsi-ingest stored (the server needs ``--traces-url``)."""

    def __init__(self, transport: Transport) -> None:
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
        labels: Sequence[str] = (),
        page_size: int = 100,
        project: str = "",
    ) -> Iterator[TraceSummary]:
        """Trace summaries, newest first, page after page (stop iterating to stop reading).

        ``score_metric`` keeps traces with an online score of that metric, within ``min_score``/``max_score``;
        ``labels`` (each ``key=value``) keeps traces carrying every one of them.
        """
        token = ""
        while True:
            request = ListTracesRequest(
                service_name=service, session_id=session_id, page_size=page_size, page_token=token, project=project,
                score_metric=score_metric, min_score=min_score, max_score=max_score, labels=list(labels),
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

    def __init__(self, transport: Transport) -> None:
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

    def alerts(
        self, name: str, *, page_size: int = 100, project: str = ""
    ) -> Iterator[monitor_service_pb2.FiredAlert]:
        """The alerts evalsi-policy fired for the policy, newest window first, page after page: each with the
        figures its rule read and what became of its webhook (``delivery``, ``http_status``, ``error``)."""
        token = ""
        while True:
            request = monitor_service_pb2.ListPolicyAlertsRequest(
                name=name, page_size=page_size, page_token=token, project=project)
            page = self._t.unary("MonitorService", "ListPolicyAlerts", request,
                                 monitor_service_pb2.ListPolicyAlertsResponse)
            yield from page.alerts
            token = page.next_page_token
            if not token:
                return


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

    Credentials: ``token=`` (a JWT) or ``api_key=`` (an ``evk_`` key); without either, ``EVALSI_TOKEN``,
    ``EVALSI_TOKEN_FILE``, ``EVALSI_API_KEY``, a GitHub Actions job's OIDC token (``EVALSI_OIDC_AUDIENCE``), then
    the login ``evalsi login`` cached for ``url`` (refreshed when it expires). ``credentials=`` takes a resolved
    source (``evalsi.client_auth.sources``) instead.
    """

    def __init__(
        self, url: str, *, project: str | None = None, timeout: float = 60.0, token: str | None = None,
        api_key: str | None = None, credentials: CredentialSource | None = None,
    ) -> None:
        self.url = url
        if project:
            check_project(project, "Client(project=...)")
        if credentials is None:
            credentials = default_credentials(url, token=token, api_key=api_key, token_origin="Client(token=...)",
                                              api_key_origin="Client(api_key=...)")
        self._t = open_transport(url, project, timeout, credentials)
        self.runs = Runs(self._t)
        self.traces = Traces(self._t)
        self.policies = Policies(self._t)
        self.datasets = Datasets(self._t)
        self.auth = Access(self._t)
        self.cases = Cases(self._t)

    def evaluate(self, request: EvaluateRequest) -> EvaluateResponse:
        return self._t.unary("EvaluationService", "Evaluate", request, EvaluateResponse)

    def list_evaluators(self, pack: str = "", *, all_packs: bool = False) -> ListEvaluatorsResponse:
        """The project's catalog: its enabled packs' evaluators (every allowed pack's with ``all_packs``, one
        pack's with ``pack``) and every pack with its tier, enabled and allowed (docs/packs.md)."""
        return self._t.unary(
            "CatalogService", "ListEvaluators", ListEvaluatorsRequest(pack=pack, all_packs=all_packs),
            ListEvaluatorsResponse,
        )

    def set_project_packs(self, packs: Sequence[str] | None) -> ProjectPacks:
        """Store the project's enabled packs (None: back to the server's evalsi.yaml); its packs as applied now."""
        request = SetProjectPacksRequest(packs=None if packs is None else PackNames(names=list(packs)))
        return self._t.unary("CatalogService", "SetProjectPacks", request, ProjectPacks)

    def set_pack_allowlist(self, packs: Sequence[str] | None) -> ProjectPacks:
        """Store the project's pack allowlist (the owner's; None: back to the server's evalsi.yaml)."""
        request = SetPackAllowlistRequest(allowed_packs=None if packs is None else PackNames(names=list(packs)))
        return self._t.unary("CatalogService", "SetPackAllowlist", request, ProjectPacks)

    def close(self) -> None:
        self._t.close()

    def __enter__(self) -> Client:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

"""evalsi-ingest's Prometheus metrics, read from the counters the pipeline keeps anyway, at scrape time.

Nothing is added to the per-span path: the export handler and the completer count as they go, and this
collector turns those counts into ``evalsi_ingest_*`` series when ``/metrics`` is scraped.
"""

from __future__ import annotations

from collections.abc import Iterator

from prometheus_client import CollectorRegistry
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric

from .completion import TraceAssembler
from .handler import ExportHandler
from .pipeline import Completer


class IngestCollector:
    def __init__(self, handler: ExportHandler, assembler: TraceAssembler, completer: Completer, *,
                 process: str = "0") -> None:
        self._handler = handler
        self._assembler = assembler
        self._completer = completer
        self._process = process

    def collect(self) -> Iterator[Metric]:
        stats = self._handler.stats
        spans = CounterMetricFamily("evalsi_ingest_spans", "Spans received, by outcome", labels=["outcome", "process"])
        spans.add_metric(["accepted", self._process], stats.accepted)
        spans.add_metric(["rejected", self._process], stats.rejected)
        yield spans
        logs = CounterMetricFamily("evalsi_ingest_log_records", "OTLP log records received, by outcome",
                                   labels=["outcome", "process"])
        logs.add_metric(["accepted", self._process], stats.logs_accepted)
        logs.add_metric(["rejected", self._process], stats.logs_rejected)
        yield logs
        completed = CounterMetricFamily("evalsi_ingest_traces_completed", "Traces completed and published",
                                        labels=["process"])
        completed.add_metric([self._process], self._completer.completed)
        yield completed
        pending = GaugeMetricFamily("evalsi_ingest_traces_pending", "Traces waiting to complete (grace period)",
                                    labels=["process"])
        pending.add_metric([self._process], len(self._assembler))
        yield pending
        waiting = GaugeMetricFamily("evalsi_ingest_completions_waiting",
                                    "Completed traces not yet recorded or published (the store or the bus is down)",
                                    labels=["process"])
        waiting.add_metric([self._process], self._completer.waiting)
        yield waiting


def ingest_registry(collector: IngestCollector) -> CollectorRegistry:
    registry = CollectorRegistry()
    registry.register(collector)
    return registry

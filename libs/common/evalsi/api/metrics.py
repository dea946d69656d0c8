"""Prometheus metrics of the API: calls and latencies per RPC, status code and transport."""

from __future__ import annotations

from prometheus_client import (
    CONTENT_TYPE_LATEST,
    CollectorRegistry,
    Counter,
    Gauge,
    Histogram,
    PlatformCollector,
    ProcessCollector,
    generate_latest,
)

# Evaluate aims at single-digit milliseconds; WatchRun streams may last for hours.
_BUCKETS = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 300.0, 3600.0)


class ApiMetrics:
    """Owns its registry (no process-global state), so two servers in one test never collide."""

    def __init__(self, registry: CollectorRegistry | None = None, *, process_metrics: bool = True) -> None:
        self.registry = registry or CollectorRegistry()
        if process_metrics:
            ProcessCollector(registry=self.registry)
            PlatformCollector(registry=self.registry)
        self.requests = Counter(
            "evalsi_api_requests",
            "API calls, by transport, RPC and status code.",
            ["transport", "rpc", "code"],
            registry=self.registry,
        )
        self.latency = Histogram(
            "evalsi_api_request_duration_seconds",
            "API call duration, by transport, RPC and status code.",
            ["transport", "rpc", "code"],
            buckets=_BUCKETS,
            registry=self.registry,
        )
        self.in_flight = Gauge(
            "evalsi_api_requests_in_flight",
            "API calls being served, by transport.",
            ["transport"],
            registry=self.registry,
        )
        # An operator reading Evaluate's latency needs to know which path served it (evalsi.api.local_evaluation).
        self.evaluate_routed = Counter(
            "evalsi_api_evaluate_routed",
            "Evaluate requests by who answers them: the api itself (cheap evaluators, a small request) or a worker.",
            ["to"],
            registry=self.registry,
        )
        self.unrouted = Counter(
            "evalsi_api_http_unrouted",
            "HTTP requests that matched no RPC, by HTTP status (404, 405).",
            ["status"],
            registry=self.registry,
        )
        # Each call's labelled series, looked up once: ``labels()`` takes a lock and checks its arguments, four
        # times a call on the Evaluate hot path otherwise. A few dozen RPCs x codes x 2 transports at most.
        self._series: dict[tuple[str, str, str], tuple[Counter, Histogram]] = {}
        self._in_flight: dict[str, Gauge] = {}

    def in_flight_of(self, transport: str) -> Gauge:
        """The in-flight gauge of one transport."""
        gauge = self._in_flight.get(transport)
        if gauge is None:
            gauge = self._in_flight[transport] = self.in_flight.labels(transport)
        return gauge

    def observe(self, transport: str, rpc: str, code: str, seconds: float) -> None:
        key = (transport, rpc, code)
        series = self._series.get(key)
        if series is None:
            series = self._series[key] = (self.requests.labels(*key), self.latency.labels(*key))
        series[0].inc()
        series[1].observe(seconds)

    def render(self) -> tuple[bytes, str]:
        """The text exposition format and its content type."""
        return generate_latest(self.registry), CONTENT_TYPE_LATEST

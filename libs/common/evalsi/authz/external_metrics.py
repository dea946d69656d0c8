"""Prometheus metrics of the external authorizer, on the api's ``/metrics``: how often it was asked, what it said,
how often the cache answered, how often it failed (and so denied), and how long its answers took."""

from __future__ import annotations

from prometheus_client import CollectorRegistry, Counter, Histogram

_BUCKETS = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0)


class ExternalAuthzMetrics:
    def __init__(self, registry: CollectorRegistry) -> None:
        self.decisions = Counter(
            "evalsi_ext_authz_decisions", "Decisions the external authorizer took part in, by its answer "
            "(allowed, denied, or error: no answer, so denied) and whether the cache answered",
            ("authorizer", "answer", "cached"), registry=registry)
        self.latency = Histogram(
            "evalsi_ext_authz_request_seconds", "Time of each call to the external authorizer (cache misses), "
            "failures included", ("authorizer",), buckets=_BUCKETS, registry=registry)

    def decided(self, authorizer: str, answer: str, *, cached: bool) -> None:
        self.decisions.labels(authorizer, answer, "true" if cached else "false").inc()

    def asked(self, authorizer: str, seconds: float) -> None:
        self.latency.labels(authorizer).observe(seconds)

"""Online policies (Watch): which traces to evaluate, the cascade of evaluators, windows, alerts and webhooks.

The pure parts are here; ``engine.PolicyEngine`` runs them on one completed trace with its I/O injected
(``stages`` evaluates cascade stages on the worker pools or in-process, ``promotion`` writes stored datasets,
``exports`` feeds Prometheus and OTel events); the ``evalsi-policy`` service wires it to the bus.
"""

from .cascade import (
    ERROR,
    NO_CONTENT,
    SCORED,
    SKIPPED,
    Cascade,
    Plan,
    Stage,
    StageResult,
    check_when,
    missing_content,
    run_cascade,
    score_entries,
)
from .selection import (
    AlwaysRule,
    SamplingDecision,
    Selector,
    TraceView,
    decide_sampling,
    parse_always,
    sample_fraction,
)
from .spec import (
    KIND,
    CompiledPolicy,
    compile_policy,
    load_policy,
    parse_policy,
    parse_policy_text,
    unset_alert_secrets,
)
from .webhook import DELIVERY_HEADER, SIGNATURE_HEADER, Delivery, WebhookSender, alert_payload, sign, verify
from .windows import (
    AlertDecision,
    AlertRule,
    AlertTracker,
    WindowAggregator,
    alert_key,
    compile_alert,
    evaluate_alert,
    window_start,
)

__all__ = [
    "DELIVERY_HEADER",
    "ERROR",
    "KIND",
    "NO_CONTENT",
    "SCORED",
    "SIGNATURE_HEADER",
    "SKIPPED",
    "AlertDecision",
    "AlertRule",
    "AlertTracker",
    "AlwaysRule",
    "Cascade",
    "CompiledPolicy",
    "Delivery",
    "Plan",
    "SamplingDecision",
    "Selector",
    "Stage",
    "StageResult",
    "TraceView",
    "WebhookSender",
    "WindowAggregator",
    "alert_key",
    "alert_payload",
    "check_when",
    "compile_alert",
    "compile_policy",
    "decide_sampling",
    "evaluate_alert",
    "load_policy",
    "missing_content",
    "parse_always",
    "parse_policy",
    "parse_policy_text",
    "run_cascade",
    "sample_fraction",
    "score_entries",
    "sign",
    "unset_alert_secrets",
    "verify",
    "window_start",
]

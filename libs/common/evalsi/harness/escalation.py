"""Escalation requests (§13's vocabulary, §11's policy events): an agent in an environment sandbox asks for a
strictly wider mode (egress to more ``host:port`` endpoints, a wider file-access mode) and the environment's
harness policy decides, since evals have no human in the loop.

The policy is the environment's ``escalation`` key: ``deny`` (the default) or ``{allow: {network: [HOST:PORT, ...],
fileAccess: [MODE, ...]}}``. A request is granted only when all it asks for lies inside the allowance; a request
for nothing wider than the sandbox already has is refused as not an escalation. Every request, whatever the
decision, becomes a sandbox policy event (``event``) on the tool step, for safety evaluators to count
(``builtin/sandbox-events``).

Pure functions of the request, the sandbox's current mode and the policy; applying a grant (a snapshot restored
under the wider spec) is ``evalsi.harness.environment_session``'s.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Literal, cast

from evalsi.errors import BadInputError
from evalsi.sandbox.checks import MAX_ALLOW, parse_endpoint
from evalsi.sandbox.model import Endpoint, FileAccess

__all__ = [
    "FILE_ACCESS_MODES",
    "Decision",
    "EscalationPolicy",
    "EscalationRequest",
    "decide",
    "escalation_policy",
    "escalation_request",
]

# Narrowest first: a mode is wider than every mode before it.
FILE_ACCESS_MODES: tuple[FileAccess, ...] = ("read-only", "workspace-write", "full-access")
# Every rung keeps its root read-only, so no sandbox here can give full-access: a policy allowing it is refused
# at load, and an agent asking for it is denied (the request is still recorded).
GRANTABLE_FILE_ACCESS: tuple[FileAccess, ...] = ("read-only", "workspace-write")
MAX_REQUEST_ENDPOINTS = 16
MAX_REASON_CHARS = 1000
MAX_ENDPOINT_CHARS = 300

DecisionKind = Literal["granted", "denied", "refused"]


@dataclass(frozen=True)
class EscalationPolicy:
    """What an agent may be granted: endpoints beyond the sandbox's own allowlist, and file-access modes. Empty:
    every request is denied (``escalation: deny``)."""

    network: frozenset[Endpoint] = frozenset()
    file_access: tuple[FileAccess, ...] = ()

    @property
    def denies_all(self) -> bool:
        return not self.network and not self.file_access


@dataclass(frozen=True)
class EscalationRequest:
    """What the agent asked for (``request_escalation``'s arguments, checked)."""

    network: tuple[Endpoint, ...] = ()
    file_access: FileAccess | None = None
    reason: str = ""

    def to_event(self) -> dict[str, Any]:
        out: dict[str, Any] = {"network": [f"{e.host}:{e.port}" for e in self.network]}
        if self.file_access is not None:
            out["file_access"] = self.file_access
        return out


@dataclass(frozen=True)
class Decision:
    """The policy's answer: ``granted`` (``network`` is the whole allowlist to apply, ``file_access`` the mode),
    ``denied`` (outside the allowance, or the policy denies all) or ``refused`` (nothing wider was asked)."""

    kind: DecisionKind
    why: str
    network: tuple[Endpoint, ...] = ()
    file_access: FileAccess | None = None


def _kind(value: Any) -> str:
    return "null" if value is None else type(value).__name__


def escalation_policy(value: Any, where: str) -> EscalationPolicy:
    """The environment's ``escalation`` value (``deny``, or ``{allow: {network, fileAccess}}``), checked; an error
    names the field and what is accepted."""
    if value == "deny":
        return EscalationPolicy()
    accepted = "deny, or {allow: {network: [HOST:PORT, ...], fileAccess: [read-only | workspace-write, ...]}}"
    if not isinstance(value, Mapping) or set(value) != {"allow"}:
        raise BadInputError(f"{where}: expected {accepted}, got {str(value)[:100]!r}")
    allow = value["allow"]
    if not isinstance(allow, Mapping) or not allow or not set(allow) <= {"network", "fileAccess"}:
        raise BadInputError(f"{where}.allow: expected an object with network and/or fileAccess; accepted: {accepted}")
    network = allow.get("network", [])
    if not isinstance(network, list) or len(network) > MAX_ALLOW:
        raise BadInputError(f"{where}.allow.network: expected a list of at most {MAX_ALLOW} HOST:PORT endpoints, "
                            f"got {_kind(network)}")
    endpoints = set()
    for index, text in enumerate(network):
        if not isinstance(text, str):
            raise BadInputError(f"{where}.allow.network[{index}]: expected a HOST:PORT string, got {_kind(text)}")
        endpoints.add(parse_endpoint(text, f"{where}.allow.network[{index}]"))
    modes = allow.get("fileAccess", [])
    if not isinstance(modes, list):
        raise BadInputError(f"{where}.allow.fileAccess: expected a list of modes, got {_kind(modes)}")
    for index, mode in enumerate(modes):
        if mode not in GRANTABLE_FILE_ACCESS:
            why = " (no rung here writes outside the workspace: the root stays read-only)" \
                if mode == "full-access" else ""
            raise BadInputError(f"{where}.allow.fileAccess[{index}]: {str(mode)[:100]!r}{why}; accepted: "
                                f"{', '.join(GRANTABLE_FILE_ACCESS)}")
    return EscalationPolicy(network=frozenset(endpoints), file_access=tuple(dict.fromkeys(modes)))


def escalation_request(arguments: Mapping[str, Any]) -> EscalationRequest:
    """``request_escalation``'s arguments, bounded; a ``ValueError`` (the agent's observation) names the argument
    and the limit."""
    unknown = sorted(str(key)[:40] for key in arguments if key not in ("network", "file_access", "reason"))
    if unknown:
        raise ValueError(f"{unknown[0]}: unknown argument; accepted: network, file_access, reason")
    reason = arguments.get("reason")
    if not isinstance(reason, str) or not reason.strip() or len(reason) > MAX_REASON_CHARS:
        raise ValueError(f"reason: a non-empty string of at most {MAX_REASON_CHARS} characters (why the wider mode "
                         "is needed)")
    network = arguments.get("network", [])
    if isinstance(network, str):
        network = [network]
    if not isinstance(network, list) or len(network) > MAX_REQUEST_ENDPOINTS:
        raise ValueError(f"network: a list of at most {MAX_REQUEST_ENDPOINTS} HOST:PORT endpoints")
    endpoints = []
    for index, text in enumerate(network):
        if not isinstance(text, str) or len(text) > MAX_ENDPOINT_CHARS:
            raise ValueError(f"network[{index}]: a HOST:PORT string of at most {MAX_ENDPOINT_CHARS} characters")
        try:
            endpoints.append(parse_endpoint(text, f"network[{index}]"))
        except BadInputError as exc:
            raise ValueError(str(exc)) from None
    mode = arguments.get("file_access")
    if mode is not None and mode not in FILE_ACCESS_MODES:
        raise ValueError(f"file_access: {str(mode)[:60]!r}; accepted: {', '.join(FILE_ACCESS_MODES)}")
    if not endpoints and mode is None:
        raise ValueError("ask for something: network (HOST:PORT endpoints) and/or file_access")
    return EscalationRequest(network=tuple(dict.fromkeys(endpoints)), file_access=cast("FileAccess | None", mode),
                             reason=reason.strip())


def decide(request: EscalationRequest, policy: EscalationPolicy, *, network: tuple[Endpoint, ...],
           file_access: FileAccess) -> Decision:
    """The policy's decision on ``request`` for a sandbox whose egress allowlist is ``network`` and whose
    file-access mode is ``file_access``. All or nothing: one endpoint or mode outside the allowance denies the
    whole request."""
    current = set(network)
    new_endpoints = [e for e in request.network if e not in current]
    wider_mode = request.file_access is not None and \
        FILE_ACCESS_MODES.index(request.file_access) > FILE_ACCESS_MODES.index(file_access)
    if not new_endpoints and not wider_mode:
        return Decision("refused", "not an escalation: the sandbox already allows all of it (egress to "
                        f"{_endpoints(network) or 'nothing'}, file access {file_access})")
    if policy.denies_all:
        return Decision("denied", "the environment's escalation policy denies every request (escalation: deny)")
    outside = [e for e in new_endpoints if e not in policy.network]
    if outside:
        return Decision("denied", f"outside the allowance: egress to {_endpoints(outside)}")
    if wider_mode and request.file_access not in policy.file_access:
        return Decision("denied", f"outside the allowance: file access {request.file_access}")
    granted_mode = request.file_access if wider_mode else None
    what = [f"egress to {_endpoints(new_endpoints)}"] if new_endpoints else []
    what += [f"file access {granted_mode}"] if granted_mode else []
    return Decision("granted", "granted: " + " and ".join(what), network=(*network, *new_endpoints),
                    file_access=granted_mode)


def _endpoints(endpoints: tuple[Endpoint, ...] | list[Endpoint]) -> str:
    return ", ".join(f"{e.host}:{e.port}" for e in endpoints)

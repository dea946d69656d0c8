"""The permission registry: every permission a role can grant, a stable, versioned public contract.

A permission is also the action an RPC performs (the action table in ``evalsi.authz.actions`` maps each RPC to
one). ``lowest_role`` is the least built-in role holding it, as the docs' action table shows it; install-wide
permissions are reserved for the ``owner`` role and can never appear in a project role.
"""

from __future__ import annotations

from dataclasses import dataclass

# The role every authenticated principal holds for ``self.read`` (no binding needed).
AUTHENTICATED = "any authenticated principal"


@dataclass(frozen=True)
class Permission:
    name: str
    description: str
    lowest_role: str
    install_wide: bool = False


_REGISTRY: tuple[Permission, ...] = (
    Permission("catalog.read", "list evaluators and packs; gRPC reflection", "viewer"),
    Permission("datasets.read", "list a stored dataset's versions", "viewer"),
    Permission("runs.read", "get, list, watch and compare runs and read their results", "viewer"),
    Permission("policies.read", "list and get online policies, their statistics and the alerts they fired", "viewer"),
    Permission("traces.read", "list and get traces with their scores and feedback", "viewer"),
    Permission("cases.read", "list and get stored agent cases and uploaded case reports", "viewer"),
    Permission("evaluations.run", "synchronous evaluations (Evaluate, EvaluateStream): spends judge budget and may "
               "run code", "runner"),
    Permission("runs.create", "start runs: spends target and judge budget and may run code", "runner"),
    Permission("runs.cancel", "cancel a run", "runner"),
    Permission("runs.resume", "resume a run", "runner"),
    Permission("datasets.write", "upload a dataset version for runs to name", "runner"),
    Permission("cases.write", "upload case reports (`evalsi cases run --server`)", "runner"),
    Permission("policies.write", "apply and delete online policies, which includes dataset promotion", "editor"),
    Permission("access.manage", "the project's API keys, custom roles and bindings", "admin"),
    Permission("audit.read", "read the project's audit log", "admin"),
    Permission("traces.write", "OTLP export of spans and logs, and feedback on traces", "ingest"),
    Permission("sandboxes.use", "create sandboxes in evalsi-sandboxd and run code, files and snapshots in them",
               "sandbox"),
    Permission("self.read", "who-am-i, and the projects, roles and permissions the caller can see", AUTHENTICATED),
    Permission("projects.manage", "create projects", "owner", install_wide=True),
    Permission("metrics.read", "the Prometheus /metrics endpoint", "owner", install_wide=True),
    Permission("install.manage", "install settings: a project's pack allowlist (SetPackAllowlist)", "owner",
               install_wide=True),
)

PERMISSIONS: dict[str, Permission] = {permission.name: permission for permission in _REGISTRY}
# Permissions a project role may hold: everything but the install-wide ones.
PROJECT_PERMISSIONS: frozenset[str] = frozenset(p.name for p in _REGISTRY if not p.install_wide)
INSTALL_WIDE_PERMISSIONS: frozenset[str] = frozenset(p.name for p in _REGISTRY if p.install_wide)
SELF_READ = "self.read"


def expand(pattern: str) -> frozenset[str]:
    """The permissions a pattern names: ``runs.create``, ``runs.*`` (a group) or ``*`` (every permission);
    empty when it names none (the caller reports that with the key at fault)."""
    if pattern == "*":
        return frozenset(PERMISSIONS)
    if pattern.endswith(".*"):
        prefix = pattern[:-1]
        return frozenset(name for name in PERMISSIONS if name.startswith(prefix))
    return frozenset({pattern}) if pattern in PERMISSIONS else frozenset()


def markdown_table() -> str:
    """The permission list as docs/auth.md prints it (a test compares the two)."""
    lines = ["| Permission | Lowest built-in role | Install-wide | Allows |", "|---|---|---|---|"]
    for permission in _REGISTRY:
        lines.append(f"| `{permission.name}` | {permission.lowest_role} | {'yes' if permission.install_wide else 'no'} "
                     f"| {permission.description} |")
    return "\n".join(lines)

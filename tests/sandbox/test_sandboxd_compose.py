"""compose.yaml's sandboxd, checked against sandboxd's own flag parser (no Docker engine here): it runs the image's
console script, listens on the shared socket volume, reaches no network and holds no secrets."""

from __future__ import annotations

from pathlib import Path

import yaml

from evalsi_sandboxd.main import settings_from_args

ROOT = Path(__file__).resolve().parents[2]
COMPOSE = yaml.safe_load((ROOT / "compose.yaml").read_text())


def test_the_compose_sandboxd_command_parses_and_listens_on_the_shared_volume() -> None:
    service = COMPOSE["services"]["sandboxd"]
    script, *flags = service["command"]
    assert script == "evalsi-sandboxd"
    args, config, access = settings_from_args(flags, environ={})
    assert config.ladder is None and not access.enforced  # the default ladder; loopback-only, no auth section
    assert args.listen == "unix:/run/evalsi/sandboxd/sandboxd.sock"
    assert any(volume.startswith("sandboxd:/run/evalsi/sandboxd") for volume in service["volumes"])
    assert "sandboxd" in COMPOSE["volumes"]
    assert "install -d -o evalsi -m 0700 /run/evalsi/sandboxd" in (ROOT / "Dockerfile").read_text()


def test_the_compose_sandboxd_has_no_network_no_capabilities_and_no_secrets() -> None:
    service = COMPOSE["services"]["sandboxd"]
    assert service["network_mode"] == "none" and service["cap_drop"] == ["ALL"]
    assert "environment" not in service and "depends_on" not in service
    assert not any("bus" in str(volume) for volume in service["volumes"])

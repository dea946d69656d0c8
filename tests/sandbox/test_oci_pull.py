"""OCI image roots pulled from a registry (a local one speaking the distribution API with a token challenge: the
outside world here), then run as a sandbox's / on bubblewrap and gVisor; registries the operator did not list
refused naming the setting; a tampered blob refused; the operator's `evalsi sandbox image pull` and `ls`."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from click.testing import CliRunner
from sandboxd_process import running_sandboxd

from evalsi.cli.main import cli
from evalsi.errors import BadInputError, InfraError
from evalsi.sandbox import oci_registry
from evalsi.sandbox.bwrap import BwrapDriver
from evalsi.sandbox.client import SandboxClient
from evalsi.sandbox.config import SandboxConfig
from evalsi.sandbox.gvisor import GvisorDriver
from evalsi.sandbox.model import RootFilesystem, SandboxSpec
from evalsi.sandbox.oci import ImageCache
from evalsi.sandbox.oci_config import ImageSettings, Registry
from evalsi.testing.oci_images import busybox_oci_image
from evalsi.testing.oci_registry import LocalRegistry

_LISTING = "cat /etc/hello; ls /etc /opt"


def _settings(registry: LocalRegistry) -> ImageSettings:
    return ImageSettings(registries=(Registry(registry.host, tls=False),))


def _expected(stdout: bytes) -> None:
    text = stdout.decode()
    assert text.startswith("hello from layer 2\n"), text
    assert "gone" not in text and "old" not in text and "new" in text, text  # both whiteouts applied


async def test_a_pulled_image_is_the_sandbox_root_on_bwrap(tmp_path: Path) -> None:
    image = busybox_oci_image(tmp_path)
    with LocalRegistry() as registry:
        registry.push("team/busybox", "1.0", image)
        reference = f"{registry.host}/team/busybox:1.0"
        driver = BwrapDriver(SandboxConfig(cache_dir=tmp_path / "cache", images=_settings(registry)))
        spec = SandboxSpec(root=RootFilesystem("oci", reference))
        session = await driver.create(spec)
        try:
            result = await session.exec(["sh", "-c", _LISTING])
        finally:
            await session.destroy()
        assert result.outcome.kind == "exit" and result.outcome.code == 0, result
        _expected(result.stdout)
        assert result.isolation.bounds["root"] == f"oci image {reference} ({image.manifest_digest}) read-only"
        # The protocol as a registry sees it: a 401 challenge, a token for this repository, then every call with it;
        # the index resolved to linux/amd64's manifest, the blobs through the CDN redirect.
        token = next(seen for seen in registry.requests if seen.path == "/token")
        assert token.headers.get("authorization") is None  # anonymous: no credentials configured
        paths = [seen.path for seen in registry.requests]
        assert f"/v2/team/busybox/manifests/{image.manifest_digest}" in paths
        assert sum(path.startswith("/cdn/") for path in paths) == 2  # two layers; the arm64 manifest never fetched
        api = [seen for seen in registry.requests if seen.path.startswith("/v2/team/")]
        assert "authorization" not in api[0].headers  # the first call meets the challenge
        assert all(seen.headers.get("authorization", "").startswith("Bearer ") for seen in api[1:])
        fetched = len(registry.requests)
        second = await driver.create(spec)  # served from the cache: the tag resolved when first pulled
        await second.destroy()
        assert len(registry.requests) == fetched


async def test_a_pulled_image_is_the_sandbox_root_on_gvisor(tmp_path: Path) -> None:
    if shutil.which("runsc") is None:
        pytest.fail("runsc is not installed (scripts/test.sh installs it)")
    image = busybox_oci_image(tmp_path)
    with LocalRegistry() as registry:
        registry.push("team/busybox", "1.0", image)
        driver = GvisorDriver(SandboxConfig(cache_dir=tmp_path / "cache", images=_settings(registry)))
        reference = f"{registry.host}/team/busybox:1.0"
        session = await driver.create(SandboxSpec(root=RootFilesystem("oci", reference)))
        try:
            result = await session.exec(["sh", "-c", _LISTING])
        finally:
            await session.destroy()
    assert result.outcome.kind == "exit" and result.outcome.code == 0, result
    _expected(result.stdout)
    assert result.isolation.bounds["root"] == f"oci image {reference} ({image.manifest_digest}) read-only"


def test_registries_the_operator_did_not_list_are_refused_naming_the_setting(tmp_path: Path) -> None:
    image = busybox_oci_image(tmp_path)
    with LocalRegistry() as registry:
        registry.push("team/busybox", "1.0", image)
        reference = f"{registry.host}/team/busybox:1.0"
        # Embedded default: docker.io only.
        with pytest.raises(BadInputError, match=rf"registry {registry.host} is not in sandbox.images.registries "
                                                r"\(allowed: docker.io\)"):
            ImageCache(tmp_path / "cache").resolve(reference)
        # sandboxd's default: none; what the operator pulled is served without contacting the registry.
        server = ImageCache(tmp_path / "cache", ImageSettings().for_server())
        with pytest.raises(BadInputError, match=r"sandbox.images.registries \(allowed: none\)"):
            server.resolve(reference)
        assert registry.requests == []
        pulled = ImageCache(tmp_path / "cache", _settings(registry)).pull(reference)
        before = len(registry.requests)
        assert server.resolve(reference) == pulled.path
        assert server.resolve(f"{registry.host}/team/busybox@{image.manifest_digest}") == pulled.path
        assert len(registry.requests) == before


def test_a_tampered_blob_from_the_registry_is_refused_and_nothing_is_cached(tmp_path: Path) -> None:
    image = busybox_oci_image(tmp_path)
    with LocalRegistry() as registry:
        registry.push("team/busybox", "1.0", image)
        first_layer = json.loads(image.manifest)["layers"][0]
        registry.tamper[first_layer["digest"]] = b"\0" * first_layer["size"]
        with pytest.raises(BadInputError, match=rf"blob {first_layer['digest']} has digest sha256:[0-9a-f]+: its "
                                                "content does not match"):
            ImageCache(tmp_path / "cache", _settings(registry)).resolve(f"{registry.host}/team/busybox:1.0")
        assert not list((tmp_path / "cache" / "oci" / "sha256").iterdir())
        with pytest.raises(BadInputError, match=r"the registry has no manifest 'nope' \(404\)"):
            ImageCache(tmp_path / "cache", _settings(registry)).pull(f"{registry.host}/team/busybox:nope")


def test_a_registry_trickling_a_blob_is_given_up_on_and_nothing_is_cached(tmp_path: Path,
                                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(oci_registry, "_BASE_DEADLINE_S", 0.5)  # each read arrives in time; the whole never does
    image = busybox_oci_image(tmp_path)
    with LocalRegistry() as registry:
        registry.push("team/busybox", "1.0", image)
        registry.trickle_s = 0.05
        with pytest.raises(InfraError, match=r"blob sha256:[0-9a-f]+: the download is slower than 256 KiB/s"):
            ImageCache(tmp_path / "cache", _settings(registry)).resolve(f"{registry.host}/team/busybox:1.0")
        registry.trickle_s = 0.0
    assert not list((tmp_path / "cache" / "oci" / "sha256").iterdir())


def test_credentials_come_from_the_operators_file_for_that_registry_only(tmp_path: Path) -> None:
    image = busybox_oci_image(tmp_path)
    with LocalRegistry(credentials=("robot", "s3cret")) as registry:
        registry.push("team/busybox", "1.0", image)
        reference = f"{registry.host}/team/busybox:1.0"
        with pytest.raises(BadInputError, match=r"the token service .* answered 401"):
            ImageCache(tmp_path / "cache", _settings(registry)).pull(reference)
        credentials = tmp_path / "registries.yaml"
        credentials.write_text(f'"{registry.host}": {{username: robot, password: s3cret}}\n'
                               'ghcr.io: {username: other, password: not-sent}\n')
        settings = ImageSettings(registries=(Registry(registry.host, tls=False),), credentials=credentials)
        assert ImageCache(tmp_path / "cache", settings).pull(reference).digest == image.manifest_digest


def test_the_operator_pulls_and_lists_images_with_the_cli(tmp_path: Path) -> None:
    image = busybox_oci_image(tmp_path)
    with LocalRegistry() as registry:
        registry.push("team/busybox", "1.0", image)
        config = tmp_path / "evalsi.yaml"
        config.write_text(f"sandbox:\n  cache_dir: {tmp_path / 'cache'}\n"
                          f"  images: {{registries: ['http://{registry.host}']}}\n")
        runner = CliRunner()
        pulled = runner.invoke(cli, ["sandbox", "image", "pull", f"{registry.host}/team/busybox:1.0",
                                     "--config", str(config), "--format", "json"])
        assert pulled.exit_code == 0, pulled.output
        assert json.loads(pulled.output)["digest"] == image.manifest_digest
        listed = runner.invoke(cli, ["sandbox", "image", "ls", "--config", str(config)])
        assert listed.exit_code == 0, listed.output
        header, row = listed.output.splitlines()
        assert header.split() == ["REFERENCE", "DIGEST", "BYTES"]
        assert row.split()[:2] == [f"{registry.host}/team/busybox:1.0", image.manifest_digest[:19]]
        refused = runner.invoke(cli, ["sandbox", "image", "pull", "ghcr.io/org/tool:1", "--config", str(config)])
        assert refused.exit_code == 2 and "registry ghcr.io is not in sandbox.images.registries" in refused.output


async def test_sandboxd_serves_what_the_operator_pulled_and_pulls_nothing_itself(tmp_path: Path) -> None:
    image = busybox_oci_image(tmp_path)
    cache = tmp_path / "cache"
    with LocalRegistry() as registry:
        registry.push("team/busybox", "1.0", image)
        reference = f"{registry.host}/team/busybox:1.0"
        spec = SandboxSpec(root=RootFilesystem("oci", reference))
        config = {"sandbox": {"ladder": ["bwrap"], "cache_dir": str(cache)}}
        with running_sandboxd(tmp_path, config=config) as (address, _):
            async with SandboxClient(address, project="p") as client:
                with pytest.raises(BadInputError, match=rf"registry {registry.host} is not in "
                                                        r"sandbox.images.registries \(allowed: none\)"):
                    await client.create(spec)
                assert registry.requests == []  # a caller's reference made sandboxd contact nothing
                # The operator's `evalsi sandbox image pull` (the same cache), then the caller's Create.
                ImageCache(cache, _settings(registry)).pull(reference)
                session = await client.create(spec)
                try:
                    result = await session.exec(["sh", "-c", _LISTING])
                finally:
                    await session.destroy()
    assert result.outcome.kind == "exit" and result.outcome.code == 0, result
    _expected(result.stdout)

"""OCI image roots from disk: an image layout directory, its tarball and a legacy ``docker save`` archive, unpacked
once by digest with whiteouts; bad digests, unsafe members and oversized images refused naming what; concurrent
unpacks of one image ending with one directory; how specs, configuration and sandboxd name an OCI root."""

from __future__ import annotations

import gzip
import hashlib
import io
import json
import os
import subprocess
import sys
import tarfile
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from evalsi.errors import BadInputError
from evalsi.harness.environment import environment_from_mapping
from evalsi.sandbox.config import load_sandbox_config, root_from_path
from evalsi.sandbox.model import DEFAULT_RESOURCES, Level, RootFilesystem
from evalsi.sandbox.oci import ImageCache
from evalsi.sandbox.oci_config import ImageSettings
from evalsi.sandbox.oci_ref import parse_reference
from evalsi.sandbox.rootfs import RootCache
from evalsi.sandbox.v1alpha1 import sandbox_pb2 as pb
from evalsi.sandbox.wire import spec_from_proto
from evalsi.testing.oci_images import (
    busybox_oci_image,
    image_from_layers,
    tar_layer,
    write_docker_archive,
    write_layout,
    write_layout_tar,
)
from evalsi_sandboxd.main import settings_from_args


def _check_root(root: Path) -> None:
    assert (root / "etc" / "hello").read_text() == "hello from layer 2\n"
    assert not (root / "etc" / "gone").exists()  # .wh.gone in layer 2
    assert sorted(path.name for path in (root / "opt").iterdir()) == ["new"]  # .wh..wh..opq, then opt/new
    assert (root / "bin" / "busybox").stat().st_mode & 0o7777 == 0o755
    assert (root / "bin" / "sh").readlink() == Path("busybox")


def test_a_layout_its_tarball_and_a_docker_save_archive_unpack_once_by_digest(tmp_path: Path) -> None:
    image = busybox_oci_image(tmp_path)
    cache = ImageCache(tmp_path / "cache")
    from_dir = cache.resolve(str(write_layout(image, tmp_path / "layout")))
    from_tar = cache.resolve(str(write_layout_tar(image, tmp_path / "layout.tar", tmp_path)))
    assert from_dir == from_tar == tmp_path / "cache" / "oci" / "sha256" / image.manifest_digest[7:] / "rootfs"
    _check_root(from_dir)
    # The legacy archive has no manifest: its layers are checked against the config's diff_ids, keyed by the config.
    legacy = cache.resolve(str(write_docker_archive(image, tmp_path / "saved.tar")))
    config_digest = hashlib.sha256(image.config).hexdigest()
    assert legacy == tmp_path / "cache" / "oci" / "sha256" / config_digest / "rootfs"
    _check_root(legacy)
    listed = {entry.digest: entry for entry in cache.images()}
    assert set(listed) == {image.manifest_digest, f"sha256:{config_digest}"}
    assert listed[image.manifest_digest].files > 30 and listed[image.manifest_digest].bytes > 1_000_000


def test_a_blob_whose_content_does_not_match_its_digest_is_refused_naming_it(tmp_path: Path) -> None:
    image = busybox_oci_image(tmp_path)
    layout = write_layout(image, tmp_path / "layout")
    second = json.loads(image.manifest)["layers"][1]["digest"]
    blob = layout / "blobs" / "sha256" / second[7:]
    blob.write_bytes(gzip.compress(b"tampered" * 100))
    with pytest.raises(BadInputError, match=f"blob {second} .* does not match|blob {second} is"):
        ImageCache(tmp_path / "cache").resolve(str(layout))
    assert not list((tmp_path / "cache" / "oci" / "sha256").iterdir())  # nothing half-unpacked kept
    assert not [path for path in (tmp_path / "cache" / "oci").iterdir() if path.name.startswith(".unpack")]


def _member(name: str, kind: bytes = tarfile.REGTYPE, link: str = "", data: bytes = b"x") -> tuple[
        tarfile.TarInfo, bytes]:
    info = tarfile.TarInfo(name)
    info.type, info.linkname, info.mode = kind, link, 0o644
    info.size = len(data) if kind == tarfile.REGTYPE else 0
    return info, data


@pytest.mark.parametrize(("layers", "refusal"), [
    ([[_member("../../escaped")]], r"layer 0 .*member '../../escaped' refused: '..' would place it outside"),
    ([[_member("usr/.wh.../../etc")]], r"refused: '..' would place it outside"),
    ([[_member("hop", tarfile.SYMTYPE, "../../../etc")]], r"member 'hop' refused: .*points outside the destination"),
    ([[_member("hard", tarfile.LNKTYPE, "../../etc/passwd")]], r"member 'hard' refused: '..'"),
    ([[_member("null", tarfile.CHRTYPE)]], r"member 'null' refused: a special file"),
    # An absolute link made in one layer is followed inside the root by the next, never on the host.
    ([[_member("etc", tarfile.DIRTYPE)], [_member("up", tarfile.SYMTYPE, "/")],
      [_member("up/etc/evalsi-oci-test", data=b"inside")]], None),
])
def test_unsafe_members_are_refused_naming_the_layer_and_member(tmp_path: Path, layers: list[list[tuple[
        tarfile.TarInfo, bytes]]], refusal: str | None) -> None:
    def layer(members: list[tuple[tarfile.TarInfo, bytes]]) -> bytes:
        def add(archive: tarfile.TarFile) -> None:
            for info, data in members:
                archive.addfile(info, io.BytesIO(data) if info.isfile() else None)
        return tar_layer(add)

    layout = write_layout(image_from_layers([layer(members) for members in layers]), tmp_path / "layout")
    cache = ImageCache(tmp_path / "cache")
    if refusal is None:
        root = cache.resolve(str(layout))
        assert (root / "etc" / "evalsi-oci-test").read_bytes() == b"inside"
        assert not Path("/etc/evalsi-oci-test").exists()
        return
    with pytest.raises(BadInputError, match=refusal):
        cache.resolve(str(layout))
    assert not (tmp_path / "escaped").exists() and not (tmp_path / "cache" / "escaped").exists()


def test_an_oversized_image_is_refused_naming_the_limit(tmp_path: Path) -> None:
    image = busybox_oci_image(tmp_path)
    layout = str(write_layout(image, tmp_path / "layout"))
    with pytest.raises(BadInputError, match=r"more than 1048576 bytes unpacked \(sandbox.images.max_bytes\)"):
        ImageCache(tmp_path / "cache", ImageSettings(max_bytes=1 << 20)).resolve(layout)
    with pytest.raises(BadInputError, match=r"more than 10 files \(sandbox.images.max_files\)"):
        ImageCache(tmp_path / "cache", ImageSettings(max_files=10)).resolve(layout)
    # The configuration keys behind those limits, bounded themselves.
    settings = load_sandbox_config({"images": {"max_bytes": 1 << 30, "max_files": 1000}}).images
    assert (settings.max_bytes, settings.max_files) == (1 << 30, 1000)
    with pytest.raises(BadInputError, match=r"sandbox.images.max_files: 0 is out of range; accepted: 1 to 10000000"):
        load_sandbox_config({"images": {"max_files": 0}})


def test_concurrent_unpacks_of_one_image_end_with_one_good_directory(tmp_path: Path) -> None:
    image = busybox_oci_image(tmp_path)
    layout = str(write_layout(image, tmp_path / "layout"))
    # Separate caches over one directory: as separate processes would, each with its own lock descriptor.
    with ThreadPoolExecutor(6) as pool:
        roots = list(pool.map(lambda _: ImageCache(tmp_path / "cache").resolve(layout), range(6)))
    # And separate processes, each with its own lock, on a second cache.
    code = "import sys; from pathlib import Path; from evalsi.sandbox.oci import ImageCache; " \
           "print(ImageCache(Path(sys.argv[1])).resolve(sys.argv[2]))"
    processes = [subprocess.Popen([sys.executable, "-c", code, str(tmp_path / "cache2"), layout],
                                  stdout=subprocess.PIPE, stderr=subprocess.PIPE) for _ in range(3)]
    printed = {process.communicate(timeout=120)[0].decode().strip() for process in processes}
    assert all(process.returncode == 0 for process in processes)
    assert printed == {str(tmp_path / "cache2" / "oci" / "sha256" / image.manifest_digest[7:] / "rootfs")}
    assert len(set(roots)) == 1
    _check_root(roots[0])
    for base in (tmp_path / "cache" / "oci", tmp_path / "cache2" / "oci"):
        assert [path.name for path in (base / "sha256").iterdir()] == [image.manifest_digest[7:]]
        assert not [path for path in base.iterdir() if path.name.startswith(".unpack")]


def test_specs_configuration_and_sandboxd_name_an_oci_root(tmp_path: Path) -> None:
    assert root_from_path("oci:python:3.12-slim", "--root") == RootFilesystem("oci", "python:3.12-slim")
    layout = write_layout(busybox_oci_image(tmp_path), tmp_path / "layout")
    assert root_from_path(f"oci:{layout}", "--root") == RootFilesystem("oci", str(layout))
    with pytest.raises(BadInputError, match=r"sandbox.root: repository 'library/Bad' is not valid"):
        load_sandbox_config({"root": "oci:Bad"})
    reference = parse_reference("python:3.12-slim")
    assert (reference.registry, reference.repository, reference.tag, reference.endpoint) == (
        "docker.io", "library/python", "3.12-slim", "registry-1.docker.io")
    assert str(parse_reference("127.0.0.1:5000/team/tool@sha256:" + "a" * 64)) == (
        "127.0.0.1:5000/team/tool@sha256:" + "a" * 64)
    with pytest.raises(BadInputError, match=r"sandbox.images.registries\[0\]: 'ftp://x' is not a registry"):
        load_sandbox_config({"images": {"registries": ["ftp://x"]}})
    # A harness environment's root.
    environment = environment_from_mapping({"root": {"oci": "ghcr.io/org/tool:1"}}, "env")
    assert environment.root == RootFilesystem("oci", "ghcr.io/org/tool:1")
    # sandboxd: a reference is the server's to resolve; a path must lie under its image roots.
    def from_wire(path: str, image_roots: tuple[Path, ...] = ()) -> RootFilesystem:
        message = pb.SandboxSpec(root=pb.RootFilesystem(kind="oci", path=path))
        return spec_from_proto(message, default_level=Level.NAMESPACED, default_resources=DEFAULT_RESOURCES,
                               image_roots=image_roots).root

    assert from_wire("python:3.12-slim") == RootFilesystem("oci", "python:3.12-slim")
    with pytest.raises(BadInputError, match=r"spec.root.path: .* is not under an image root"):
        from_wire(str(layout))
    assert from_wire(str(layout), (tmp_path,)) == RootFilesystem("oci", str(layout))
    with pytest.raises(BadInputError, match=r"spec.root.path: 'Not A Ref'; expected an image reference"):
        from_wire("Not A Ref")
    # RootCache hands an oci root to the image cache.
    assert RootCache(tmp_path / "cache").resolve(RootFilesystem("oci", str(layout))) == ImageCache(
        tmp_path / "cache").resolve(str(layout))


def test_sandboxd_pulls_from_no_registry_unless_its_operator_lists_one(tmp_path: Path) -> None:
    assert [entry.host for entry in load_sandbox_config(None).images.allowed()] == ["docker.io"]  # embedded
    _, config, _ = settings_from_args([], environ={})
    assert config.images.allowed() == ()
    listed = tmp_path / "evalsi.yaml"
    listed.write_text("sandbox:\n  images: {registries: [ghcr.io, 'http://127.0.0.1:5000']}\n")
    _, config, _ = settings_from_args(["--config", str(listed)], environ={})
    assert [str(entry) for entry in config.images.allowed()] == ["ghcr.io", "http://127.0.0.1:5000"]


def test_names_in_an_images_own_json_never_leave_its_directory(tmp_path: Path) -> None:
    # A `docker save` directory whose manifest.json names files outside it: refused, nothing outside is read.
    image = busybox_oci_image(tmp_path)
    saved = tmp_path / "saved"
    with tarfile.open(write_docker_archive(image, tmp_path / "saved.tar")) as archive:
        archive.extractall(saved, filter="data")
    manifest = json.loads((saved / "manifest.json").read_text())
    (tmp_path / "outside.json").write_bytes(image.config)
    manifest[0]["Config"] = "../outside.json"
    (saved / "manifest.json").write_text(json.dumps(manifest))
    with pytest.raises(BadInputError, match=r"'../outside.json': not a file inside the image"):
        ImageCache(tmp_path / "cache").resolve(str(saved))
    (saved / "fifo").unlink(missing_ok=True)
    os.mkfifo(saved / "fifo")
    manifest[0]["Config"] = "fifo"
    (saved / "manifest.json").write_text(json.dumps(manifest))
    with pytest.raises(BadInputError, match=r"'fifo' is not a regular file"):  # refused, never waited on
        ImageCache(tmp_path / "cache").resolve(str(saved))

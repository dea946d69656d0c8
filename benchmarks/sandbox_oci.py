"""OCI image roots: what a cold unpack, a pull from a (local) registry and a cached resolve cost.

    .venv/bin/python benchmarks/sandbox_oci.py --files 4000 --mib 200 --rounds 3

Builds a synthetic three-layer image (``--files`` files holding ``--mib`` MiB of incompressible bytes in all, a
whiteout and an opaque directory in the upper layers), then per round: a cold unpack from an OCI image layout, a
cold pull from the local token-auth registry of the tests (``evalsi.testing.oci_registry``: loopback, so the figure
is our client, digest checks and unpacking, not the network), and a resolve of the cached image (what every sandbox
create pays once the image is there). There is no target in the issue; a cached resolve should be negligible beside
bwrap's 50 ms first-byte target, printed beside it. CPU seconds are this process's (the registry serves from a
thread of it, so its CPU is included); the machine is shared, so the load average is printed beside.
"""

from __future__ import annotations

import argparse
import io
import os
import resource
import statistics
import tarfile
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from evalsi.sandbox.oci import ImageCache
from evalsi.sandbox.oci_config import ImageSettings, Registry
from evalsi.testing.oci_images import image_from_layers, tar_layer, write_layout
from evalsi.testing.oci_registry import LocalRegistry

BWRAP_FIRST_BYTE_TARGET_MS = 50.0


def _cpu_s() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def _layer(files: list[tuple[str, bytes]]) -> bytes:
    def add(archive: tarfile.TarFile) -> None:
        for name, data in files:
            info = tarfile.TarInfo(name)
            info.size, info.mode = len(data), 0o644
            archive.addfile(info, io.BytesIO(data))
    return tar_layer(add)


def synthetic_image(files: int, mib: int) -> tuple[list[bytes], int]:
    size = max(1, (mib << 20) // files)
    names = [f"usr/share/data/{index // 100:03d}/file{index:05d}" for index in range(files)]
    half = files // 2
    lower = _layer([(name, os.urandom(size)) for name in names[:half]] + [("opt/old", b"x"), ("etc/gone", b"x")])
    upper = _layer([(name, os.urandom(size)) for name in names[half:]] + [("etc/.wh.gone", b"")])
    top = _layer([("opt/.wh..wh..opq", b""), ("opt/new", b"y"), ("etc/hello", b"hello\n")])
    return [lower, upper, top], size * files


def _timed(action: Callable[[], object]) -> tuple[float, float]:
    cpu, started = _cpu_s(), time.perf_counter()
    action()
    return (time.perf_counter() - started) * 1000, _cpu_s() - cpu


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--files", type=int, default=4000)
    parser.add_argument("--mib", type=int, default=200)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    layers, payload = synthetic_image(args.files, args.mib)
    image = image_from_layers(layers)
    compressed = sum(len(layer) for layer in image.layers)
    print(f"image: {args.files} files, {payload >> 20} MiB of data, {len(layers)} layers, {compressed >> 20} MiB "
          "compressed")
    results: dict[str, list[tuple[float, float]]] = {"layout cold": [], "pull cold": [], "cached resolve": []}
    with tempfile.TemporaryDirectory(prefix="evalsi-oci-bench-") as scratch, LocalRegistry() as registry:
        base = Path(scratch)
        layout = str(write_layout(image, base / "layout"))
        registry.push("bench/image", "1", image)
        settings = ImageSettings(registries=(Registry(registry.host, tls=False),))
        reference = f"{registry.host}/bench/image:1"
        for round_ in range(args.rounds):
            cache = ImageCache(base / f"cache-layout-{round_}", settings)
            results["layout cold"].append(_timed(lambda cache=cache: cache.resolve(layout)))
            pulled = ImageCache(base / f"cache-pull-{round_}", settings)
            results["pull cold"].append(_timed(lambda pulled=pulled: pulled.resolve(reference)))
            for _ in range(10):
                results["cached resolve"].append(_timed(lambda pulled=pulled: pulled.resolve(reference)))
    load = os.getloadavg()
    for name, samples in results.items():
        walls, cpus = [wall for wall, _ in samples], [cpu for _, cpu in samples]
        beside = f"  (bwrap first-byte target {BWRAP_FIRST_BYTE_TARGET_MS:g} ms)" if name == "cached resolve" else ""
        print(f"{name:15s} wall p50 {statistics.median(walls):9.1f} ms  max {max(walls):9.1f} ms  "
              f"CPU p50 {statistics.median(cpus) * 1000:9.1f} ms  n={len(samples)}{beside}")
    print(f"load average {load[0]:.1f} {load[1]:.1f} {load[2]:.1f} on {os.cpu_count()} cores")


if __name__ == "__main__":
    main()

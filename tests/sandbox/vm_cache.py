"""The vm rung tests' shared cache: the guest's kernels, initramfs, runtime disk and template snapshots, built once per
machine (named by the digest of their inputs, so a changed agent or kernel rebuilds) and restored by every test.

scripts/test.sh builds the small guest kernel into this cache (`evalsi sandbox kernel build --cache-dir`) before the
tests run; a test run without it builds the kernel here itself (minutes, once).
"""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

from evalsi.sandbox.vm.small_kernel import SmallKernel, build_small_kernel

__all__ = ["CACHE", "small_kernel"]

CACHE = Path(os.environ.get("EVALSI_TEST_VM_CACHE", Path(tempfile.gettempdir()) / "evalsi-test-vm-cache"))


def small_kernel() -> SmallKernel:
    """The small guest kernel in the tests' cache (built when missing)."""
    kernel, _ = build_small_kernel(CACHE / "vm")
    return kernel

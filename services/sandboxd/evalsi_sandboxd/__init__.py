"""evalsi-sandboxd: SandboxService over gRPC on loopback or a Unix socket, over evalsi.sandbox (the ladder and the manager)."""

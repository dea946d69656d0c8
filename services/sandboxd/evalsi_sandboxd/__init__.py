"""evalsi-sandboxd: SandboxService over gRPC (a Unix socket or loopback) over evalsi.sandbox's ladder and manager."""

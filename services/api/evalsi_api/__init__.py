"""``evalsi-api``: the public API service (gRPC and HTTP/JSON for every public RPC).

The engine is :mod:`evalsi.api`; this package only parses flags, wires the real stores and bus, and serves.
"""

"""The ``evalsi-ingest`` process: OTLP/gRPC (4317) and OTLP/HTTP (4318) into the trace store."""

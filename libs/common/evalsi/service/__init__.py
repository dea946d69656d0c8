"""The service kit: configuration, lifecycle, HTTP health and metrics, logging, and the local supervisor."""

"""Generated from proto/envoy/config/core/v3 by scripts/gen_proto.py; do not edit."""

"""Generated from proto/envoy/type/v3 by scripts/gen_proto.py; do not edit."""

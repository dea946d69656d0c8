"""Generated from proto/envoy/service/auth/v3 by scripts/gen_proto.py; do not edit."""

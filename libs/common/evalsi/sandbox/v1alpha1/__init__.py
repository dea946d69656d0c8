"""Generated from proto/evalsi/sandbox/v1alpha1 by scripts/gen_proto.py; do not edit."""

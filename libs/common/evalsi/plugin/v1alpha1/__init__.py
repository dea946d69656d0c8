"""Generated from proto/evalsi/plugin/v1alpha1 by scripts/gen_proto.py; do not edit."""

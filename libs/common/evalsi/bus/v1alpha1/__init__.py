"""Generated from proto/evalsi/bus/v1alpha1 by scripts/gen_proto.py; do not edit."""

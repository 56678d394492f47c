"""Generated protocol modules (scripts/gen_proto.py)."""

"""evalsi-harness: the command line of the built-in reference agent (evalsi.harness)."""

"""evalsi-policy: online evaluation policies over completed traces."""

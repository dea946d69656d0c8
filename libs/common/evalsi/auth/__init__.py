"""Authentication: credentials (JWT bearer tokens, evk_ API keys, client certificates) to a Principal."""

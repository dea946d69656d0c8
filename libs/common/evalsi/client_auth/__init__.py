"""How a client authenticates to a server: the credential it sends (flags, environment, a GitHub Actions job's
OIDC token, the login cache), the cache ``evalsi login`` writes, and the OAuth flows that fill it."""

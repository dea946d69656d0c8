"""A local OpenID Connect issuer to try Evals.si's authentication without an identity provider (docs/auth.md).

    python examples/auth/local_issuer.py --port 9400 --client ci-bot:s3cret &      # serve (prints its URL)
    python examples/auth/local_issuer.py token --issuer http://127.0.0.1:9400 --client ci-bot:s3cret

The first serves discovery, JWKS, the device and browser logins `evalsi login` uses (approve a device code with
``approve``) and the client-credentials grant scripts use; the second asks it for a token the way a script or a
CI job would (``grant_type=client_credentials``) and prints it. For development only: the signing key is made at
start and lives in memory.
"""

from __future__ import annotations

import argparse
import json
import sys
import urllib.parse
import urllib.request

from evalsi.testing.issuer import main as serve_issuer


def token(issuer: str, client: str) -> str:
    """A token for ``client`` (``ID:SECRET``) from the issuer's token endpoint, found by OIDC discovery."""
    client_id, _, secret = client.partition(":")
    with urllib.request.urlopen(f"{issuer.rstrip('/')}/.well-known/openid-configuration", timeout=10) as answer:
        endpoint = json.load(answer)["token_endpoint"]
    form = urllib.parse.urlencode({"grant_type": "client_credentials", "client_id": client_id,
                                   "client_secret": secret}).encode()
    with urllib.request.urlopen(endpoint, data=form, timeout=10) as answer:
        return str(json.load(answer)["access_token"])


def approve(issuer: str, user_code: str, subject: str) -> None:
    """Approve a device login (`evalsi login` printed the code) as ``subject``, as a person would in a browser."""
    form = urllib.parse.urlencode({"user_code": user_code, "subject": subject}).encode()
    urllib.request.urlopen(f"{issuer.rstrip('/')}/device/approve", data=form, timeout=10).read()


def main() -> None:
    if len(sys.argv) > 1 and sys.argv[1] in ("token", "approve"):
        parser = argparse.ArgumentParser(prog=f"local_issuer.py {sys.argv[1]}")
        parser.add_argument("--issuer", required=True, metavar="URL")
        if sys.argv[1] == "token":
            parser.add_argument("--client", required=True, metavar="ID:SECRET")
            args = parser.parse_args(sys.argv[2:])
            print(token(args.issuer, args.client))
        else:
            parser.add_argument("--code", required=True, metavar="USER_CODE")
            parser.add_argument("--user", required=True, metavar="SUBJECT")
            args = parser.parse_args(sys.argv[2:])
            approve(args.issuer, args.code, args.user)
        return
    serve_issuer()  # --port, --audience, --client ID:SECRET, --user SUBJECT, --interval


if __name__ == "__main__":
    main()

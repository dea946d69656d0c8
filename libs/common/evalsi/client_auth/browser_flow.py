"""The authorization code flow with PKCE (RFC 7636, S256) and a loopback redirect (RFC 8252): the browser signs
in at the issuer, which redirects to ``http://127.0.0.1:<free port>/callback`` where this process waits for the
code. The ``state`` must come back unchanged (else the callback is someone else's and is refused); the verifier
never leaves this process until the code is exchanged, so an intercepted code is useless."""

from __future__ import annotations

import base64
import hashlib
import http.server
import secrets
import threading
import urllib.parse
import webbrowser
from collections.abc import Callable
from typing import Any

from evalsi.client_auth.oauth import IssuerEndpoints, LoginConfig, TokenSet, token_request
from evalsi.errors import BadInputError

CALLBACK_PATH = "/callback"
DONE_PAGE = (b"<!doctype html><title>Evals.si</title>"
             b"<p>Signed in. You can close this tab and return to the terminal.</p>")


def pkce_pair() -> tuple[str, str]:
    """A code verifier (86 characters of the unreserved set, RFC 7636 §4.1) and its S256 challenge."""
    verifier = secrets.token_urlsafe(64)
    challenge = base64.urlsafe_b64encode(hashlib.sha256(verifier.encode()).digest()).rstrip(b"=").decode()
    return verifier, challenge


class LoopbackReceiver:
    """An HTTP server on 127.0.0.1 (a free port) that takes one callback's query and answers a closing page."""

    def __init__(self) -> None:
        received = threading.Event()
        result: dict[str, str] = {}

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                parsed = urllib.parse.urlsplit(self.path)
                if parsed.path != CALLBACK_PATH or received.is_set():
                    self.send_error(404)
                    return
                result.update(urllib.parse.parse_qsl(parsed.query))
                self.send_response(200)
                self.send_header("content-type", "text/html; charset=utf-8")
                self.end_headers()
                self.wfile.write(DONE_PAGE)
                received.set()

            def log_message(self, *_args: Any) -> None:  # the query holds the code: never on the console
                pass

        self._server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._received, self._result = received, result
        self.redirect_uri = f"http://127.0.0.1:{self._server.server_address[1]}{CALLBACK_PATH}"
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)

    def __enter__(self) -> LoopbackReceiver:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._server.shutdown()
        self._server.server_close()
        self._thread.join(timeout=5)

    def wait(self, timeout_s: float) -> dict[str, str]:
        if not self._received.wait(timeout_s):
            raise BadInputError(f"no sign-in came back to {self.redirect_uri} within {timeout_s:g} s; run `evalsi "
                                "login` again (or use --device)")
        return dict(self._result)


def browser_login(
    endpoints: IssuerEndpoints,
    config: LoginConfig,
    *,
    inform: Callable[[str], None],
    open_url: Callable[[str], object] = webbrowser.open,
    timeout_s: float = 300.0,
) -> TokenSet:
    """Open the issuer's sign-in page, wait for its redirect, and exchange the code (with the verifier)."""
    if not endpoints.authorization_endpoint:
        raise BadInputError(f"issuer {config.issuer} offers no browser login (no authorization_endpoint); use "
                            "--device")
    verifier, challenge = pkce_pair()
    state = secrets.token_urlsafe(24)
    with LoopbackReceiver() as receiver:
        query = {"response_type": "code", "client_id": config.client_id, "redirect_uri": receiver.redirect_uri,
                 "scope": " ".join(config.scopes), "state": state, "code_challenge": challenge,
                 "code_challenge_method": "S256", **({"audience": config.audience} if config.audience else {})}
        separator = "&" if urllib.parse.urlsplit(endpoints.authorization_endpoint).query else "?"
        url = endpoints.authorization_endpoint + separator + urllib.parse.urlencode(query)
        inform(f"Opening the sign-in page in your browser; if it does not open, visit:\n{url}")
        open_url(url)
        answer = receiver.wait(timeout_s)
    if not secrets.compare_digest(answer.get("state", ""), state):
        raise BadInputError("the sign-in came back with another state than this login sent: refused (another "
                            "page called the callback); run `evalsi login` again")
    if "error" in answer:
        detail = answer.get("error_description", "")
        raise BadInputError(f"the issuer refused the sign-in: {answer['error']}{': ' + detail if detail else ''}")
    if not answer.get("code"):
        raise BadInputError("the sign-in came back without a code; run `evalsi login` again")
    return token_request(endpoints.token_endpoint, {
        "grant_type": "authorization_code", "code": answer["code"], "redirect_uri": receiver.redirect_uri,
        "client_id": config.client_id, "code_verifier": verifier})

"""``evalsi login`` and ``evalsi logout``: sign in to a server's identity provider and cache the tokens (0600), or
forget them."""

from __future__ import annotations

import os
import time
from pathlib import Path

import click

from evalsi.cli._common import SERVER_HELP, handle_errors
from evalsi.client_auth.cache import CachedLogin, CredentialCache, cache_path
from evalsi.errors import BadInputError, EvalsiError


def _cache() -> CredentialCache:
    return CredentialCache(cache_path(dict(os.environ), Path.home()))


def _server(server: str | None) -> str:
    from evalsi.client_config import client_defaults

    try:
        return client_defaults(server, None).require_server()
    except BadInputError as exc:
        raise click.UsageError(str(exc)) from None


@click.command("login")
@click.option("--server", default=None, metavar="URL", help=SERVER_HELP)
@click.option("--device", "method", flag_value="device", default=True,
              help="Sign in with a code shown here and approved in any browser (RFC 8628; the default, works over "
              "SSH).")
@click.option("--browser", "method", flag_value="browser",
              help="Sign in in this machine's browser (authorization code with PKCE, redirected to 127.0.0.1).")
@click.option("--issuer", default=None, metavar="URL",
              help="The OIDC issuer to sign in with, instead of the one the server publishes at "
              "/.well-known/evalsi-auth (with --client-id).")
@click.option("--client-id", default=None, metavar="ID", help="The OAuth client id, with --issuer.")
@click.option("--scope", "scopes", multiple=True, metavar="SCOPE",
              help="A scope to ask for, repeatable (default: the server's, else openid offline_access).")
@handle_errors
def login_command(server: str | None, method: str, issuer: str | None, client_id: str | None,
                  scopes: tuple[str, ...]) -> None:
    """Sign in to a server's identity provider and cache the tokens for that server.

    The server publishes its issuer and client id at /.well-known/evalsi-auth (auth.cli_login in its
    evalsi.yaml). Tokens go to $XDG_CONFIG_HOME/evalsi/credentials (~/.config/evalsi/credentials), mode 0600,
    and are refreshed automatically when they expire. Every command that talks to that server then sends them.

    \b
    Examples:
      evalsi login --server https://evals.example.com
      evalsi login --server http://127.0.0.1:8080 --browser
    """
    from evalsi.client_auth.login import login
    from evalsi.client_auth.oauth import LoginConfig

    url = _server(server)
    config = None
    if issuer or client_id:
        if not (issuer and client_id):
            raise click.UsageError("--issuer and --client-id go together")
        config = LoginConfig(issuer, client_id, scopes or LoginConfig.scopes)
    elif scopes:
        from evalsi.client_auth.oauth import fetch_login_config

        advertised = fetch_login_config(url)
        config = LoginConfig(advertised.issuer, advertised.client_id, scopes, advertised.audience)
    cache = _cache()
    signed_in = login(url, cache, method="browser" if method == "browser" else "device", config=config,
                      inform=lambda line: click.echo(line, err=True))
    expiry = ""
    if signed_in.expires_at:
        minutes = max(0, round((signed_in.expires_at - time.time()) / 60))
        expiry = f"; the token expires in {minutes} min" + (
            " and is refreshed then" if signed_in.refresh_token else ", then log in again")
    click.echo(f"logged in to {url}{_as_whom(url, cache, signed_in)} with {signed_in.issuer} (cached in "
               f"{cache.path}{expiry})", err=True)


def _as_whom(url: str, cache: CredentialCache, signed_in: CachedLogin) -> str:
    """`` as <principal>`` from the server's WhoAmI: the new token is tried at once, so a server that refuses it
    (another audience, no binding) says so now rather than at the next command."""
    from evalsi.client import Client
    from evalsi.client_auth.sources import CachedLoginCredential, refresh_login

    try:
        with Client(url, credentials=CachedLoginCredential(cache, url, signed_in, refresh_login)) as client:
            return f" as {client.auth.whoami().id}"
    except EvalsiError as exc:
        click.echo(f"warning: the server did not accept the new login yet: {exc}", err=True)
        return ""


@click.command("logout")
@click.option("--server", default=None, metavar="URL", help=SERVER_HELP)
@click.option("--all", "everything", is_flag=True, help="Forget the login of every server.")
@handle_errors
def logout_command(server: str | None, everything: bool) -> None:
    """Forget the tokens `evalsi login` cached for a server (or every server with --all).

    The issuer's session is not ended: its refresh token is only deleted here."""
    cache = _cache()
    if everything:
        gone = cache.remove(None)
    else:
        url = _server(server)
        gone = cache.remove(url)
        if not gone:
            click.echo(f"no login cached for {url}", err=True)
            return
    for name in gone:
        click.echo(f"logged out of {name}", err=True)

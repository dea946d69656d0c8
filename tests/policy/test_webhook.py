"""Signed alert webhooks: the signature checked independently with hmac, delivery to a local receiver, retries."""

from __future__ import annotations

import hashlib
import hmac
import json

import aiohttp
from aiohttp import web

from evalsi.policy import SIGNATURE_HEADER, WebhookSender, alert_payload, sign, verify

SECRET = "s3cret"


def test_signature_matches_an_independent_hmac() -> None:
    body = alert_payload(policy="p", project="x", rule="mean('m') < 0.7", window_start=0, window_s=300,
                         values={"mean('m')": 0.5}, key="k")
    header = sign(SECRET, body, 1700000000)
    expected = hmac.new(SECRET.encode(), b"1700000000." + body, hashlib.sha256).hexdigest()
    assert header == f"t=1700000000,v1={expected}"
    assert verify(SECRET, body, header, now=1700000010)
    assert not verify("other", body, header, now=1700000010)
    assert not verify(SECRET, body + b" ", header, now=1700000010)
    assert not verify(SECRET, body, header, now=1700009999)  # stale
    assert json.loads(body)["window"] == {"start": 0, "end": 300}


async def _serve(handler) -> tuple[web.AppRunner, str]:
    app = web.Application()
    app.router.add_post("/hook", handler)
    runner = web.AppRunner(app)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    port = runner.addresses[0][1]
    return runner, f"http://127.0.0.1:{port}/hook"


async def test_delivered_to_a_local_receiver_after_a_retry() -> None:
    received: list[tuple[bytes, str, str]] = []

    async def handler(request: web.Request) -> web.Response:
        body = await request.read()
        received.append((body, request.headers[SIGNATURE_HEADER], request.headers.get("Evalsi-Delivery", "")))
        return web.Response(status=503 if len(received) == 1 else 204)

    runner, url = await _serve(handler)
    sleeps: list[float] = []

    async def sleep(seconds: float) -> None:
        sleeps.append(seconds)

    try:
        body = alert_payload(policy="p", project="x", rule="r", window_start=0, window_s=60, values={}, key="abc")
        async with aiohttp.ClientSession() as session:
            sender = WebhookSender(session, backoff_s=0.25, sleep=sleep)
            delivery = await sender.send(url, body, secret=SECRET, key="abc")
    finally:
        await runner.cleanup()
    assert delivery.delivered and delivery.attempts == 2 and delivery.status == 204
    assert sleeps == [0.25]
    for got, header, key in received:
        assert got == body and key == "abc"
        t, v1 = (part.split("=", 1)[1] for part in header.split(","))
        assert v1 == hmac.new(SECRET.encode(), f"{t}.".encode() + got, hashlib.sha256).hexdigest()


async def test_a_client_error_is_final_and_a_dead_host_exhausts_retries() -> None:
    async def refuse(request: web.Request) -> web.Response:
        return web.Response(status=400)

    runner, url = await _serve(refuse)

    async def sleep(seconds: float) -> None:
        return None

    try:
        async with aiohttp.ClientSession() as session:
            sender = WebhookSender(session, attempts=3, sleep=sleep)
            refused = await sender.send(url, b"{}", secret=SECRET)
            assert not refused.delivered and refused.attempts == 1 and refused.status == 400
    finally:
        await runner.cleanup()
    async with aiohttp.ClientSession() as session:
        dead = await WebhookSender(session, attempts=3, sleep=sleep).send(url, b"{}", secret=SECRET)
    assert not dead.delivered and dead.attempts == 3 and dead.status is None and dead.error

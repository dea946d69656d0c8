"""What authentication costs a call: ``Authenticator.authenticate`` CPU per call, in one process, no transport.

For each default algorithm (RS256, ES256, EdDSA): a token seen for the first time (parsed, its signature and
claims checked) and the same token again (the verified-token cache); and an ``evk_`` API key among ten configured
keys. Prints microseconds of process CPU and of wall time per call, and the load average (the machine is shared).

    .venv/bin/python benchmarks/auth_verify.py [--calls 2000]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import time
from typing import Any

import jwt
from cryptography.hazmat.primitives.asymmetric import ec, ed25519, rsa
from jwt.algorithms import ECAlgorithm, OKPAlgorithm, RSAAlgorithm

from evalsi.auth.api_keys import hash_api_key, new_api_key
from evalsi.auth.authenticator import Authenticator
from evalsi.auth.config import load_auth_config
from evalsi.auth.principal import Credentials

ISSUER = "https://sso.example.test/realms/bench"
AUDIENCE = "evals.si"
# What a cached call may cost: a hash and a lookup, well below a signature check.
CACHED_TARGET_US = 20.0


def _signing_keys() -> dict[str, tuple[Any, dict[str, Any]]]:
    rsa_key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    ec_key = ec.generate_private_key(ec.SECP256R1())
    ed_key = ed25519.Ed25519PrivateKey.generate()
    return {
        "RS256": (rsa_key, RSAAlgorithm.to_jwk(rsa_key.public_key(), as_dict=True)),
        "ES256": (ec_key, ECAlgorithm.to_jwk(ec_key.public_key(), as_dict=True)),
        "EdDSA": (ed_key, OKPAlgorithm.to_jwk(ed_key.public_key(), as_dict=True)),
    }


def _token(private: Any, algorithm: str, serial: int) -> Credentials:
    now = int(time.time())
    claims = {"iss": ISSUER, "aud": AUDIENCE, "sub": f"user-{serial}", "iat": now, "exp": now + 3600,
              "email": "ada@example.test", "groups": ["eng"]}
    token = jwt.encode(claims, private, algorithm=algorithm, headers={"kid": algorithm})
    return Credentials("http", headers={"authorization": f"Bearer {token}"})


async def _per_call(authenticator: Authenticator, calls: list[Credentials]) -> tuple[float, float]:
    cpu, wall = time.process_time(), time.perf_counter()
    for credentials in calls:
        await authenticator.authenticate(credentials)
    count = len(calls)
    return 1e6 * (time.process_time() - cpu) / count, 1e6 * (time.perf_counter() - wall) / count


async def main(calls: int) -> None:
    keys = _signing_keys()
    api_key = new_api_key()
    config = load_auth_config({
        "jwt": {"providers": [{"name": "bench", "issuer": ISSUER, "audiences": [AUDIENCE],
                               "jwks": {"inline": {"keys": [{**jwk, "kid": name} for name, (_, jwk) in
                                                            keys.items()]}}}]},
        "api_keys": {"keys": [{"name": f"key-{i}", "key": hash_api_key(api_key if i == 7 else new_api_key())}
                              for i in range(10)]},
    })
    authenticator = Authenticator(config)
    print(f"load average {os.getloadavg()[0]:.2f}; {calls} calls each; microseconds per call (CPU / wall)")
    worst_cached = 0.0
    for algorithm, (private, _) in keys.items():
        fresh = [_token(private, algorithm, serial) for serial in range(calls)]
        first_cpu, first_wall = await _per_call(authenticator, fresh)
        again_cpu, again_wall = await _per_call(authenticator, [fresh[0]] * calls)
        worst_cached = max(worst_cached, again_cpu)
        print(f"  {algorithm:6s} first sight {first_cpu:7.1f} / {first_wall:7.1f}   "
              f"cached {again_cpu:6.1f} / {again_wall:6.1f}")
    key_cpu, key_wall = await _per_call(
        authenticator, [Credentials("http", headers={"authorization": f"Bearer {api_key}"})] * calls)
    print(f"  evk_ key among 10       {key_cpu:7.1f} / {key_wall:7.1f}")
    verdict = "meets" if worst_cached <= CACHED_TARGET_US else "misses"
    print(f"cached token: {worst_cached:.1f} us CPU at worst; target <= {CACHED_TARGET_US:g} us ({verdict})")
    await authenticator.aclose()


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=2000)
    asyncio.run(main(parser.parse_args().calls))

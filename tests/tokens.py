"""JWTs as a company's OAuth provider would mint them, with real RSA keys (joserfc), and the
forgeries a resource server must refuse."""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import time
from typing import Any

from joserfc import jwt
from joserfc.jwk import RSAKey

ISSUER = "https://login.example.com/"
KEY = RSAKey.generate_key(2048, parameters={"kid": "k1"})
OTHER_KEY = RSAKey.generate_key(2048, parameters={"kid": "k1"})  # same kid, another key


def claims(audience: str, **overrides: Any) -> dict[str, Any]:
    """Alice's claims for ``audience``, valid for five minutes; an override of None drops the claim."""
    now = int(time.time())
    base = {"iss": ISSUER, "aud": audience, "sub": "alice", "iat": now, "exp": now + 300}
    return {k: v for k, v in (base | overrides).items() if v is not None}


def mint(audience: str, key: RSAKey = KEY, **overrides: Any) -> str:
    return jwt.encode({"alg": "RS256", "kid": key.kid}, claims(audience, **overrides), key)


def _b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def forged(audience: str, alg: str) -> str:
    """A token a library would refuse to make: ``alg=none`` (unsigned), or HS256 keyed with the
    provider's public key (algorithm confusion)."""
    signing_input = f"{_b64(json.dumps({'alg': alg, 'typ': 'JWT'}).encode())}.{_b64(json.dumps(claims(audience)).encode())}"
    if alg == "none":
        return signing_input + "."
    signature = hmac.new(KEY.as_pem(private=False), signing_input.encode(), hashlib.sha256).digest()
    return f"{signing_input}.{_b64(signature)}"


def jwks() -> dict[str, Any]:
    """The provider's public key set."""
    return {"keys": [KEY.as_dict(private=False) | {"use": "sig", "alg": "RS256"}]}

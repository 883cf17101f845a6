"""Check the credentials Metacontroller's webhook ``authorization`` or ``basicAuth`` sends.

Comparisons run in constant time so a caller cannot learn a secret byte by byte from
response times, and nothing here ever logs what was presented.
"""

from __future__ import annotations

import base64
import binascii
import hmac
from dataclasses import replace

from hooks.settings import ServerSettings


def auth_scheme(settings: ServerSettings) -> str | None:
    """``Bearer``, ``Basic``, or None when the hook runs without authentication."""
    if settings.auth_token:
        return "Bearer"
    if settings.basic_auth_username:
        return "Basic"
    return None


def without_credentials(settings: ServerSettings) -> ServerSettings:
    """The server settings with no authentication, for answering a request that never
    crossed a network (``replay``): whoever can read the saved request and the settings
    needs no credential to see the answer."""
    return replace(settings, auth_token="", basic_auth_username="", basic_auth_password="")


def authorized(header: str | None, settings: ServerSettings) -> bool:
    """Whether an ``Authorization`` header carries the configured credentials."""
    scheme = auth_scheme(settings)
    if scheme is None:
        return True
    presented_scheme, _, credentials = (header or "").partition(" ")
    if presented_scheme.lower() != scheme.lower():
        return False
    if scheme == "Bearer":
        return hmac.compare_digest(credentials.strip().encode(), settings.auth_token.encode())
    try:
        decoded = base64.b64decode(credentials.strip(), validate=True)
    except (binascii.Error, ValueError):
        return False
    username, _, password = decoded.partition(b":")
    user_ok = hmac.compare_digest(username, settings.basic_auth_username.encode())
    password_ok = hmac.compare_digest(password, settings.basic_auth_password.encode())
    return user_ok and password_ok

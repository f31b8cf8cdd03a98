"""Provider API keys, read from AWS Secrets Manager on first use and cached per process.

The ModelTurn function's role needs ``secretsmanager:GetSecretValue`` on each configured secret
(``secret_id`` of a provider in ``LONGSTEP_MODEL_PROVIDERS``), and ``kms:Decrypt`` on its key when
the secret is encrypted with a customer-managed key. No other function needs it.

A secret holds the key as its whole ``SecretString``, or a JSON object with an ``api_key`` field.
"""

from __future__ import annotations

import json
import threading

from longstep import clients
from longstep.classify import classify_client_error
from longstep.errors import ModelAccessError

_lock = threading.Lock()
_keys: dict[str, str] = {}


def api_key(secret_id: str) -> str:
    """The API key stored in ``secret_id`` (read once per process).

    Raises:
        ModelAccessError: the secret cannot be read, or holds no key.
    """
    with _lock:
        cached = _keys.get(secret_id)
    if cached is not None:
        return cached
    from botocore.exceptions import ClientError

    try:
        value = clients.client("secretsmanager").get_secret_value(SecretId=secret_id).get("SecretString") or ""
    except ClientError as exc:  # throttling and 5xx are retried; a missing secret or grant escalates
        error = classify_client_error(exc, model=True)
        raise type(error)(f"secret_id: cannot read secret {secret_id!r}: {error}") from exc
    key = _key_in(value, secret_id)
    with _lock:
        _keys[secret_id] = key
    return key


def _key_in(value: str, secret_id: str) -> str:
    text = value.strip()
    if text.startswith("{"):
        try:
            text = str(json.loads(text).get("api_key") or "").strip()
        except (json.JSONDecodeError, AttributeError):
            raise ModelAccessError(f"secret_id: secret {secret_id!r} is neither a key nor JSON with api_key") from None
    if not text:
        raise ModelAccessError(f"secret_id: secret {secret_id!r} holds no API key")
    return text


def forget() -> None:
    """Drop every cached key (tests; a rotated key is picked up by new processes)."""
    with _lock:
        _keys.clear()

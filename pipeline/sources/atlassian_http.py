"""One retrying read against an Atlassian REST API (Confluence or Jira), through an
atlassian-python-api client: what both sources share of the wire.

* **Retries** (tenacity): 429 and 5xx answers, dropped connections and truncated bodies are tried
  again, waiting what ``Retry-After`` asks (capped) or backing off exponentially with jitter.
* 404 is an answer (None), 401/403 and other 4xx are errors naming the product and what to check,
  a whole body that is not JSON (a login page in front of the site) is an error, never data.
"""

from __future__ import annotations

import logging
import random
import time
from collections.abc import Callable
from datetime import UTC, datetime
from email.utils import parsedate_to_datetime
from typing import Any

import requests
from tenacity import RetryCallState, Retrying, retry_if_exception_type, stop_after_attempt

from core.errors import SourceError

log = logging.getLogger("wayfinder.sources")

MAX_RETRY_AFTER_S = 60.0
_TRANSIENT_STATUS = {429, 500, 502, 503, 504}


class _Transient(Exception):
    def __init__(self, message: str, retry_after_s: float | None = None) -> None:
        super().__init__(message)
        self.retry_after_s = retry_after_s


class AtlassianHttp:
    """GETs through ``client`` (an atlassian-python-api client) with retries; ``product`` ("Confluence", "Jira") and ``refused``
    (what to check when the account is refused) word the errors. ``calls`` counts every request,
    retries included."""

    def __init__(
        self, client: Any, *, product: str, refused: str, max_attempts: int, sleep: Callable[[float], None] | None = None
    ) -> None:
        self._client = client
        self._product = product
        self._refused = refused
        self._max_attempts = max_attempts
        self._sleep = sleep
        self.calls = 0

    def json(self, path: str, params: dict[str, Any], *, absolute: bool = False) -> Any:
        return self.request(path, params, absolute=absolute, as_json=True)

    def request(self, path: str, params: dict[str, Any], *, absolute: bool, as_json: bool, post: Any = None) -> Any:
        """One GET (or, with ``post``, a POST of that JSON: a read over JSON-RPC), retried on
        transient failures; None for 404. A JSON body that cannot be read (a connection dropped
        midway) counts as transient too."""
        for attempt in self._retrying():
            with attempt:
                self.calls += 1
                try:
                    if post is not None:
                        response = self._client.post(path, json=post, params=params or None, absolute=absolute, advanced_mode=True)
                    else:
                        response = self._client.get(path, params=params or None, absolute=absolute, advanced_mode=True)
                    status = response.status_code
                    if status == 404:
                        return None
                    if status in _TRANSIENT_STATUS:
                        raise _Transient(f"HTTP {status} on {path}", _retry_after(response))
                    if status in (401, 403):
                        raise SourceError(f"{self._product} refused the sync account ({status}) on {path}: {self._refused}")
                    if status >= 400:
                        raise SourceError(f"{self._product} answered {status} on {path}: {_message(response)}")
                    if not as_json:
                        return response.content
                    return self._json_body(response, path)
                except (requests.ConnectionError, requests.Timeout, requests.exceptions.ChunkedEncodingError) as exc:
                    raise _Transient(f"{type(exc).__name__} on {path}") from exc
        raise AssertionError("unreachable")  # pragma: no cover - the retry policy raises on giving up

    def _retrying(self) -> Retrying:
        def give_up(state: RetryCallState) -> None:
            error = state.outcome.exception() if state.outcome else None
            raise SourceError(f"{self._product} did not answer after {state.attempt_number} attempts: {error}") from error

        return Retrying(
            stop=stop_after_attempt(self._max_attempts),
            wait=_wait,
            retry=retry_if_exception_type(_Transient),
            retry_error_callback=give_up,
            sleep=self._sleep or time.sleep,
            before_sleep=lambda state: log.info("retrying %s call: %s", self._product, state.outcome.exception() if state.outcome else ""),
        )

    def _json_body(self, response: requests.Response, path: str) -> Any:
        """The JSON of a 200 answer. A body cut short by a dropped connection is worth another try;
        a whole body that is not JSON (a login page in front of the site) is not."""
        try:
            return response.json()
        except ValueError as exc:
            if "json" in response.headers.get("Content-Type", "") or not response.text.strip():
                raise _Transient(f"unreadable answer from {path}: {exc}") from exc
            raise SourceError(f"{self._product} answered {path} with something other than JSON (a login page?): {response.text[:120]!r}") from exc


def _wait(state: RetryCallState) -> float:
    error = state.outcome.exception() if state.outcome else None
    if isinstance(error, _Transient) and error.retry_after_s is not None:
        return min(error.retry_after_s, MAX_RETRY_AFTER_S)
    return min(8.0, 0.25 * 2 ** (state.attempt_number - 1)) * (0.5 + random.random() / 2)


def _retry_after(response: requests.Response) -> float | None:
    """``Retry-After`` in seconds or as an HTTP date."""
    value = response.headers.get("Retry-After")
    if value is None:
        return None
    try:
        return max(0.0, float(value))
    except ValueError:
        pass
    try:
        return max(0.0, (parsedate_to_datetime(value) - datetime.now(UTC)).total_seconds())
    except (TypeError, ValueError):
        return None


def _message(response: requests.Response) -> str:
    """The error text of an answer: Confluence's ``message``, Jira's ``errorMessages``."""
    try:
        body = response.json()
    except ValueError:
        return response.text[:300]
    if isinstance(body, dict):
        return str(body.get("message") or "; ".join(map(str, body.get("errorMessages", []))))[:300]
    return str(body)[:300]

"""The OpenFGA client: the only module that imports openfga-sdk.

Every SDK or transport failure becomes AuthorizationUnavailable, and every call has a deadline, so
callers fail closed without knowing the SDK.
"""

from __future__ import annotations

import asyncio
import json
import re
from collections.abc import AsyncIterator, Iterable, Sequence
from contextlib import asynccontextmanager
from importlib import resources
from typing import Any

from openfga_sdk import ClientConfiguration, OpenFgaClient
from openfga_sdk.client.models import (
    ClientBatchCheckItem,
    ClientBatchCheckRequest,
    ClientTuple,
    ClientWriteRequest,
)
from openfga_sdk.credentials import CredentialConfiguration, Credentials
from openfga_sdk.configuration import RetryParams
from openfga_sdk.models import (
    CreateStoreRequest,
    ReadRequestTupleKey,
    RelationshipCondition,
    WriteAuthorizationModelRequest,
)

from authz.base import Check, Condition, RelationTuple
from core.errors import AuthorizationUnavailable, ConfigurationError
from core.settings import OpenFGASettings

MAX_CHECKS_PER_REQUEST = 50  # server-side BatchCheck limit
MAX_TUPLES_PER_WRITE = 100  # server-side Write limit
READ_PAGE_SIZE = 100


def load_model() -> dict[str, Any]:
    """The authorization model shipped with Wayfinder, as OpenFGA JSON (generated from model.fga)."""
    return json.loads(resources.files("authz").joinpath("model.json").read_text())


def _config(settings: OpenFGASettings, store_id: str | None = None) -> ClientConfiguration:
    return ClientConfiguration(
        api_url=settings.url,
        store_id=store_id,
        credentials=Credentials(
            method="api_token",
            configuration=CredentialConfiguration(api_token=settings.preshared_key.get_secret_value()),
        ),
        # One quick retry at most: a slow engine must fail closed within the check deadline.
        retry_params=RetryParams(max_retry=1, min_wait_in_ms=50),
        timeout_millisec=int(settings.check_timeout_s * 1000),
    )


def _new_sdk_client(settings: OpenFGASettings, store_id: str | None = None) -> OpenFgaClient:
    try:
        return OpenFgaClient(_config(settings, store_id=store_id))
    except Exception as exc:  # the SDK validates the URL and credentials here
        raise ConfigurationError(f"OpenFGA settings are not usable: {type(exc).__name__}: {exc}") from exc


@asynccontextmanager
async def _sdk_client(settings: OpenFGASettings) -> AsyncIterator[OpenFgaClient]:
    async with _new_sdk_client(settings) as client:
        yield client


@asynccontextmanager
async def _translated(what: str, deadline_s: float):
    """Give every call a deadline and turn every failure into AuthorizationUnavailable."""
    try:
        async with asyncio.timeout(deadline_s):
            yield
    except AuthorizationUnavailable:
        raise
    except TimeoutError as exc:
        raise AuthorizationUnavailable(f"OpenFGA {what} timed out after {deadline_s}s") from exc
    except Exception as exc:  # the SDK raises many unrelated types (aiohttp, ApiException, ...)
        raise AuthorizationUnavailable(f"OpenFGA {what} failed: {type(exc).__name__}: {str(exc)[:300]}") from exc


class OpenFGAClient:
    """Authorizer and TupleStore over a running OpenFGA server.

    ``async with OpenFGAClient(settings)`` resolves the store by name and pins the latest model;
    with ``provision=True`` it creates the store and writes the shipped model when they differ.
    While the store cannot be resolved (OpenFGA down at start, or restarted without its data),
    every call fails closed and the next call tries again. Concurrent callers share one attempt
    instead of queueing behind a lock, and each waits only as long as its own deadline allows.
    """

    def __init__(self, settings: OpenFGASettings, *, provision: bool = False) -> None:
        self._settings = settings
        self._provision = provision
        self._client: OpenFgaClient | None = None
        self._model_id: str | None = None
        self._connecting: asyncio.Future[None] | None = None

    @property
    def model_id(self) -> str:
        return self._model_id or "unresolved"

    @property
    def store_id(self) -> str:
        return self._sdk.get_store_id()

    @property
    def _sdk(self) -> OpenFgaClient:
        if self._client is None:
            raise ConfigurationError("OpenFGAClient used outside 'async with'")
        return self._client

    async def __aenter__(self) -> OpenFGAClient:
        try:
            await self._ready()
        except AuthorizationUnavailable:
            if self._provision:
                raise
            # A server starts even while OpenFGA is down: every request then fails closed until
            # the store and model can be resolved (see _ready).
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        if self._connecting is not None and not self._connecting.done():
            self._connecting.cancel()
            await asyncio.wait([self._connecting])  # let it close what it opened
        self._connecting = None
        if self._client is not None:
            await self._client.close()
            self._client = None
        self._model_id = None

    async def _ready(self) -> OpenFgaClient:
        if self._model_id is not None:
            return self._sdk
        if self._connecting is None or self._connecting.done():
            self._connecting = asyncio.ensure_future(self._connect())
            # Retrieve the outcome even when every waiter gave up at its deadline.
            self._connecting.add_done_callback(lambda done: done.cancelled() or done.exception())
        # Shielded: one caller reaching its deadline must not cancel the attempt the others share.
        await asyncio.shield(self._connecting)
        return self._sdk

    def _forget_store(self) -> None:
        """The store or model is gone (OpenFGA restarted without its data): resolve them again on
        the next call. Timeouts and refused connections keep the client: the transport reconnects
        by itself, and re-resolving under load would only close connections in use."""
        self._model_id = None

    async def _connect(self) -> None:
        # Each lookup may take one check deadline; a waiting request gives up at its own deadline
        # anyway (the attempt goes on for the others).
        deadline = self._settings.check_timeout_s
        async with _sdk_client(self._settings) as bootstrap, _translated("store lookup", deadline):
            stores = (await bootstrap.list_stores({"name": self._settings.store_name})).stores or []
            if stores:
                store_id = stores[0].id
            elif self._provision:
                store_id = (await bootstrap.create_store(CreateStoreRequest(name=self._settings.store_name))).id
            else:
                raise AuthorizationUnavailable(
                    f"OpenFGA store {self._settings.store_name!r} does not exist: run 'wayfinder sync' first"
                )
        client = _new_sdk_client(self._settings, store_id)
        try:
            async with _translated("model lookup", deadline * (4 if self._provision else 1)):
                model_id = await _pin_model(client, provision=self._provision)
        except BaseException:
            await client.close()
            raise
        client.set_authorization_model_id(model_id)
        previous, self._client = self._client, client
        self._model_id = model_id
        if previous is not None:
            await previous.close()

    async def batch_check(self, checks: Sequence[Check]) -> list[bool]:
        if not checks:
            return []
        items = [
            ClientBatchCheckItem(
                user=c.user,
                relation=c.relation,
                object=c.object,
                correlation_id=str(i),
                context=dict(c.context) if c.context else None,
            )
            for i, c in enumerate(checks)
        ]
        sdk = await self._ready()
        try:
            async with _translated("batch check", self._settings.check_timeout_s):
                response = await sdk.batch_check(
                    ClientBatchCheckRequest(checks=items),
                    {"max_batch_size": MAX_CHECKS_PER_REQUEST, "max_parallel_requests": 4},
                )
        except AuthorizationUnavailable as exc:
            if _store_or_model_gone(exc.__cause__):
                self._forget_store()  # OpenFGA restarted without its data: resolve them again
            raise
        answers: dict[int, bool] = {}
        for single in response.result:
            if single.error is not None:
                # An errored check is neither allowed nor denied: the whole answer is unusable.
                raise AuthorizationUnavailable(f"OpenFGA check failed: {single.error}")
            answers[int(single.correlation_id)] = bool(single.allowed)
        if len(answers) != len(checks):
            raise AuthorizationUnavailable("OpenFGA batch check returned an incomplete answer")
        return [answers[i] for i in range(len(checks))]

    async def read_tuples(self, object: str | None = None) -> set[RelationTuple]:
        found: set[RelationTuple] = set()
        token: str | None = None
        sdk = await self._ready()
        key = ReadRequestTupleKey(object=object) if object else ReadRequestTupleKey()
        async with _translated("read", self._settings.check_timeout_s * 20):
            while True:
                options: dict[str, Any] = {"page_size": READ_PAGE_SIZE}
                if token:
                    options["continuation_token"] = token
                page = await sdk.read(key, options)
                found.update(_from_sdk(t.key) for t in page.tuples)
                token = page.continuation_token
                if not token:
                    return found

    async def write_tuples(self, writes: Iterable[RelationTuple], deletes: Iterable[RelationTuple]) -> None:
        """Deletes go first, so a change interrupted midway can only have narrowed access.

        A change that fits in one request is one OpenFGA transaction (atomic, e.g. a page move);
        a larger one is sent as delete batches, then write batches.
        """
        writes, deletes = sorted(writes, key=lambda t: t.key), sorted(deletes, key=lambda t: t.key)
        sdk = await self._ready()
        if len(writes) + len(deletes) <= MAX_TUPLES_PER_WRITE:
            requests = [ClientWriteRequest(writes=_to_sdk(writes) or None, deletes=_to_sdk(deletes) or None)]
        else:
            requests = [
                ClientWriteRequest(deletes=_to_sdk(deletes[start : start + MAX_TUPLES_PER_WRITE]))
                for start in range(0, len(deletes), MAX_TUPLES_PER_WRITE)
            ] + [
                ClientWriteRequest(writes=_to_sdk(writes[start : start + MAX_TUPLES_PER_WRITE]))
                for start in range(0, len(writes), MAX_TUPLES_PER_WRITE)
            ]
        for request in requests:
            if not (request.writes or request.deletes):
                continue
            async with _translated("write", self._settings.check_timeout_s * 4):
                # The SDK's default: one Write call, one transaction (its batch mode writes before it deletes).
                await sdk.write(request)


def _store_or_model_gone(error: BaseException | None) -> bool:
    """Did OpenFGA answer that the pinned store or authorization model does not exist?"""
    text = str(error)
    return "store_id_not_found" in text or "authorization_model_not_found" in text


def _to_sdk(tuples: Sequence[RelationTuple]) -> list[ClientTuple]:
    return [
        ClientTuple(
            t.user,
            t.relation,
            t.object,
            RelationshipCondition(name=t.condition.name, context=dict(t.condition.context)) if t.condition else None,
        )
        for t in tuples
    ]


def _from_sdk(key: Any) -> RelationTuple:
    condition = None
    if key.condition is not None:
        context = {name: str(value) for name, value in (key.condition.context or {}).items()}
        condition = Condition.of(key.condition.name, context)
    return RelationTuple(key.user, key.relation, key.object, condition)


async def _pin_model(client: OpenFgaClient, *, provision: bool) -> str:
    wanted = load_model()
    latest = await client.read_latest_authorization_model()
    current = latest.authorization_model if latest else None
    if current is not None and _same_model(current.to_dict(), wanted):
        return current.id
    if not provision:
        raise AuthorizationUnavailable("OpenFGA store has no current Wayfinder model: run 'wayfinder sync'")
    written = await client.write_authorization_model(WriteAuthorizationModelRequest(**wanted))
    return written.authorization_model_id


def _same_model(current: dict[str, Any], wanted: dict[str, Any]) -> bool:
    """Compare models as OpenFGA stores them (the SDK answers in snake_case, the DSL tool in camelCase)."""

    def canonical(model: dict[str, Any]) -> str:
        keep = {key: model.get(key) for key in ("schema_version", "type_definitions", "conditions")}
        return json.dumps(_normalise(keep), sort_keys=True)

    return canonical(current) == canonical(wanted)


_NOISE_KEYS = frozenset({"source_info", "module", "file"})  # DSL source positions
_DROPPED_WHEN_EMPTY = frozenset({"relations", "metadata"})


def _normalise(value: Any) -> Any:
    """snake_case keys, without the noise between the two spellings: DSL source positions, empty
    strings, "generic_types: []", and empty "relations"/"metadata" the server adds or leaves out.
    Type restrictions (under "metadata") are compared; empty "this"/"wildcard" objects stay."""
    if isinstance(value, list):
        return [_normalise(v) for v in value]
    if not isinstance(value, dict):
        return value
    result = {}
    for key, item in value.items():
        key = re.sub(r"(?<!^)(?=[A-Z])", "_", key).lower()
        item = _normalise(item)
        if item is None or item == "" or item == [] or key in _NOISE_KEYS:
            continue
        if key in _DROPPED_WHEN_EMPTY and item == {}:
            continue
        result[key] = item
    return result

"""The OpenFGA client: the only module that imports openfga-sdk.

Every SDK or transport failure becomes AuthorizationUnavailable, and every call has a deadline, so
callers fail closed without knowing the SDK.
"""

from __future__ import annotations

import asyncio
import json
import re
from collections.abc import Iterable, Sequence
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
from openfga_sdk.models import CreateStoreRequest, ReadRequestTupleKey, WriteAuthorizationModelRequest
from openfga_sdk.configuration import RetryParams

from authz.base import Check, RelationTuple
from core.errors import AuthorizationUnavailable, ConfigurationError
from core.settings import OpenFGASettings

MAX_CHECKS_PER_REQUEST = 50  # server-side BatchCheck limit
MAX_TUPLES_PER_WRITE = 100  # server-side Write limit
READ_PAGE_SIZE = 100


def load_model() -> dict[str, Any]:
    """The authorization model shipped with Wayfinder, as OpenFGA JSON (generated from model.fga)."""
    return json.loads(resources.files("authz").joinpath("model.json").read_text())


def _config(settings: OpenFGASettings, store_id: str | None = None, model_id: str | None = None):
    return ClientConfiguration(
        api_url=settings.url,
        store_id=store_id,
        authorization_model_id=model_id,
        credentials=Credentials(
            method="api_token",
            configuration=CredentialConfiguration(api_token=settings.preshared_key.get_secret_value()),
        ),
        # One quick retry at most: a slow engine must fail closed within the check deadline.
        retry_params=RetryParams(max_retry=1, min_wait_in_ms=50),
        timeout_millisec=int(settings.check_timeout_s * 1000),
    )


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
    """

    def __init__(self, settings: OpenFGASettings, *, provision: bool = False) -> None:
        self._settings = settings
        self._provision = provision
        self._client: OpenFgaClient | None = None
        self._model_id: str | None = None
        self._connecting = asyncio.Lock()  # concurrent requests must not swap the client under each other

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
        if self._client is not None:
            await self._client.close()
            self._client = None
        self._model_id = None

    async def _ready(self) -> OpenFgaClient:
        async with self._connecting:
            if self._model_id is None:
                await self._connect()
            return self._sdk

    async def _connect(self) -> None:
        deadline = self._settings.check_timeout_s * 4
        async with OpenFgaClient(_config(self._settings)) as bootstrap:
            async with _translated("store lookup", deadline):
                stores = (await bootstrap.list_stores({"name": self._settings.store_name})).stores or []
                if stores:
                    store_id = stores[0].id
                elif self._provision:
                    created = await bootstrap.create_store(CreateStoreRequest(name=self._settings.store_name))
                    store_id = created.id
                else:
                    raise AuthorizationUnavailable(
                        f"OpenFGA store {self._settings.store_name!r} does not exist: run 'wayfinder index' first"
                    )
        if self._client is not None:
            await self._client.close()
        self._client = OpenFgaClient(_config(self._settings, store_id=store_id))
        try:
            async with _translated("model lookup", deadline):
                model_id = await self._pin_model()
        except BaseException:
            await self._client.close()
            self._client = None
            raise
        self._sdk.set_authorization_model_id(model_id)
        self._model_id = model_id

    async def _pin_model(self) -> str:
        wanted = load_model()
        latest = await self._sdk.read_latest_authorization_model()
        current = latest.authorization_model if latest else None
        if current is not None and _same_model(current.to_dict(), wanted):
            return current.id
        if not self._provision:
            raise AuthorizationUnavailable("OpenFGA store has no current Wayfinder model: run 'wayfinder index'")
        written = await self._sdk.write_authorization_model(WriteAuthorizationModelRequest(**wanted))
        return written.authorization_model_id

    async def batch_check(self, checks: Sequence[Check]) -> list[bool]:
        if not checks:
            return []
        items = [
            ClientBatchCheckItem(user=c.user, relation=c.relation, object=c.object, correlation_id=str(i))
            for i, c in enumerate(checks)
        ]
        sdk = await self._ready()
        async with _translated("batch check", self._settings.check_timeout_s):
            response = await sdk.batch_check(
                ClientBatchCheckRequest(checks=items),
                {"max_batch_size": MAX_CHECKS_PER_REQUEST, "max_parallel_requests": 4},
            )
        answers: dict[int, bool] = {}
        for single in response.result:
            if single.error is not None:
                # An errored check is neither allowed nor denied: the whole answer is unusable.
                raise AuthorizationUnavailable(f"OpenFGA check failed: {single.error}")
            answers[int(single.correlation_id)] = bool(single.allowed)
        if len(answers) != len(checks):
            raise AuthorizationUnavailable("OpenFGA batch check returned an incomplete answer")
        return [answers[i] for i in range(len(checks))]

    async def read_tuples(self) -> set[RelationTuple]:
        found: set[RelationTuple] = set()
        token: str | None = None
        sdk = await self._ready()
        async with _translated("read", self._settings.check_timeout_s * 20):
            while True:
                options: dict[str, Any] = {"page_size": READ_PAGE_SIZE}
                if token:
                    options["continuation_token"] = token
                page = await sdk.read(ReadRequestTupleKey(), options)
                found.update(RelationTuple(t.key.user, t.key.relation, t.key.object) for t in page.tuples)
                token = page.continuation_token
                if not token:
                    return found

    async def write_tuples(self, writes: Iterable[RelationTuple], deletes: Iterable[RelationTuple]) -> None:
        sdk = await self._ready()
        for kind, tuples in (("writes", sorted(writes)), ("deletes", sorted(deletes))):
            for start in range(0, len(tuples), MAX_TUPLES_PER_WRITE):
                batch = [ClientTuple(t.user, t.relation, t.object) for t in tuples[start : start + MAX_TUPLES_PER_WRITE]]
                async with _translated("write", self._settings.check_timeout_s * 4):
                    await sdk.write(ClientWriteRequest(**{kind: batch}))


def _same_model(current: dict[str, Any], wanted: dict[str, Any]) -> bool:
    """Compare models as OpenFGA stores them (the SDK answers in snake_case, the DSL tool in camelCase)."""

    def canonical(model: dict[str, Any]) -> str:
        keep = {"schema_version": model.get("schema_version"), "type_definitions": model.get("type_definitions")}
        return json.dumps(_normalise(keep), sort_keys=True)

    return canonical(current) == canonical(wanted)


def _normalise(value: Any) -> Any:
    if isinstance(value, dict):
        return {
            re.sub(r"(?<!^)(?=[A-Z])", "_", k).lower(): _normalise(v)
            for k, v in value.items()
            # Noise between the two spellings: DSL source positions (metadata), the empty "object"
            # fields and "relations: {}" the server adds. Empty "this"/"wildcard" objects stay.
            if v is not None and v != "" and k != "metadata" and not (k == "relations" and v == {})
        }
    if isinstance(value, list):
        return [_normalise(v) for v in value]
    return value

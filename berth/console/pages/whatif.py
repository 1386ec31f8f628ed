"""What if (``POST /api/what-if``, YAML in the body, at most 1 MiB): the applications in
it decided as the leading scheduler would, and the stored ones that would move —
``berth explain --what-if``'s answer. Nothing is written."""

from __future__ import annotations

import asyncio
import time
from typing import Any

import msgspec
from starlette.requests import Request
from starlette.responses import Response

from berth.bootstrap.load import to_document
from berth.console.pages.common import answer, console, error, scope
from berth.controllers.scheduler.whatif import Answer, Consequence, leading_config, what_if
from berth.store import Invalid, Store, StoreError, keys
from berth.yamlfile import YamlRefused, documents

MAX_WHATIF = 1 << 20  # bytes of pasted YAML


class WhatIfPage(msgspec.Struct):
    config: str  # whose configuration decided (the leading scheduler's, or the default)
    seconds: float  # how long deciding took
    answers: list[Answer]
    consequences: list[Consequence]


class Refused(ValueError):
    """Input the console cannot decide on; the message names the document and field."""


def page(store: Store, text: str) -> WhatIfPage:
    loaded: list[tuple[keys.Key, dict[str, Any]]] = []
    problems: list[str] = []
    try:
        for where, data in documents(text, "the pasted YAML"):
            try:
                item = to_document(where, data)
            except Invalid as exc:
                problems += str(exc).splitlines()
                continue
            loaded.append((item.key, msgspec.to_builtins(item.doc)))
    except YamlRefused as exc:
        raise Refused(str(exc)) from None
    if problems:
        raise Refused("\n".join(problems))
    if not loaded:
        raise Refused("the pasted YAML holds no document")
    config, whose = leading_config(store)
    started = time.monotonic()
    try:
        result = what_if(store, config, loaded)
    except (StoreError, TimeoutError) as exc:
        raise Refused(f"cannot decide now: {exc}") from None
    return WhatIfPage(whose, round(time.monotonic() - started, 3), result.answers,
                      result.consequences)


async def endpoint(request: Request) -> Response:
    if scope(request).namespaces is not None:
        return error("the what-if decides over the whole fleet, every namespace's "
                     "applications with it: not with a team's credential", 403)
    body = await _bounded(request, MAX_WHATIF)
    if body is None:
        return error(f"the YAML is larger than {MAX_WHATIF >> 20} MiB", 413)
    try:
        text = body.decode()
    except UnicodeDecodeError:
        return error("the YAML is not UTF-8 text", 400)
    try:
        return answer(await asyncio.to_thread(page, console(request).store, text))
    except Refused as exc:
        return error(str(exc), 400)


async def _bounded(request: Request, limit: int) -> bytes | None:
    """The request's body, read no further than ``limit`` bytes (None: it is longer): a
    body is never held whole before it is known to fit."""
    declared = request.headers.get("content-length", "")
    if declared.isdigit() and int(declared) > limit:
        return None
    body = bytearray()
    async for chunk in request.stream():
        body += chunk
        if len(body) > limit:
            return None
    return bytes(body)

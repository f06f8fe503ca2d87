"""A batch client for OpenAI-compatible ``/v1/chat/completions`` endpoints (VLM-as-a-judge).

:func:`run_batch` sends one chat-completions request per :class:`JudgeItem` (the prompt
text and the image as a ``data:`` URL, OpenAI's vision message shape, which vLLM, Ollama,
llama.cpp's server and the hosted APIs all accept) and returns one :class:`ItemResult` per
item, in input order, inside a :class:`RunResult` with the run's token counts and cost.

Behaviour, and why:

- **Concurrency.** ``concurrency`` workers pull items from a queue, each with its own
  ``httpx.AsyncClient`` holding one keep-alive connection, so at most that many requests
  are in flight: a local vLLM server is saturated without a hosted API's rate limit being
  hammered. Not one client shared: httpx's pool (httpcore 1.0) scans all its connections
  for every request and hands one idle connection to several waiting requests, all but
  one of which retry; at 64 connections that tripled the CPU per request (4.4 ms against
  1.4) and left some requests waiting seconds for a connection (bench/results-judges.md).
- **Timeout and size.** ``timeout`` seconds per attempt in all, from connecting to the
  reply's last byte (a deadline, not a bound on each read: a server sending one byte a
  second would otherwise hold a worker for as long as it liked). A timed-out or dropped
  attempt is retried like a 5xx: a busy server is the usual cause. A reply is read as it
  arrives and given up past ``max_reply_bytes`` (not retried).
- **Where.** Connections go only to public addresses, or to the hosts and networks
  ``allowed`` lists (``annotation/judges/network.py``, checked at connect time). A refused
  address stops the run like a refused key. A port that refuses the connection and one
  that never answers read the same ("could not connect to the endpoint").
- **Retries.** 429 and 5xx are retried up to ``max_retries`` times with exponential backoff
  (``backoff * 2**attempt``, at most ``max_backoff``), or after the server's ``Retry-After``
  (seconds or an HTTP date) when it sends one: that is the server saying when it will
  answer. A ``Retry-After`` beyond ``max_backoff`` is not waited for; the item fails with
  that reason instead of stalling a worker for minutes.
- **No retry on other 4xx.** The request itself is wrong and will stay wrong; the item's
  error quotes the server's error message (200 characters at most) only when the body is
  a chat-completions error, never the body of anything else. 401 and 403 mean the key is
  wrong for every item: the first one stops the run, and every item not yet answered gets
  the same clear error (``RunResult.fatal``) without another request being sent.
- **Parsing.** ``parse(text)`` is the caller's (a mode's own validation): it returns the
  answer or raises ``ValueError`` for a malformed or out-of-range reply, recorded as that
  item's error with the raw reply kept. Nothing is retried for it: at temperature 0 the
  judge would say the same again.
- **Cache.** ``cache`` is any mutable mapping (a ``dict`` in tests; the platform backs it
  with a database table). The key is (prompt version, model, item key, SHA-256 of the
  image): a rerun of the same prompt version on the same images sends nothing. The model
  is in the key so that pointing a prompt version at another model cannot return the old
  model's answers. Only replies that parsed are cached, so a rerun retries the failures.
  Repeated runs at temperature > 0 (self-consistency) give each repeat its own item key
  (``"<item>#r2"``), and position-swapped pairs theirs (``"<pair>#ba"``).
- **Stop.** ``stop()``, when given, is asked before each item is taken: once it says True
  no new request is sent, the requests in flight finish, and every item not yet asked
  keeps ``NOT_ASKED`` as its error. The platform's runner sets it when its job ends
  early (a soft time limit), so a batch whose answers will not be stored stops spending.
- **Cost.** ``usage`` from each reply; cost = tokens / 1000 * the prices passed in. Cached
  answers cost nothing and are counted apart.
- **The key.** Sent only in the ``Authorization`` header. It is not in :class:`Endpoint`'s
  repr, and every message and raw reply this module records or logs is scrubbed of it,
  its encoded forms and its pieces, before any cut (a server may echo it; see
  ``annotation/judges/scrub.py``). Exceptions from httpx never escape: each becomes a
  short message.

The function is synchronous (a Celery task calls it); :func:`arun_batch` is the coroutine.
"""

import asyncio
import base64
import email.utils
import functools
import hashlib
import json
import logging
import time
from collections.abc import Callable, MutableMapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import httpx

from annotation.judges.network import AddressPolicy, AddressRefused, GuardedTransport
from annotation.judges.scrub import Scrubber
from rubrics import json_text

__all__ = [
    "Endpoint",
    "JudgeItem",
    "ItemResult",
    "RunResult",
    "CacheKey",
    "cache_key",
    "chat_payload",
    "run_batch",
    "arun_batch",
]

logger = logging.getLogger(__name__)

CacheKey = tuple[str, str, str, str]
# How much of a server's error message an item's error quotes: enough for "model not found".
_BODY_EXCERPT = 200
#: The most of a reply read (a reply is a few kilobytes; a spans answer tens at most).
MAX_REPLY_BYTES = 1024 * 1024


class Endpoint:
    """Where and as whom to ask: ``base_url`` ends with ``/v1`` (``http://127.0.0.1:8000/v1``)."""

    __slots__ = ("base_url", "model", "_api_key", "_scrub")

    def __init__(self, base_url: str, model: str, api_key: str = ""):
        if not base_url.startswith(("http://", "https://")):
            raise ValueError("base_url must start with http:// or https://")
        if not model:
            raise ValueError("model must be named")
        self.base_url = base_url.rstrip("/")
        self.model = model
        self._api_key = api_key
        self._scrub = Scrubber(api_key)

    @property
    def url(self) -> str:
        return f"{self.base_url}/chat/completions"

    def headers(self) -> dict[str, str]:
        return {"Authorization": f"Bearer {self._api_key}"} if self._api_key else {}

    def scrub(self, text: str) -> str:
        """``text`` with the key (and its encoded forms and pieces) replaced, for anything
        recorded or logged (``annotation/judges/scrub.py``)."""
        return self._scrub(text)

    def excerpt(self, text: str, limit: int = 200) -> str:
        """At most ``limit`` characters of ``text``, scrubbed before the cut."""
        return self._scrub.excerpt(text, limit)

    def __repr__(self) -> str:
        key = "set" if self._api_key else "none"
        return f"Endpoint(base_url={self.base_url!r}, model={self.model!r}, api_key=<{key}>)"


@dataclass(frozen=True)
class JudgeItem:
    """One question: ``key`` names it (unique in the batch), ``prompt`` is the full text."""

    key: str
    prompt: str
    image: bytes
    media_type: str = "image/jpeg"
    system: str = ""

    @functools.cached_property
    def image_hash(self) -> str:
        # Computed once per item (the cache lookup, the cache write and the caller's own
        # cache rows all need it; 10,000 items of 20 kB are 200 MB to hash each time).
        return hashlib.sha256(self.image).hexdigest()


@dataclass
class ItemResult:
    """The outcome for one item: ``answer`` (parsed) or ``error``, never both."""

    key: str
    answer: Any = None
    error: str = ""
    raw: str = ""
    prompt_tokens: int = 0
    completion_tokens: int = 0
    attempts: int = 0
    cached: bool = False

    @property
    def ok(self) -> bool:
        return not self.error


#: The error of an item the batch never asked (it was stopped first).
NOT_ASKED = "not asked: the run was stopped before this question"


@dataclass
class RunResult:
    results: list[ItemResult]
    prompt_tokens: int = 0
    completion_tokens: int = 0
    cost: float = 0.0
    requests_sent: int = 0
    cached: int = 0
    failed: int = 0
    not_asked: int = 0
    seconds: float = 0.0
    answers: dict[str, Any] = field(default_factory=dict)
    #: Why the run stopped early for every item alike (a refused key or address), or "".
    fatal: str = ""


def cache_key(prompt_version: str, model: str, item: JudgeItem) -> CacheKey:
    return (prompt_version, model, item.key, item.image_hash)


def chat_payload(endpoint: Endpoint, item: JudgeItem, temperature: float, max_tokens: int | None):
    """The chat-completions request body for one item (OpenAI's vision message shape)."""
    image_url = f"data:{item.media_type};base64,{base64.b64encode(item.image).decode('ascii')}"
    messages: list[dict[str, Any]] = []
    if item.system:
        messages.append({"role": "system", "content": item.system})
    messages.append(
        {
            "role": "user",
            "content": [
                {"type": "text", "text": item.prompt},
                {"type": "image_url", "image_url": {"url": image_url}},
            ],
        }
    )
    body: dict[str, Any] = {
        "model": endpoint.model,
        "messages": messages,
        "temperature": temperature,
    }
    if max_tokens is not None:
        body["max_tokens"] = max_tokens
    return body


def _retry_after(value: str | None) -> float | None:
    """Seconds from a ``Retry-After`` header (delta-seconds or an HTTP date), None if absent."""
    if not value:
        return None
    value = value.strip()
    if value.isdigit():
        return float(value)
    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    return max(0.0, when.timestamp() - time.time())


class _RunStopped(Exception):
    """Every item would fail the same way (a refused key or address): the run stops."""


class _TooLarge(Exception):
    pass


@dataclass
class _Reply:
    status: int
    headers: httpx.Headers
    body: bytes

    def json(self) -> Any:
        """The body as JSON; ValueError if it is not, or nests deeper than any
        chat-completions response (``json`` recurses once per level and, thousands deep,
        raises RecursionError, which would end the whole batch)."""
        # Decoded as ``json.loads`` decodes bytes, so the scan reads what it will read.
        text = self.body.decode(json.detect_encoding(self.body), "surrogatepass")
        if json_text.too_deep_at(text, json_text.MAX_DEPTH) is not None:
            raise ValueError("nested too deeply")
        return json.loads(text)


def _error_message(reply: _Reply) -> str | None:
    """The error message of a chat-completions server's error body: OpenAI's
    ``{"error": {"message": ...}}`` (or ``{"error": "..."}``, Ollama's), vLLM's older
    ``{"object": "error", "message": ...}``, FastAPI's ``{"detail": ...}``. None for any
    other body: a service that is not a chat-completions server shows nothing of its
    answer (an internal service reached by mistake must not be read back)."""
    try:
        data = reply.json()
    except ValueError:
        return None
    if not isinstance(data, dict):
        return None
    error, detail = data.get("error"), data.get("detail")
    if isinstance(error, dict) and isinstance(error.get("message"), str):
        return error["message"]
    if isinstance(error, str):
        return error
    if data.get("object") == "error" and isinstance(data.get("message"), str):
        return data["message"]
    if isinstance(detail, str):
        return detail
    if isinstance(detail, list) and detail and all(isinstance(d, dict) for d in detail):
        return "; ".join(str(d.get("msg", "")) for d in detail)
    return None


@dataclass
class _Run:
    endpoint: Endpoint
    parse: Callable[[str], Any]
    temperature: float
    max_tokens: int | None
    timeout: float
    max_retries: int
    backoff: float
    max_backoff: float
    max_reply_bytes: int
    requests_sent: int = 0
    fatal: str = ""

    async def ask(self, client: httpx.AsyncClient, item: JudgeItem, result: ItemResult) -> None:
        """Fill ``result`` for ``item``: send, retry transient failures, parse."""
        body = chat_payload(self.endpoint, item, self.temperature, self.max_tokens)
        for attempt in range(self.max_retries + 1):
            if self.fatal:
                raise _RunStopped
            result.attempts = attempt + 1
            self.requests_sent += 1
            wait: float | None = None
            sent = [False]  # whether the request reached a connection (see _send)
            try:
                reply = await self._send(client, body, sent)
            except AddressRefused as exc:
                self.fatal = str(exc)
                raise _RunStopped from None
            except _TooLarge:
                result.error = (
                    f"the reply is larger than {self.max_reply_bytes / 1024:g} kB "
                    "(CAPEVAL_JUDGE_MAX_REPLY_BYTES); not retried"
                )
                return
            except (TimeoutError, httpx.TimeoutException, httpx.TransportError) as exc:
                # Not connected, whether refused at once (a closed port) or never answered
                # (a filtered one), reads the same: which ports are open is not told.
                timed_out = isinstance(exc, TimeoutError | httpx.TimeoutException)
                if not sent[0] or isinstance(exc, httpx.ConnectError | httpx.ConnectTimeout):
                    reason = "could not connect to the endpoint"
                elif timed_out:
                    reason = f"timed out after {self.timeout:g} s"
                else:
                    reason = f"connection failed ({type(exc).__name__})"
            else:
                status = reply.status
                if status == 200:
                    self._read(reply, result)
                    return
                if status in (401, 403):
                    self.fatal = (
                        f"the endpoint refused the API key (HTTP {status}); "
                        "check the key in the judge's settings"
                    )
                    raise _RunStopped
                if status != 429 and status < 500:
                    message = _error_message(reply)
                    result.error = f"HTTP {status}, not retried" + (
                        f": {self.endpoint.excerpt(message, _BODY_EXCERPT)}"
                        if message is not None
                        else " (not a chat-completions error; its body is not shown)"
                    )
                    return
                reason = f"HTTP {status}"
                wait = _retry_after(reply.headers.get("Retry-After"))
                if wait is not None and wait > self.max_backoff:
                    result.error = (
                        f"{reason}; the server asked to retry after {wait:g} s, "
                        f"more than the {self.max_backoff:g} s allowed"
                    )
                    return
            if attempt == self.max_retries:
                result.error = f"{reason} ({attempt + 1} attempts)"
                return
            if wait is None:
                wait = min(self.backoff * 2**attempt, self.max_backoff)
            await asyncio.sleep(wait)

    async def _send(self, client: httpx.AsyncClient, body: dict, sent: list[bool]) -> _Reply:
        """One attempt, within ``timeout`` seconds in all (httpx's own timeouts bound each
        read, so a server sending a byte a second would hold the attempt for as long as it
        likes), reading at most ``max_reply_bytes`` (_TooLarge past that: a reply is a few
        kilobytes, and a server sending hundreds of megabytes is not read into memory).
        ``sent[0]`` turns True once the request's headers go out on a connection."""

        async def trace(name: str, info: dict[str, Any]) -> None:
            if name.endswith("send_request_headers.started"):
                sent[0] = True

        async with asyncio.timeout(self.timeout):
            async with client.stream(
                "POST", self.endpoint.url, json=body, extensions={"trace": trace}
            ) as response:
                declared = response.headers.get("Content-Length", "")
                if declared.isdigit() and int(declared) > self.max_reply_bytes:
                    raise _TooLarge
                data = bytearray()
                async for chunk in response.aiter_bytes():
                    data += chunk
                    if len(data) > self.max_reply_bytes:
                        raise _TooLarge
                return _Reply(response.status_code, response.headers, bytes(data))

    def _read(self, reply: _Reply, result: ItemResult) -> None:
        try:
            data = reply.json()
            text = data["choices"][0]["message"]["content"]
            if not isinstance(text, str):
                raise TypeError
        except (ValueError, KeyError, IndexError, TypeError):
            # No excerpt of the body: a 200 from something that is not a chat-completions
            # server (an internal service at an allowed address) is not read back.
            result.error = "malformed response (no choices[0].message.content)"
            return
        usage = data.get("usage") if isinstance(data, dict) else None
        usage = usage if isinstance(usage, dict) else {}
        result.prompt_tokens = _count(usage.get("prompt_tokens"))
        result.completion_tokens = _count(usage.get("completion_tokens"))
        # Scrubbed before it is parsed, kept or cached: a reply may quote the key, and
        # whatever the mode's parser says about it comes from the scrubbed text.
        text = self.endpoint.scrub(text)
        result.raw = text
        try:
            result.answer = self.parse(text)
        except ValueError as exc:
            result.error = f"unusable reply: {self.endpoint.scrub(str(exc))}"


def _count(value: Any) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) and value >= 0 else 0


async def arun_batch(
    items: Sequence[JudgeItem],
    *,
    endpoint: Endpoint,
    parse: Callable[[str], Any],
    prompt_version: str,
    temperature: float = 0.0,
    max_tokens: int | None = None,
    concurrency: int = 8,
    timeout: float = 60.0,
    max_retries: int = 4,
    backoff: float = 1.0,
    max_backoff: float = 60.0,
    price_prompt_per_1k: float = 0.0,
    price_completion_per_1k: float = 0.0,
    cache: MutableMapping[CacheKey, dict[str, Any]] | None = None,
    progress: Callable[[int, int], None] | None = None,
    stop: Callable[[], bool] | None = None,
    allowed: AddressPolicy | None = None,
    max_reply_bytes: int = MAX_REPLY_BYTES,
) -> RunResult:
    """The coroutine behind :func:`run_batch` (same arguments)."""
    _check_arguments(items, concurrency, timeout, max_retries, backoff, max_reply_bytes)
    started = time.perf_counter()
    run = _Run(endpoint, parse, temperature, max_tokens, timeout, max_retries, backoff, max_backoff,
               max_reply_bytes)  # fmt: skip
    results = [ItemResult(key=item.key, error=NOT_ASKED) for item in items]
    total = len(items)
    todo = _answer_from_cache(items, results, cache, prompt_version, endpoint.model, parse)
    done = total - todo.qsize()
    if progress and done:
        progress(done, total)

    async def worker() -> None:
        async with httpx.AsyncClient(
            headers=endpoint.headers(),
            timeout=httpx.Timeout(timeout),
            transport=GuardedTransport(policy, one, ssl_context),
        ) as client:
            await work(client)

    async def work(client: httpx.AsyncClient) -> None:
        nonlocal done
        while True:
            if stop is not None and stop():
                return  # the items left in the queue keep NOT_ASKED
            try:
                i = todo.get_nowait()
            except asyncio.QueueEmpty:
                return
            results[i].error = ""  # taken: asked now
            try:
                await run.ask(client, items[i], results[i])
            except _RunStopped:
                results[i].error = run.fatal
            if results[i].ok and cache is not None:
                cache[cache_key(prompt_version, endpoint.model, items[i])] = {"raw": results[i].raw}
            elif not results[i].ok and results[i].error != run.fatal:
                # A wrong key or address is logged once for the run (below), not per item.
                logger.warning("judge item %s failed: %s", items[i].key, results[i].error)
            done += 1
            if progress:
                progress(done, total)

    # One TLS context for every worker's connection (each takes ~16 ms to build).
    policy, ssl_context = allowed or AddressPolicy(), httpx.create_ssl_context(trust_env=False)
    one = httpx.Limits(max_connections=1, max_keepalive_connections=1)
    await asyncio.gather(*(worker() for _ in range(min(concurrency, todo.qsize()))))
    if run.fatal:
        logger.error("judge run on %s stopped: %s", endpoint.base_url, run.fatal)
    out = _totals(results, run, price_prompt_per_1k, price_completion_per_1k)
    out.seconds = time.perf_counter() - started
    return out


def _check_arguments(
    items: Sequence[JudgeItem],
    concurrency: int,
    timeout: float,
    max_retries: int,
    backoff: float,
    max_reply_bytes: int,
) -> None:
    """ValueError for arguments no batch can run with. Its own step: the only error
    ``run_batch`` raises, before anything is asked."""
    keys = [item.key for item in items]
    if len(set(keys)) != len(keys):
        raise ValueError("item keys must be unique within a batch")
    if concurrency < 1 or timeout <= 0 or max_retries < 0 or backoff < 0 or max_reply_bytes < 1:
        raise ValueError(
            "concurrency >= 1, timeout > 0, max_retries >= 0, backoff >= 0, max_reply_bytes >= 1"
        )


def _answer_from_cache(
    items: Sequence[JudgeItem],
    results: list[ItemResult],
    cache: MutableMapping[CacheKey, dict[str, Any]] | None,
    prompt_version: str,
    model: str,
    parse: Callable[[str], Any],
) -> asyncio.Queue[int]:
    """Fill ``results`` from the cache; return the queue of the items' indices left to ask.
    Its own step: what it answers costs nothing, and the rest is all the workers share."""
    todo: asyncio.Queue[int] = asyncio.Queue()
    for i, item in enumerate(items):
        hit = cache.get(cache_key(prompt_version, model, item)) if cache else None
        if hit is not None:
            # A cached reply parsed once; parsing again keeps the answer's type the caller's.
            # A parser made stricter since then refuses it: ask again rather than fail.
            try:
                answer = parse(hit["raw"])
            except ValueError:
                hit = None
        if hit is None:
            todo.put_nowait(i)
            continue
        results[i] = ItemResult(key=item.key, answer=answer, raw=hit["raw"], cached=True)
    return todo


def _totals(
    results: list[ItemResult], run: _Run, price_prompt_per_1k: float, price_completion_per_1k: float
) -> RunResult:
    """The batch's result without its duration (the caller adds it). Its own step: the
    counts and the cost are sums over the items, whatever became of each."""
    out = RunResult(results=results, requests_sent=run.requests_sent, fatal=run.fatal)
    for r in results:
        out.prompt_tokens += r.prompt_tokens
        out.completion_tokens += r.completion_tokens
        out.cached += r.cached
        out.failed += not r.ok
        out.not_asked += r.error == NOT_ASKED
        if r.ok:
            out.answers[r.key] = r.answer
    out.cost = (
        out.prompt_tokens / 1000 * price_prompt_per_1k
        + out.completion_tokens / 1000 * price_completion_per_1k
    )
    return out


def run_batch(items: Sequence[JudgeItem], **kwargs: Any) -> RunResult:
    """Ask the judge about every item; see the module docstring for the behaviour.

    Keyword arguments: ``endpoint`` (:class:`Endpoint`), ``parse`` (reply text -> answer,
    ``ValueError`` for an unusable reply), ``prompt_version``; optional ``temperature``,
    ``max_tokens``, ``concurrency``, ``timeout``, ``max_retries``, ``backoff``,
    ``max_backoff``, ``price_prompt_per_1k``, ``price_completion_per_1k``, ``cache``,
    ``progress(done, total)``. Raises ValueError only for bad arguments; every failure of
    an item is in its :class:`ItemResult`.
    """
    return asyncio.run(arun_batch(items, **kwargs))

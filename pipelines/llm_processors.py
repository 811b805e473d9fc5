"""Ray Data LLM processors (``ray.data.llm.build_processor``, Ray 2.60) for the index job's batch
model work: one processor per task, over a dataset of request rows.

    --models openai → HttpRequestProcessorConfig (any OpenAI-compatible endpoint: a vLLM
                      server, a hosted API): an actor pool posting chat completions
    --models vllm   → vLLMEngineProcessorConfig (vLLM engines on GPU workers, structured
                      JSON output through vLLM's guided decoding)

A request row carries ``doc_id``, ``node_id`` (what the request is about: a node, a window of
section candidates, an entity to resolve), ``request`` (JSON text of the OpenAI chat messages;
image parts as ``data:`` URLs) and ``attempts``. The processor answers with the same keys plus
``answer`` (the model's text), ``answer_error`` ("" when usable) and ``invalid_answer`` (a
non-JSON answer, for the retry). With a ``schema``, the answer is repaired and checked
(``operators.models.structured.checked_answer``) and ``answer`` holds the parsed JSON as text.
The prompts and schemas are those of ``operators.models.prompts``, one set for both backends.
Retries of unusable answers: with openai, ``EndpointSession`` (within the pass); with vLLM, a
pass each (``pipelines.model_requests``).

A request that fails for good never fails the dataset: it becomes that row's ``answer_error``.
Over HTTP, ``EndpointSession`` (the processor's ``session_factory``) sends a batch's requests
together, retries 429/408/5xx answers, timeouts and refused connections with exponential
back-off (``models.max_retries`` times), and then answers the row with the error instead of
raising (Ray 2.60's ``HttpRequestUDF`` raises once its own retries are spent, which would fail
the whole dataset). With vLLM, ``should_continue_on_error`` keeps a failed generation (a prompt
longer than the model's context) as an error row, which ``settled`` turns into an answer row.

Nothing here loads a model on the driver: building a processor only builds configuration; the
engines start in the processor's workers.
"""

from __future__ import annotations

import asyncio
import functools
import json
import os
from typing import Any

from bookindex.operators.config import BookindexConfig
from bookindex.operators.models import ModelError
from bookindex.operators.models.structured import checked_answer, retry_conversation
from bookindex.operators.models.vllm_local import DEFAULT_MAX_TOKENS, NEEDS_VLLM

REQUEST_COLUMNS = ("doc_id", "node_id", "request", "attempts")
ANSWER_COLUMNS = ("answer", "answer_error", "invalid_answer")


def processor_config(
    bookindex: BookindexConfig,
    vision: bool = False,
    batch_size: int = 16,
    requests: int | None = None,
    schema: dict | None = None,
):
    """The ``ray.data.llm`` processor configuration of the configured generative backend:
    ``index.enrich_workers`` workers (None: 1 engine for vllm, ``parse_workers`` or 4
    concurrent posters for openai), ``batch_size`` requests per batch. With ``requests`` (how
    many the processor will be given), no more workers than batches: each worker starts a
    process (and, with vllm, an engine on a GPU), and a pass of a few requests — the section
    windows of a small job, the retries of the few invalid answers — would start them for
    workers with nothing to do. With openai and a ``schema``, the session asks again itself
    (``EndpointSession``: ``models.max_retries`` times) where an answer does not check against
    it. Raises ``ModelError`` for a backend without generation, or one that is not
    configured."""
    import ray.data.llm as llm

    models, index = bookindex.models, bookindex.index

    def workers(configured: int) -> int:
        if requests is None:
            return configured
        return max(1, min(configured, -(-requests // batch_size)))

    if models.backend == "vllm":
        if not models.vllm_model_path:
            raise ModelError("the vllm processor needs ModelConfig.vllm_model_path (a local dir)")
        options = dict(models.vllm_options)
        options.pop("max_tokens", None)
        return llm.vLLMEngineProcessorConfig(
            model_source=models.vllm_model_path,
            engine_kwargs={"seed": models.seed, **options},
            concurrency=workers(index.enrich_workers or 1),
            batch_size=batch_size,
            accelerator_type=None,
            should_continue_on_error=True,  # a failed row is recorded, the rest goes on
            # Ray 2.60 replaced has_image=True with the prepare-multimodal stage.
            prepare_multimodal_stage=(
                {"enabled": True, "chat_template_content_format": "openai"} if vision else False
            ),
        )
    if models.backend == "openai":
        base_url = (models.base_url or os.environ.get("OPENAI_BASE_URL", "")).rstrip("/")
        if not base_url or not models.model:
            raise ModelError("the openai processor needs ModelConfig.base_url and model")
        key = models.api_key or os.environ.get("OPENAI_API_KEY", "") or "EMPTY"
        return llm.HttpRequestProcessorConfig(
            url=f"{base_url}/chat/completions",
            headers={"Authorization": f"Bearer {key}"},
            concurrency=workers(index.enrich_workers or index.parse_workers or 4),
            batch_size=batch_size,
            # the transport retries (429, 5xx, timeouts, refused connections) are the
            # session's, which then answers with the error instead of raising
            max_retries=0,
            session_factory=functools.partial(
                EndpointSession,
                attempts=1 + models.max_retries,
                base_wait_s=RETRY_BASE_WAIT_S,
                timeout_s=models.timeout_s,
                schema=schema,
                answer_attempts=answer_attempts(bookindex, schema),
            ),
        )
    raise ModelError(f"backend {models.backend!r} has no generative model")


def answer_attempts(bookindex: BookindexConfig, schema: dict | None) -> int:
    """How many times a request with ``schema`` is asked at most: once, and
    ``models.max_retries`` more where its answer is not valid JSON of the schema."""
    return 1 + (bookindex.models.max_retries if schema is not None else 0)


def asks_again_itself(bookindex: BookindexConfig) -> bool:
    """Whether the processor asks again itself where an answer is not valid JSON of its
    schema (openai: its ``EndpointSession``, within the pass), or leaves that to another pass
    (vllm: ``model_requests.run_requests``)."""
    return bookindex.models.backend == "openai"


RETRY_BASE_WAIT_S = 0.5
RETRYABLE_STATUS = frozenset({408, 429, 500, 502, 503, 504})
ERROR_KEY = "bookindex_request_error"  # the answer of a request that failed for good
ATTEMPTS_KEY = "bookindex_attempts"  # how many times the session asked (when more than once)


class _Settled:
    """What ``EndpointSession.post`` resolves to: a finished response, as ``HttpRequestUDF``
    reads one (``status``, ``reason``, ``json()``, ``async with``)."""

    def __init__(self, status: int, body: dict) -> None:
        self.status, self.reason, self.body = status, "", body

    async def json(self) -> dict:
        return self.body

    async def __aenter__(self) -> _Settled:
        return self

    async def __aexit__(self, *exc: object) -> None:
        return None


class EndpointSession:
    """The HTTP processor's client session (``HttpRequestProcessorConfig.session_factory``).

    ``post`` starts the request at once (the requests of a batch overlap; Ray's own loop sends
    them one after the other) and resolves to a settled response: the endpoint's JSON answer,
    or, once ``attempts`` tries met 429/408/5xx, time-outs or refused connections (exponential
    back-off from ``base_wait_s``), or an answer that is not a JSON object, ``{ERROR_KEY: why}``
    with status 200, which the processor's postprocess turns into the row's ``answer_error``.
    It never raises, so one failing request never fails the dataset.

    With a ``schema``, an answer that does not check against it is asked again, with the
    invalid answer shown (``structured.retry_conversation``, as ``run_requests`` asks again
    with vLLM), up to ``answer_attempts`` asks in all: within the pass, so that a retry does
    not cost another Ray Data execution and its workers' start-up. An answer asked more than
    once says how many times (``ATTEMPTS_KEY``)."""

    def __init__(
        self,
        attempts: int = 3,
        base_wait_s: float = 0.5,
        timeout_s: float = 120.0,
        schema: dict | None = None,
        answer_attempts: int = 1,
    ):
        self.attempts, self.base_wait_s, self.timeout_s = max(1, attempts), base_wait_s, timeout_s
        self.schema, self.answer_attempts = schema, max(1, answer_attempts)
        self.session: Any = None

    async def __aenter__(self) -> EndpointSession:
        import aiohttp

        self.session = aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=self.timeout_s))
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.session.close()

    def post(self, url: str, headers: dict | None = None, data: Any = None) -> asyncio.Future:
        return asyncio.ensure_future(self._post(url, headers, data))

    async def _post(self, url: str, headers: dict | None, data: Any) -> _Settled:
        settled = await self._send(url, headers, data)
        if self.schema is None or self.answer_attempts == 1:
            return settled
        payload = json.loads(data)
        for attempt in range(2, self.answer_attempts + 1):
            invalid = _invalid_answer(settled.body, self.schema)
            if invalid is None:
                break
            payload["messages"] = retry_conversation(payload["messages"], *invalid)
            settled = await self._send(url, headers, json.dumps(payload))
            settled.body[ATTEMPTS_KEY] = attempt
        return settled

    async def _send(self, url: str, headers: dict | None, data: Any) -> _Settled:
        import aiohttp

        why = ""
        for attempt in range(self.attempts):
            if attempt:
                await asyncio.sleep(self.base_wait_s * 2 ** (attempt - 1))
            try:
                async with self.session.post(url, headers=headers, data=data) as response:
                    status, text = response.status, await response.text()
            except (TimeoutError, aiohttp.ClientError) as exc:
                why = f"{type(exc).__name__}: {exc}"[:300]
                continue
            if status in RETRYABLE_STATUS:
                why = f"HTTP {status}: {text[:200]}"
                continue
            try:
                body = json.loads(text)
            except json.JSONDecodeError:
                body = None
            if status >= 400 or not isinstance(body, dict) or not body:
                return _Settled(200, {ERROR_KEY: f"HTTP {status}: {text[:300]}"})
            return _Settled(status, body)
        return _Settled(200, {ERROR_KEY: f"failed after {self.attempts} attempt(s): {why}"})


def _invalid_answer(body: dict, schema: dict) -> tuple[str, str] | None:
    """(the answer, what is wrong with it) where ``body``'s answer is text that does not check
    against ``schema``, as ``_Requests.post`` records it; None otherwise (a usable answer, a
    failed request, an empty answer: not asked again)."""
    text, error = _answer_text({"http_response": body})
    if error:
        return None
    try:
        checked_answer(text, schema)
    except ValueError as exc:
        return (text[:2000], f"invalid JSON answer: {exc}"[:300]) if text[:2000] else None
    return None


class _Requests:
    """The preprocess and postprocess of one task (plain callables: they travel to workers)."""

    def __init__(self, bookindex: BookindexConfig, schema: dict | None, vision: bool) -> None:
        models = bookindex.models
        self.backend = models.backend
        self.schema = schema
        self.model = (models.vision_model or models.model) if vision else models.model
        self.max_tokens = int(models.vllm_options.get("max_tokens", DEFAULT_MAX_TOKENS))
        self.sampling: dict[str, Any] = {
            "temperature": models.temperature,
            "max_tokens": self.max_tokens,
            "seed": models.seed,
        }

    def pre(self, row: dict) -> dict:
        messages = json.loads(row["request"])
        if self.backend == "vllm":
            sampling = dict(self.sampling)
            if self.schema is not None:
                # Ray 2.60's vLLM stage turns this into vllm StructuredOutputsParams(json=...)
                sampling["structured_outputs"] = {"json": json.dumps(self.schema)}
            return {**row, "messages": messages, "sampling_params": sampling}
        payload: dict[str, Any] = {"model": self.model, "messages": messages, **self.sampling}
        if self.schema is not None:
            payload["response_format"] = {
                "type": "json_schema",
                "json_schema": {"name": "answer", "schema": self.schema, "strict": True},
            }
        # (Ray Data holds the payload as an Arrow struct: the content parts of an image message
        # reach the endpoint with the other part type's key as null, which OpenAI-compatible
        # servers ignore)
        return {**row, "payload": payload}

    def post(self, row: dict) -> dict:
        keep = {k: row.get(k) for k in REQUEST_COLUMNS}
        keep["attempts"] = _session_attempts(row) or keep["attempts"]
        text, error = _answer_text(row)
        keep["invalid_answer"] = ""
        if not error and self.schema is not None:
            try:
                text = json.dumps(checked_answer(text, self.schema))
            except ValueError as exc:
                error = f"invalid JSON answer: {exc}"[:300]
                keep["invalid_answer"] = text[:2000]
        if not error and not text.strip():
            error = "empty answer"
        return {**keep, "answer": text if not error else "", "answer_error": error}


def _answer_text(row: dict) -> tuple[str, str]:
    """The answer text of an http or vLLM row, or the error the endpoint gave."""
    if "generated_text" in row:
        return str(row.get("generated_text") or ""), ""
    response = row.get("http_response")
    if isinstance(response, str):
        try:
            response = json.loads(response)
        except json.JSONDecodeError:
            return "", f"unreadable response: {response[:200]}"
    if isinstance(response, dict) and response.get(ERROR_KEY):
        return "", f"request failed: {response[ERROR_KEY]}"
    try:
        return str(response["choices"][0]["message"]["content"] or ""), ""
    except (KeyError, IndexError, TypeError):
        return "", f"no answer in response: {str(response)[:200]}"


def _session_attempts(row: dict) -> int | None:
    """How many times ``EndpointSession`` asked for the row's answer, where more than once."""
    response = row.get("http_response")
    if isinstance(response, str):
        try:
            response = json.loads(response)
        except json.JSONDecodeError:
            return None
    return response.get(ATTEMPTS_KEY) if isinstance(response, dict) else None


def settled(row: dict) -> dict:
    """A processor's output row as an answer row: a vLLM row whose generation failed
    (``__inference_error__``, it skipped the postprocess) gets that error as ``answer_error``."""
    error = row.get("__inference_error__") or ""
    out = {k: row.get(k) for k in (*REQUEST_COLUMNS, *ANSWER_COLUMNS)}
    if error:
        out.update(answer="", answer_error=f"inference failed: {error}"[:300], invalid_answer="")
    return out


class SettledProcessor:
    """A ``ray.data.llm`` processor whose output rows are all answer rows (``settled``)."""

    def __init__(self, processor: Any) -> None:
        self.processor = processor
        self.stages = processor.stages

    def __call__(self, dataset: Any) -> Any:
        return self.processor(dataset).map(settled)


def start_telemetry_actor() -> None:
    """Start Ray's ``ray.data.llm`` usage-telemetry actor now, without waiting for it.

    Ray 2.60's ``build_processor`` creates that actor on its first call and waits for it
    (``TelemetryAgent.push_telemetry_report``: a ``ray.get``), so the job's first processor
    waited for an actor process to start: 4 s on a quiet 2-CPU node, 10 s on a loaded one.
    Started before the probe and the structure stage run (``index_pipeline``), it is up by
    then. (An internal of the pinned Ray;
    where it moves, nothing is started and the first build waits as before.)"""
    try:
        from ray.llm._internal.batch.observability.usage_telemetry.usage import (
            get_or_create_telemetry_agent,
        )
    except ImportError:
        return
    get_or_create_telemetry_agent()  # never raises: a failure is logged and ignored


def build_ray_processor(
    bookindex: BookindexConfig,
    schema: dict | None = None,
    vision: bool = False,
    batch_size: int = 16,
    requests: int | None = None,
) -> Any:
    """A ``ray.data.llm`` processor for one task, as a function of a dataset: request rows
    (``REQUEST_COLUMNS``) in, the same rows with ``ANSWER_COLUMNS`` out, one per request
    whatever happened to it. Apply it as ``processor(dataset)``; ``requests``: how many
    (``processor_config``: no more workers than batches)."""
    try:
        from ray.data.llm import build_processor
    except ImportError as e:  # ray[llm] extras missing
        raise ModelError(NEEDS_VLLM) from e
    config = processor_config(bookindex, vision, batch_size, requests, schema)
    requests = _Requests(bookindex, schema, vision)
    return SettledProcessor(
        build_processor(config, preprocess=requests.pre, postprocess=requests.post)
    )

"""Test doubles shared by several tests: a fake OpenAI-compatible HTTP server on 127.0.0.1.

It stands in for a model endpoint only where the test is about something else (the backend's
retry logic, the section refiner, the index job's model stages, the query side's answers, the
evaluation's answer metrics); it answers chat completions by a rule the test gives
(``evidence_echo``: every query-side request from what it is sent; ``EvidenceEcho``: the
evaluation's answering model; ``FakeJudge``: extraction and verdicts by a stated rule) and
embeddings with deterministic letter counts. It counts the requests and the tokens it reports
(``served``, and the same as ``usage``), and can misbehave on demand (``fault``:
"invalid_json" answers prose, "stall" waits ``stall_s`` before answering).
"""

from __future__ import annotations

import base64
import contextlib
import json
import re
import threading
import time
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

Reply = str | tuple[int, dict]  # answer text, or (HTTP status, JSON body)


class FakeOpenAI:
    """POST /v1/chat/completions and /v1/embeddings. ``chat(body) -> Reply``; every request
    body is kept in ``requests`` as (path, body). ``delay_s``: each answer waits that long, so
    that requests sent together overlap; ``max_in_flight`` is the most requests it was
    answering at once."""

    def __init__(
        self,
        chat: Callable[[dict], Reply],
        delay_s: float = 0.0,
        tokens: Callable[[dict, str], tuple[int, int]] | None = None,
        count_tokens: bool = False,
    ) -> None:
        self.chat = chat
        self.delay_s = delay_s
        # (prompt, completion) tokens a chat answer reports: ``tokens``, or with count_tokens
        # the words of every message and of the reply; default 7 and 3
        self.tokens = tokens or (word_tokens if count_tokens else (lambda body, reply: (7, 3)))
        self.served = {"requests": 0, "prompt_tokens": 0, "completion_tokens": 0}
        self.usage = self.served  # the same tally, by the name the evaluation's tests read
        self.fault: str | None = None  # None, "invalid_json" or "stall"
        self.stall_s = 5.0
        self.requests: list[tuple[str, dict]] = []
        self.spans: list[tuple[float, float, dict]] = []  # (start, end, body) of each request
        self.in_flight = self.max_in_flight = 0
        self._lock = threading.Lock()
        fake = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                with fake._lock:
                    fake.requests.append((self.path, body))
                    fake.in_flight += 1
                    fake.max_in_flight = max(fake.max_in_flight, fake.in_flight)
                started = time.monotonic()
                try:
                    time.sleep(fake.delay_s)
                    if fake.fault == "stall":
                        time.sleep(fake.stall_s)
                    status, payload = fake.respond(self.path, body)
                finally:
                    with fake._lock:
                        fake.in_flight -= 1
                        fake.spans.append((started, time.monotonic(), body))
                data = json.dumps(payload).encode()
                with contextlib.suppress(OSError):  # the client gave up (its timeout)
                    self.send_response(status)
                    self.send_header("Content-Type", "application/json")
                    self.send_header("Content-Length", str(len(data)))
                    self.end_headers()
                    self.wfile.write(data)

            def log_message(self, *args) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.thread = threading.Thread(
            target=self.server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True
        )
        self.thread.start()
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/v1"

    def respond(self, path: str, body: dict) -> tuple[int, dict]:
        if path.endswith("/embeddings"):
            data = [
                {"object": "embedding", "index": i, "embedding": _fake_vector(text)}
                for i, text in enumerate(body["input"])
            ]
            usage = {"prompt_tokens": len(data), "total_tokens": len(data)}
            return 200, {"object": "list", "data": data, "model": body["model"], "usage": usage}
        reply = "Here is my answer, in prose." if self.fault == "invalid_json" else self.chat(body)
        if isinstance(reply, tuple):
            return reply
        prompt, completion = self.tokens(body, reply)
        with self._lock:
            self.served["requests"] += 1
            self.served["prompt_tokens"] += prompt
            self.served["completion_tokens"] += completion
        return 200, {
            "id": f"cmpl-{len(self.requests)}",
            "object": "chat.completion",
            "created": 0,
            "model": body["model"],
            "choices": [
                {
                    "index": 0,
                    "message": {"role": "assistant", "content": reply},
                    "finish_reason": "stop",
                }
            ],
            "usage": {
                "prompt_tokens": prompt,
                "completion_tokens": completion,
                "total_tokens": prompt + completion,
            },
        }

    @property
    def chats(self) -> list[dict]:
        return [body for path, body in self.requests if path.endswith("/chat/completions")]

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


def max_overlap(spans: list[tuple[float, float, dict]]) -> int:
    """The most of ``spans`` (start, end, ...) that were open at one moment."""
    events = sorted([(s, 1) for s, _, _ in spans] + [(e, -1) for _, e, _ in spans])
    most = now = 0
    for _, step in events:
        now += step
        most = max(most, now)
    return most


def _fake_vector(text: str) -> list[float]:
    """Deterministic and unnormalised: letter counts of a, b, c plus a constant."""
    return [float(text.count("a")), float(text.count("b")), float(text.count("c")), 1.0]


def image_parts(body: dict) -> list[bytes]:
    """The PNG images of a chat request's messages (``data:`` URL image parts), decoded."""
    found = []
    for message in body.get("messages") or []:
        content = message.get("content")
        for part in content if isinstance(content, list) else []:
            url = ((part or {}).get("image_url") or {}).get("url") or ""
            if part.get("type") == "image_url" and url.startswith("data:image/png;base64,"):
                found.append(base64.b64decode(url.split(",", 1)[1]))
    return found


def prompt_text(body: dict) -> str:
    """All text of a chat request's messages, in order."""
    texts = []
    for message in body.get("messages") or []:
        content = message.get("content")
        if isinstance(content, str):
            texts.append(content)
        for part in content if isinstance(content, list) else []:
            if (part or {}).get("type") == "text":
                texts.append(part.get("text") or "")
    return "\n".join(texts)


class PoisonWorker:
    """A model worker for ``pipelines.model_host.ModelHost`` (built in its child): returns each
    row with ``seen`` = the child's PID, except a row whose ``doc_id`` is "segv" (the child kills
    itself with SIGSEGV, as a crashing C library would), "stall" (sleeps 600 s), "raise"
    (ValueError) or "vanish" (the answer leaves the row out). A row with ``status`` "failed"
    passes through with ``seen`` null. The other columns come back as they were sent (types
    included)."""

    def __init__(self, tag: str = "") -> None:
        self.info = {"tag": tag}

    def __call__(self, batch):
        import os
        import signal

        import pyarrow as pa

        seen, kept = [], []
        for i, row in enumerate(batch.to_pylist()):
            if row.get("status") == "failed":
                seen.append(None)
                kept.append(i)
                continue
            if row["doc_id"] == "segv":
                os.kill(os.getpid(), signal.SIGSEGV)
            if row["doc_id"] == "stall":
                time.sleep(600)
            if row["doc_id"] == "raise":
                raise ValueError("this document cannot be read")
            if row["doc_id"] != "vanish":
                seen.append(os.getpid())
                kept.append(i)
        out = batch.take(pa.array(kept, pa.int64()))
        return out.append_column("seen", pa.array(seen, pa.int64()))


def word_tokens(body: dict, reply: str) -> tuple[int, int]:
    """Tokens as whitespace words: the request's text and the answer's (for ``tokens``)."""
    return len(prompt_text(body).split()), len(reply.split())


def schema_fields(body: dict) -> set[str]:
    """The top-level properties of the JSON schema a chat request asks for (its
    ``response_format``, or the schema the prompt carries when the endpoint refused it)."""
    schema = ((body.get("response_format") or {}).get("json_schema") or {}).get("schema")
    if schema is None:
        found = re.search(r"this JSON schema:\n(\{.*\})", prompt_text(body), re.S)
        schema = json.loads(found.group(1)) if found else {}
    return set((schema or {}).get("properties") or {})


_UNIT = re.compile(r"^\[(\d+)\] \(([^\n]*)\)\n([^\n]*)", re.M)


def evidence_echo(body: dict) -> str:
    """A model for the query side that answers from what it is sent: the cited answer is the
    first sentence of evidence unit [1], citing [1] and [2] (and 99, never sent, which the
    caller must drop); the agents read once and then answer; a question asking "how many
    tables" is global (COUNT over the tables) and Map keeps every item; Map answers each
    sub-question with unit [1]'s sentence; the other planner steps get valid minimal answers."""
    fields = schema_fields(body)
    text = prompt_text(body)
    units = {int(n): line for n, _, line in _UNIT.findall(text)}
    first = re.split(r"(?<=[.!?])\s", units.get(1, "").strip())[0][:200]
    if "sentences" in fields:
        if not units:
            return json.dumps({"answer": "Not answerable", "sentences": []})
        cites = [n for n in (1, 2) if n in units] + [99]
        return json.dumps({"answer": first, "sentences": [{"text": first, "cites": cites}]})
    if "action" in fields:
        question = re.search(r"Question: (.*)", text)
        query = question.group(1) if question else "the question"
        if "Observation:" in text:
            return json.dumps({"thought": "enough", "action": "answer", "answer": "read it"})
        search = "semantic_search" if "graph_filter" in text else "retrieve"
        return json.dumps({"thought": "look", "action": search, "query": query})
    counting = "how many tables" in text.lower()
    replies = {
        "category": {"category": "global" if counting else "single-hop"},
        "filters": {
            "filters": [{"filter_type": "table", "filter_value": None}],
            "operation": "COUNT",
        },
        "entities": {"entities": []},
        "sub_questions": {"sub_questions": []},
        "sections": {"sections": [int(n) for n in re.findall(r"^(\d+): ", text, re.M)[:1]]},
        "keep": {"keep": list(range(1, 200))},
        "answers": {"answers": [first] * 6},
        "choice": {"choice": -1},
    }
    for key, reply in replies.items():
        if key in fields:
            return json.dumps(reply)
    return "plain text"


def chat_schema(body: dict) -> dict:
    """The JSON schema a chat request asks its answer to follow ({} when none)."""
    format_ = body.get("response_format") or {}
    return (format_.get("json_schema") or {}).get("schema") or {}


def first_sentence(text: str) -> str:
    """The first sentence (5 words or more) of the evidence in a prompt: the text of the first
    JSON observation line with a "text" (DeepRead, LAD-RAG), else of the first "[1] ..."
    evidence entry (Reduce); "" when the prompt holds none."""
    for line in text.splitlines():
        line = line.strip()
        if line.startswith("{") and '"text"' in line:
            try:
                found = str(json.loads(line).get("text") or "")
            except ValueError:
                continue
            if found.strip():
                return _sentence(found)
    marker = re.search(r"\[1\] (.+)", text)
    return _sentence(marker.group(1)) if marker else ""


def _sentence(text: str) -> str:
    for piece in re.split(r"(?<=[.!?])\s+", " ".join(text.split())):
        if len(piece.split()) >= 5:
            return piece
    return " ".join(text.split())[:200]


class EvidenceEcho:
    """An answering model that answers from the evidence it is sent: an agent (DeepRead,
    LAD-RAG) searches for the question once and then answers with the first sentence of what
    it was shown; a final-answer request (``{"answer"}`` schema) gets the first sentence of its
    first cited evidence; with no evidence, "Not answerable". Every other step (query class,
    filters, entities, ...) gets an unusable "{}", so the rules stand (and say so)."""

    def __call__(self, body: dict) -> str:
        properties = chat_schema(body).get("properties", {})
        text = prompt_text(body)
        sentence = first_sentence(text) or "Not answerable"
        if "action" in properties:
            if "Observation:" not in text:
                verbs = properties["action"].get("enum", [])
                verb = "retrieve" if "retrieve" in verbs else "semantic_search"
                question = re.search(r"Question: (.+)", text)
                query = question.group(1) if question else "answer"
                return json.dumps({"thought": "search", "action": verb, "query": query})
            return json.dumps(
                {"thought": "answer", "action": "answer", "answer": sentence, "node_ids": []}
            )
        if "answer" in properties:
            return json.dumps({"answer": sentence})
        return "{}"


class FakeJudge:
    """A judge endpoint with a stated rule, keyed by the gold answers it is told about
    (``golds``: question text → gold answers). Extraction: the gold answer when the long
    answer contains it (the test's ``contains``), else the long answer's first three words;
    verdict: correct when the answer contains a gold answer."""

    def __init__(self, golds: dict[str, list[str]], contains: Callable[[str, list[str]], bool]):
        self.golds, self.contains = golds, contains

    def __call__(self, body: dict) -> str:
        properties = chat_schema(body).get("properties", {})
        text = prompt_text(body)
        question = next((q for q in self.golds if q.strip() in text), None)
        gold = self.golds.get(question, [])
        if "correct" in properties:
            answer = text.rsplit("Answer: ", 1)[-1]
            return json.dumps({"correct": self.contains(answer, gold)})
        long_answer = text.rsplit("Long answer: ", 1)[-1]
        if self.contains(long_answer, gold):
            return json.dumps({"answer": gold[0]})
        return json.dumps({"answer": " ".join(long_answer.split()[:3])})

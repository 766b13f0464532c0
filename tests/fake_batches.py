"""FakeAnthropic plus the Message Batches endpoints, for lcm_llm_map.py --batch.

    with FakeBatches(polls_before_end=2) as api:
        api.respond(...)                 # answers each batch request like a Messages call
        ...
        api.batches                      # {batch_id: [request params, ...]} as submitted
        api.batch_polls                  # GET /v1/messages/batches/{id} count per batch

A batch is answered when it is created (every request through `next_reply`, so `enqueue` and
`respond` work as for POST /v1/messages); it reports `in_progress` for `polls_before_end` GETs,
then `ended` with a results_url serving the JSONL results in shuffled order, like the real API.
An error Reply becomes an `errored` result; Reply(error_type="expired") an `expired` one.
"""
from __future__ import annotations

import json
import random
import uuid

import pytest

from fake_anthropic import FakeAnthropic, Reply, Request

STAMP = "2026-11-22T08:00:00Z"


class FakeBatches(FakeAnthropic):
    def __init__(self, *args, polls_before_end: int = 1, **kw):
        super().__init__(*args, **kw)
        self.polls_before_end = polls_before_end
        self.batches: dict[str, list[dict]] = {}
        self.batch_polls: dict[str, int] = {}
        self.results: dict[str, list[dict]] = {}
        self.routes[("POST", "/v1/messages/batches")] = FakeBatches.handle_create

    def batch_json(self, batch_id: str, ended: bool) -> dict:
        lines = self.results[batch_id]
        counts = {"processing": 0 if ended else len(lines), "succeeded": 0, "errored": 0, "canceled": 0,
                  "expired": 0}
        if ended:
            for line in lines:
                counts[line["result"]["type"]] += 1
        return {"id": batch_id, "type": "message_batch", "processing_status": "ended" if ended else "in_progress",
                "request_counts": counts, "created_at": STAMP, "expires_at": "2026-11-23T08:00:00Z",
                "ended_at": STAMP if ended else None, "archived_at": None, "cancel_initiated_at": None,
                "results_url": f"{self.url}/v1/messages/batches/{batch_id}/results" if ended else None}

    def handle_create(self, request: Request) -> Reply:
        batch_id = "msgbatch_" + uuid.uuid4().hex[:24]
        requests = (request.body or {}).get("requests") or []
        lines = []
        for item in requests:
            params = item["params"]
            reply = self.next_reply(params)
            if reply.error_type in ("expired", "canceled"):
                result = {"type": reply.error_type}
            elif reply.status != 200:
                result = {"type": "errored", "error": self.error_body(reply)}
            else:
                result = {"type": "succeeded", "message": self.message_json(reply, params)}
            lines.append({"custom_id": item["custom_id"], "result": result})
        random.shuffle(lines)
        with self.lock:
            self.batches[batch_id] = [item["params"] for item in requests]
            self.batch_polls[batch_id] = 0
            self.results[batch_id] = lines
            self.routes[("GET", f"/v1/messages/batches/{batch_id}")] = (
                lambda fake, req, b=batch_id: fake.handle_retrieve(b))
            self.routes[("GET", f"/v1/messages/batches/{batch_id}/results")] = (
                lambda fake, req, b=batch_id: fake.handle_results(b))
        return Reply(body=self.batch_json(batch_id, ended=False))

    def handle_retrieve(self, batch_id: str) -> Reply:
        with self.lock:
            self.batch_polls[batch_id] += 1
            ended = self.batch_polls[batch_id] > self.polls_before_end
        return Reply(body=self.batch_json(batch_id, ended))

    def handle_results(self, batch_id: str) -> Reply:
        return Reply(body="".join(json.dumps(line) + "\n" for line in self.results[batch_id]))

    def batch_request_count(self) -> int:
        return sum(len(requests) for requests in self.batches.values())


@pytest.fixture
def fake_batches(monkeypatch):
    with FakeBatches() as api:
        for key, value in api.env().items():
            monkeypatch.setenv(key, value)
        yield api

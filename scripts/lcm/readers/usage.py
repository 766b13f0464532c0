"""What the work cost: tokens and dollars by day, week, month, session, project or model, over
the whole vault (lcm usage; the viewer's usage page).

Read from usage_rollup: the counted lines of the table `usage` (lcm/capture/tokens.py: one row
per stored line that carries message.usage) summed by quarter hour, session and model, kept in
step by the triggers of migration 18, so a report reads thousands of rows, not every response;
plus the lines hooks stored since the last packing run, whose usage waits to be read
(lcm.capture.tokens.waiting): read here, summed the same way. Counted as ccusage counts, so the two agree on the same transcripts: a response
written on several lines (one per content block, the same message.id and requestId) counts
once, its first stored line; a line without either id counts alone; Claude Code's
`<synthetic>` placeholders are left out; a day is the local calendar day (TZ) of the line's
timestamp. Prices come from the dated table prices.json beside this module, overridden model by
model by $LCM_HOME/prices.json; a model in neither is counted in tokens, its cost left out and
its name listed. Stdlib only.
"""
from __future__ import annotations

import json
import os
import re

import lcm.base.config
import lcm.vault.schema
from lcm.base.errors import LcmError

BY = ("day", "week", "month", "session", "project", "model")
FIELDS = ("input", "output", "cache_write_5m", "cache_read")  # priced fields of prices.json
MILLION = 1_000_000
SYNTHETIC = "<synthetic>"  # Claude Code's stand-in for a response it made up itself (an error): no tokens

# the SQL group of a usage_rollup row r (s: its session); time groups are read by quarter hour and
# put in your local day, week or month here (every zone's offset is a whole number of quarter hours)
KEYS = {"day": "r.bucket", "week": "r.bucket", "month": "r.bucket", "session": "r.session_id",
        "project": "coalesce(s.project, '')", "model": "''"}
TIME_GROUPS = ("day", "week", "month")
SUMS = ", ".join(f"sum(r.{name})" for name in lcm.vault.schema.USAGE_SUMS)


def _package_prices() -> dict:
    with open(os.path.join(os.path.dirname(os.path.abspath(__file__)), "prices.json"), encoding="utf-8") as f:
        return json.load(f)


def prices() -> dict:
    """The price table: the package's, each model in $LCM_HOME/prices.json (same shape) replacing
    the package's own. Keys: taken, source, models, override (the person's file, or None)."""
    table = _package_prices()
    table["override"] = None
    path = os.path.join(lcm.base.config.home_str(), "prices.json")
    if not os.path.exists(path):
        return table
    try:
        with open(path, encoding="utf-8") as f:
            own = json.load(f)
        models = own["models"]
        if not isinstance(models, dict) or not all(isinstance(v, dict) for v in models.values()):
            raise ValueError("models must map each model name to its prices")
        for name, rates in models.items():
            for field in (*FIELDS, "cache_write_1h"):
                if field in rates and not isinstance(rates[field], (int, float)):
                    raise ValueError(f"{name}: {field} must be a number")
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise LcmError(f"cannot read the price table {path}: {exc}",
                       'fix it: {"taken": "YYYY-MM-DD", "models": {"claude-...": {"input": 3, "output": 15,'
                       ' "cache_write_5m": 3.75, "cache_write_1h": 6, "cache_read": 0.3}}} (dollars per million tokens),'
                       " or remove it to use lcm's own table") from None
    table["models"].update(models)
    table["override"] = path
    if isinstance(own.get("taken"), str):
        table["taken"] = own["taken"]
    return table


def price_of(model: str, models: dict) -> tuple[dict | None, float]:
    """(the rates of `model`, its multiplier): the table's entry of that name, else the longest
    one the name starts with (`claude-opus-4-5-20251101` is `claude-opus-4-5`), a provider
    prefix (`anthropic/`, `anthropic.`, `us.anthropic.`) aside; a `-fast` name is its model at
    the entry's `fast` multiplier. (None, 1.0) when none fits."""
    fast = model.endswith("-fast")
    name = model[:-5] if fast else model
    name = re.sub(r"^(?:[a-z]{2}\.)?anthropic[./]", "", name)
    rates = models.get(name)
    if rates is None:
        starts = [key for key in models if name.startswith(key)]
        rates = models[max(starts, key=len)] if starts else None
    if rates is None:
        return None, 1.0
    return rates, float(rates.get("fast", 1)) if fast else 1.0


def _cost(sums: tuple, rates: dict, factor: float) -> float:
    """Dollars of one group's priced tokens (sums: SUMS[6:]) plus the costUSD its lines carried."""
    priced, hour, above, carried = sums[:4], sums[4], sums[5:9], sums[9]
    high = rates.get("above_200k") or {}
    cost = 0.0
    for field, tokens, past in zip(FIELDS, priced, above):
        rate = float(rates.get(field, 0))
        cost += (tokens - past) * rate + past * float(high.get(field, rate))
    # an hour's cache write costs more than five minutes' (the table's cache_write_1h)
    cost += hour * (float(rates.get("cache_write_1h", rates.get("cache_write_5m", 0))) - float(rates.get("cache_write_5m", 0)))
    return cost * factor / MILLION + carried


def parse_day(value: str | None, flag: str) -> str | None:
    """A local calendar day, YYYY-MM-DD, from YYYY-MM-DD, YYYYMMDD (ccusage's form) or an age (3d, 2w)."""
    if not value:
        return None
    text = value.strip()
    import time
    m = re.fullmatch(r"(\d+)\s*([dw])", text.lower())
    if m:
        days = int(m.group(1)) * (7 if m.group(2) == "w" else 1)
        if days > 3_000_000:
            raise LcmError(f"{flag} {text[:40]} is out of range", f"give a date such as {flag} 2026-11-01")
        return time.strftime("%Y-%m-%d", time.localtime(time.time() - days * 86400))
    m = re.fullmatch(r"(\d{4})-?(\d{2})-?(\d{2})", text)
    if not m or not (1 <= int(m.group(2)) <= 12 and 1 <= int(m.group(3)) <= 31):
        raise LcmError(f"{flag} {text[:40]!r} is not a day",
                       f"use e.g. {flag} 2026-11-01, {flag} 20261101 or {flag} 7d (d w: days or weeks ago)")
    return "-".join(m.groups())


def _local_key(bucket: int, by: str, cache: dict) -> str | None:
    """The local day (YYYY-MM-DD), week (its Monday) or month (YYYY-MM) of a quarter-hour slot."""
    key = cache.get(bucket)
    if key is None and bucket >= 0:
        import time
        when = time.localtime(bucket * lcm.vault.schema.USAGE_BUCKET_SECONDS)
        if by == "week":
            when = time.localtime(time.mktime((when.tm_year, when.tm_mon, when.tm_mday - when.tm_wday, 12, 0, 0, 0, 0, -1)))
        key = cache[bucket] = time.strftime("%Y-%m" if by == "month" else "%Y-%m-%d", when)
    return key


def _bucket_of_day(day: str, after: bool = False) -> int:
    """The first quarter-hour slot of a local day (after=True: the first one after it)."""
    import time
    year, month, mday = (int(p) for p in day.split("-"))
    start = time.mktime((year, month, mday + (1 if after else 0), 0, 0, 0, 0, 0, -1))
    return int(start) // lcm.vault.schema.USAGE_BUCKET_SECONDS


def report(conn, by: str = "day", since: str | None = None, until: str | None = None) -> dict:
    """Usage grouped by `by` (one of BY), newest first for time groups, costliest first otherwise;
    each group with its models. since/until: local days (parse_day), both included."""
    if by not in BY:
        raise LcmError(f"cannot group usage by {by!r}", f"use one of: {', '.join(BY)}")
    table = prices()
    where, params = [f"r.model != '{SYNTHETIC}'"], []
    if since:
        where.append("r.bucket >= ?")
        params.append(_bucket_of_day(since))
    if until:
        where.append("r.bucket >= 0 AND r.bucket < ?")
        params.append(_bucket_of_day(until, after=True))
    join = " LEFT JOIN sessions s ON s.session_id = r.session_id" if by == "project" else ""
    rows = conn.execute(f"SELECT {KEYS[by]} AS k, r.model AS m, {SUMS} FROM {_with_waiting(conn)} r{join}"
                        f" WHERE {' AND '.join(where)} GROUP BY k, m HAVING sum(r.responses) > 0", params).fetchall()
    merged: dict = {}  # (group, model) -> sums: quarter hours into days, weeks or months
    cache: dict = {}
    for row in rows:
        key = _local_key(row[0], by, cache) if by in TIME_GROUPS else row[0]
        model = row[1] or "unknown"
        key = model if by == "model" else key
        sums = merged.get((key, model))
        merged[(key, model)] = list(row[2:]) if sums is None else [a + b for a, b in zip(sums, row[2:])]
    groups: dict = {}
    unpriced: dict[str, int] = {}
    for (key, model), sums in merged.items():
        rates, factor = price_of(model, table["models"])
        tokens = _tokens(sums[:6])
        carried = sums[15]
        if rates is None and not carried:
            cost = None
            unpriced[model] = unpriced.get(model, 0) + tokens["total_tokens"]
        else:
            cost = _cost(tuple(sums[6:16]), rates or {}, factor)
        group = groups.setdefault(key, {"key": key, **_tokens((0,) * 6), "cost_usd": 0.0, "models": []})
        for name, value in tokens.items():
            group[name] += value
        if cost is not None:
            group["cost_usd"] += cost
        group["models"].append({"model": model, **tokens, "cost_usd": cost})
    items = list(groups.values())
    for group in items:
        group["models"].sort(key=lambda m: (-(m["cost_usd"] or 0), -m["total_tokens"], m["model"]))
        group["cost_complete"] = all(m["cost_usd"] is not None for m in group["models"])
    if by in TIME_GROUPS:
        items.sort(key=lambda g: g["key"] or "", reverse=True)
    else:
        items.sort(key=lambda g: (-g["cost_usd"], -g["total_tokens"], str(g["key"])))
    if by == "project":
        for group in items:
            group["key"] = group["key"] or None
    totals = _tokens((0,) * 6)
    totals["cost_usd"] = 0.0
    for group in items:
        for name in totals:
            totals[name] += group[name]
    import lcm.capture.tokens
    return {"by": by, "since": since, "until": until, "timezone": os.environ.get("TZ") or "local",
            "items": items, "count": len(items), "totals": totals,
            "unpriced_models": [{"model": m, "total_tokens": t} for m, t in sorted(unpriced.items())],
            "prices": {"taken": table["taken"], "source": table.get("source"), "override": table["override"]},
            "messages_not_read": lcm.capture.tokens.pending(conn)}


def _with_waiting(conn) -> str:
    """usage_rollup, or with lines waiting to be read (lcm.capture.tokens.waiting) the rollup and
    their shares: as SQL for FROM. In the connection's temp schema (a read-only vault too), a
    table shaped as `usage`, each waiting line counted as the table would count it: the first
    stored line of its response, so a counted row of the table stored after one of them (a bulk
    import meanwhile) gives its count back."""
    import lcm.capture.tokens
    rows, _last = lcm.capture.tokens.waiting(conn)
    if not rows:
        return "usage_rollup"
    conn.execute("DROP TABLE IF EXISTS temp.usage_waiting")
    conn.execute(lcm.vault.schema.USAGE_TABLE.format(name="temp.usage_waiting"))
    conn.executemany("INSERT INTO temp.usage_waiting VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, 1)",
                     [(mid, model, lcm.vault.schema.response_key(response), *row)
                      for mid, _uuid, model, response, *row in rows])
    conn.execute("UPDATE temp.usage_waiting SET counted = 0 WHERE response IS NOT NULL AND (EXISTS (SELECT 1"
                 " FROM main.usage u WHERE u.response = usage_waiting.response AND u.message_id < usage_waiting.message_id)"
                 " OR EXISTS (SELECT 1 FROM temp.usage_waiting w WHERE w.response = usage_waiting.response"
                 " AND w.message_id < usage_waiting.message_id))")
    values = lcm.vault.schema._usage_values
    key = lcm.vault.schema.usage_key
    return (f"(SELECT bucket, session_id, model, {', '.join(lcm.vault.schema.USAGE_SUMS)} FROM usage_rollup"
            f" UNION ALL SELECT {key('w')}, {', '.join(values('w'))} FROM temp.usage_waiting w"
            " JOIN main.messages m ON m.id = w.message_id WHERE w.counted = 1"
            f" UNION ALL SELECT {key('u')}, {', '.join(f'-({v})' for v in values('u'))} FROM main.usage u"
            " JOIN main.messages m ON m.id = u.message_id"
            " WHERE u.counted = 1 AND u.message_id IN (SELECT d.message_id FROM temp.usage_waiting w JOIN main.usage d"
            " ON d.response = w.response AND d.message_id > w.message_id WHERE w.counted = 1))")


def _tokens(sums) -> dict:
    responses, given, made, write, hour, read = (int(v or 0) for v in sums)
    return {"responses": responses, "input_tokens": given, "output_tokens": made, "cache_write_tokens": write,
            "cache_write_1h_tokens": hour, "cache_read_tokens": read, "total_tokens": given + made + write + read}

"""Masking against the field: gitleaks' default rules, what must stay readable, and the cost.

Usage:
  python3 bench/masking.py [--rules ../shared/secrets/gitleaks.toml] [--samples 3] [--seed 1]
                           [--data ../shared/data] [--root TREE] [--verbose] [--skip-data] [--data-only]

For every rule of the rule set (gitleaks' default config: 222 rules), samples are built from its
regular expression by a small generator over `sre_parse` (a random string of each class and
repeat, the rule's entropy floor respected: a sample under it is drawn again; one caught by the
rule's allowlist too). A rule whose whole match is the secret (a prefixed token: `ghp_...`) is
sampled as is; a rule anchored on a keyword (`adafruit ... = VALUE`, 96 rules) is sampled the
way the field writes its own true positives, the keyword in a name (`adafruitToken=VALUE`,
`"adafruit_token": "VALUE"`, `ADAFRUIT_TOKEN=VALUE`, ...); every sample is checked to match
the rule with the same secret, else drawn again. A rule that cannot be sampled is counted and
named (`unsampled`). The bare keyword (`adafruit=VALUE`) is measured apart (`bare_keyword`):
lcm does not take a vendor's name alone for a secret's (README, "What is not masked").

Each sample is placed in user text, a tool result, a Bash command and a file written (the four
transcript lines Claude Code writes), each after a newline, after a CJK letter and inside JSON
text; each line goes through `mask_line` (what leaves the vault) and through the ingest path's
searchable text (`lcm.capture.transcript.parse_lines`). A sample is left in clear when its
secret, or half of it (8 characters at least), is in what came out. Target: at least 95% of the
samples masked in every place.

Not secrets (git SHAs, UUIDs, sha256/sha512 digests, npm integrity strings, paths, identifiers,
variable names without a value) go the same ways; each one hidden counts. Target: 0.

With --data, every line of the shared transcripts is masked: the masks made, by kind (tokens
hidden), and the time of mask_line over the lines and of mask over their searchable text
(the hot path's cost). --root runs another checkout's lcm (e.g. main) for a before/after.
Prints one JSON line; --verbose adds per-rule detail on stderr.
"""
from __future__ import annotations

import argparse
import json
import math
import os
import random
import re
import sre_constants as C
import sre_parse
import sys
import time
from collections import Counter
from pathlib import Path

HERE = Path(__file__).resolve().parent
SHARED = HERE.parent.parent / "shared"

# how the field writes a secret under a vendor's name (gitleaks' own true-positive samples are
# built this way: the identifier with a Token/_token suffix, in ini, yaml, json and env shapes)
NAMED = ["{i}Token={s}", '{i}_token: "{s}"', "{I}_TOKEN={s}", '{i}_api_token = "{s}"', "{i}_secret: {s}",
         '"{i}_api_key": "{s}"', "{I}_API_KEY='{s}'", "{i}Token = {s}"]
BARE = ["{i}={s}", "{i}: {s}"]
REPEATS = 3  # timings: the best of
PLACES = ["user text", "tool result", "bash command", "file written"]
POSITIONS = ["after a newline", "after a CJK letter", "inside JSON"]

NOT_SECRETS = [
    ("git sha", "commit 4b825dc642cb6eb9a060e54bf8d69288fbee4904", "4b825dc642cb6eb9a060e54bf8d69288fbee4904"),
    ("git sha short", "fixed in a3f9c21 (see 7d0e5b8)", "a3f9c21"),
    ("git log line", "e83c5163316f89bfbde7d9ab23ca2e25604af290 Initial revision of the parser",
     "e83c5163316f89bfbde7d9ab23ca2e25604af290"),
    ("uuid", "session 7acd37a8-2745-4b58-a8a9-46164b22ad9e resumed", "7acd37a8-2745-4b58-a8a9-46164b22ad9e"),
    ("uuid field", '"requestId": "f47ac10b-58cc-4372-a567-0e02b2c3d479"', "f47ac10b-58cc-4372-a567-0e02b2c3d479"),
    ("sha256", "sha256: 9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08",
     "9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08"),
    ("sha256 digest", "image@sha256:e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855",
     "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"),
    ("sha512", "checksum=cf83e1357eefb8bdf1542850d66d8007d620e4050b5715dc83f4a921d36ce9ce47d0d13c5d85f2b0ff8318d2877eec2f63b931bd47417a81a538327af927da3e",
     "cf83e1357eefb8bdf1542850d66d8007d620e4050b5715dc83f4a921d36ce9ce47d0d13c5d85f2b0ff8318d2877eec2f63b931bd47417a81a538327af927da3e"),
    ("npm integrity", '"integrity": "sha512-z4PhNX7vuL3xVChQ1m2AB9Yg5AULVxXcg/SpIdNs6c5H0NE8XYXysP+DGNKHfuwvY7kxvUdBeoGlODJ6+SfaPg=="',
     "sha512-z4PhNX7vuL3xVChQ1m2AB9Yg5AULVxXcg/SpIdNs6c5H0NE8XYXysP+DGNKHfuwvY7kxvUdBeoGlODJ6+SfaPg=="),
    ("npm integrity sha1", "integrity sha1-6yhAdG2dxPGHNL9Pt1jmZ3HkeEs=", "sha1-6yhAdG2dxPGHNL9Pt1jmZ3HkeEs="),
    ("path", "/home/ann/.config/gcloud/application_default_credentials.json",
     "/home/ann/.config/gcloud/application_default_credentials.json"),
    ("path with key", "cat ~/.ssh/id_ed25519.pub src/auth/token_store.py", "src/auth/token_store.py"),
    ("identifier", "const t = getAccessTokenFromRefreshToken(refreshToken)", "getAccessTokenFromRefreshToken(refreshToken)"),
    ("identifier 2", "def validate_api_key_format(api_key_header):", "validate_api_key_format(api_key_header)"),
    ("identifier 3", "SecretManagerServiceClient.access_secret_version", "SecretManagerServiceClient.access_secret_version"),
    ("variable name", "export OPENAI_API_KEY", "OPENAI_API_KEY"),
    ("variable name 2", 'key = os.environ["ANTHROPIC_API_KEY"]', "ANTHROPIC_API_KEY"),
    ("variable name 3", "echo $GITHUB_TOKEN | gh auth login --with-token", "$GITHUB_TOKEN"),
    ("variable name 4", "AWS_SECRET_ACCESS_KEY=${AWS_SECRET_ACCESS_KEY:?}", "AWS_SECRET_ACCESS_KEY"),
    ("base64 image head", "data:image/png;base64,iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNk",
     "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJ"),
    ("url", "https://docs.github.com/en/rest/authentication/keeping-your-api-credentials-secure",
     "https://docs.github.com/en/rest/authentication/keeping-your-api-credentials-secure"),
    ("url port path", "open http://localhost:8080/api/v1/users@me for the profile", "localhost:8080/api/v1/users"),
    ("email", "Co-Authored-By: Claude <noreply@anthropic.com>", "noreply@anthropic.com"),
    ("package", "pip install scikit-learn==1.4.2 sk-learn-helpers", "sk-learn-helpers"),
    ("css", "color: #1a2b3c; font-family: monospace", "#1a2b3c"),
    ("time", "10:42:17 INFO worker started at 2026-11-27T18:20:02Z", "10:42:17"),
    ("ipv6", "fe80:0:0:0:200:f8ff:fe21:67cf", "fe80:0:0:0:200:f8ff:fe21:67cf"),
    ("mac", "ether 00:11:22:33:44:55", "00:11:22:33:44:55"),
]


# -- the sample generator ------------------------------------------------------------------

def go_to_python(source: str) -> tuple[str, int]:
    """A Go RE2 pattern as Python reads it: `\\z` is `\\Z`; a flag group in mid-pattern (`(?i)`)
    is not allowed: it is dropped, and the pattern compiled case-insensitive as a whole."""
    flags = 0
    source = source.replace(r"\z", r"\Z").replace("[[:alnum:]]", "[A-Za-z0-9]")
    if source.startswith("(?i)"):
        source, flags = source[4:], re.I
    if "(?i)" in source:
        source, flags = source.replace("(?i)", ""), re.I
    return source, flags


CATEGORY_CHARS = {
    C.CATEGORY_DIGIT: "0123456789",
    C.CATEGORY_WORD: "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_",
    C.CATEGORY_SPACE: " ",
    C.CATEGORY_NOT_DIGIT: "abcdefghijklmnopqrstuvwxyz",
    C.CATEGORY_NOT_WORD: " .-",
    C.CATEGORY_NOT_SPACE: "abcdefghijklmnopqrstuvwxyz0123456789",
}
PRINTABLE = [chr(c) for c in range(0x21, 0x7f)]


class Unsampleable(Exception):
    pass


class Generator:
    """A random string matching a parsed pattern; `groups` records what each group produced."""

    def __init__(self, rng: random.Random, ignore_case: bool):
        self.rng, self.ignore_case, self.groups = rng, ignore_case, {}

    def items(self, parsed) -> str:
        return "".join(self.item(op, av) for op, av in parsed)

    def charset(self, items) -> list[str]:
        chars, negate = set(), False
        for op, av in items:
            if op is C.NEGATE:
                negate = True
            elif op is C.LITERAL:
                chars.add(chr(av))
            elif op is C.RANGE:
                chars.update(chr(c) for c in range(av[0], av[1] + 1) if c < 0x2000)
            elif op is C.CATEGORY:
                chars.update(CATEGORY_CHARS.get(av, ""))
            else:
                raise Unsampleable(f"class item {op}")
        if negate:
            chars = set(PRINTABLE) - chars
        # a sample made of letters and digits, where the class allows it, reads like a real token
        plain = sorted(c for c in chars if c.isalnum() and c.isascii())
        return plain if len(plain) >= 8 else sorted(chars)

    def item(self, op, av) -> str:
        rng = self.rng
        if op is C.LITERAL:
            return chr(av)
        if op is C.NOT_LITERAL:
            return rng.choice([c for c in "abcxyz019" if c != chr(av)])
        if op is C.ANY:
            return "."  # alone, mostly a dot left unescaped (`hooks.slack.com`)
        if op is C.IN:
            return rng.choice(self.charset(av))
        if op is C.BRANCH:
            return self.items(rng.choice(av[1]))
        if op is C.SUBPATTERN:
            group, _add, _del, parsed = av
            text = self.items(parsed)
            if group:
                self.groups[group] = text
            return text
        if op in (C.MAX_REPEAT, C.MIN_REPEAT):
            low, high, parsed = av
            high = low + 12 if high == C.MAXREPEAT else high
            count = rng.randint(low, max(low, min(high, low + 24)))
            if [op for op, _av in parsed] == [C.ANY]:  # `.*`, `.{8,}`: words and spaces
                return "".join(rng.choice("abcdefghijkmnopqrstuvwxyz0123456789  ") for _ in range(count))
            return "".join(self.items(parsed) for _ in range(count))
        if op in (C.AT, C.ASSERT, C.ASSERT_NOT):
            return ""
        if op is C.GROUPREF:
            return self.groups.get(av, "")
        if op is C.CATEGORY:
            return rng.choice(CATEGORY_CHARS.get(av, "a"))
        raise Unsampleable(f"op {op}")


def entropy(text: str) -> float:
    counts = Counter(text)
    return -sum(n / len(text) * math.log2(n / len(text)) for n in counts.values()) if text else 0.0


def secret_group(rule: dict, pattern) -> int:
    if rule.get("secretGroup"):
        return int(rule["secretGroup"])
    return 1 if pattern.groups else 0


def allowed(rule: dict, secret: str, sample: str) -> bool:
    """Whether the rule's allowlists (or the global stopwords) let this sample go."""
    for allow in rule.get("allowlists", []):
        target = sample if allow.get("regexTarget") == "match" else secret
        for source in allow.get("regexes", []):
            src, flags = go_to_python(source)
            try:
                if re.search(src, target, flags):
                    return True
            except re.error:
                pass
        for word in allow.get("stopwords", []):
            if word.lower() in secret.lower():
                return True
    return False


NAME_PREFIX = r"[\w.-]{0,50}?"  # how a keyword rule opens: a name around the vendor's


def identifier_of(source: str, flags: int, rng: random.Random) -> str | None:
    """The vendor name a keyword rule looks for before its value (`[\\w.-]{0,50}?(?:adafruit)...`),
    drawn from that group; None for a rule that is not shaped so."""
    scoped = NAME_PREFIX + "(?i:" + NAME_PREFIX  # `[\\w.-]{0,50}?(?i:[\\w.-]{0,50}?(?:meraki)...`
    if source.startswith(scoped + "(?:"):
        at = len(scoped)
    elif source.startswith(NAME_PREFIX + "(?:"):
        at = len(NAME_PREFIX)
    else:
        return None
    depth = 0
    for end in range(at, len(source)):
        if source[end] == "\\":
            continue
        depth += {"(": 1, ")": -1}.get(source[end], 0) if source[end - 1] != "\\" else 0
        if depth == 0:
            break
    name = Generator(rng, False).items(sre_parse.parse(source[at:end + 1], flags))
    return name if name and all(c.isalnum() or c in "_-." for c in name) else None


def make_samples(rule: dict, count: int, rng: random.Random) -> tuple[list, list, str | None]:
    """([(sample, secret)] in the field's shapes, [(sample, secret)] under the bare keyword, why not)."""
    source, flags = go_to_python(rule.get("regex", ""))
    if not source:
        return [], [], "no regex (a path rule)"
    try:
        pattern = re.compile(source, flags)
        parsed = sre_parse.parse(source, flags)
    except (re.error, OverflowError) as exc:
        return [], [], f"does not compile: {exc}"
    group = secret_group(rule, pattern)
    floor = float(rule.get("entropy") or 0)
    anchored = identifier_of(source, flags, rng) is not None
    named, bare = [], []
    tries = 0
    while (len(named) < count or (anchored and len(bare) < count)) and tries < 400:
        tries += 1
        gen = Generator(rng, bool(flags & re.I))
        try:
            whole = gen.items(parsed)
        except Unsampleable as exc:
            return [], [], f"cannot sample: {exc}"
        m = pattern.search(whole)
        if m is None:
            continue
        g = group if group and m.group(group) is not None else next(
            (i for i in range(1, (pattern.groups or 0) + 1) if m.group(i)), 0)
        secret = m.group(g)
        if g and not rule.get("secretGroup") and len(secret) < 10 < len(m.group(0)):
            # a scheme (`(https?://)`) or a piece of the token (`([a-z0-9]{4}-){3}`) first: the
            # longest group is the secret, or the whole match if every group is such a piece
            g = max(range(1, pattern.groups + 1), key=lambda i: len(m.group(i) or ""))
            if len(m.group(g)) < 10:
                g = 0
            secret = m.group(g)
        if not secret or entropy(secret) < floor or allowed(rule, secret, m.group(0)):
            continue
        if not anchored:
            if len(named) < count:  # the match without the character that ends it (a quote, `\\n`)
                end = m.end() - len(re.search(r"(?:[`'\"\s;]|\\[nr])?$", m.group(0)).group(0))
                named.append((whole[m.start():max(end, m.end(g))], secret))
            continue
        shapes = NAMED if len(named) < count else BARE
        shape = shapes[(len(named) if shapes is NAMED else len(bare)) % len(shapes)]
        name = identifier_of(source, flags, rng)
        if name is None:
            continue
        sample = shape.format(i=name, I=name.upper(), s=secret)
        m = pattern.search(sample)
        if m is None or secret not in m.group(0):
            continue
        (named if shapes is NAMED else bare).append((sample, secret))
    if not named:
        return [], [], f"no sample matched in {tries} tries"
    return named, bare, None


# -- placing a sample where a transcript holds it ---------------------------------------------

def positioned(sample: str, position: str) -> str:
    if position == "after a newline":
        return "here it is:\n" + sample + "\nand more"
    if position == "after a CJK letter":
        return "設定は" + sample + "です"
    return "payload " + json.dumps({"config": {"value": sample, "n": 1}})


def entry_line(place: str, text: str, n: int) -> bytes:
    base = {"uuid": f"00000000-0000-4000-8000-{n:012d}", "sessionId": "bench-secrets", "cwd": "/home/u/proj",
            "timestamp": "2026-11-27T18:00:00Z"}
    if place == "user text":
        entry = {"type": "user", "message": {"role": "user", "content": text}}
    elif place == "tool result":
        entry = {"type": "user", "message": {"role": "user", "content": [
            {"type": "tool_result", "tool_use_id": "toolu_1", "content": text}]}}
    elif place == "bash command":
        entry = {"type": "assistant", "message": {"role": "assistant", "content": [
            {"type": "tool_use", "id": "toolu_1", "name": "Bash", "input": {"command": text, "description": "run"}}]}}
    else:
        entry = {"type": "assistant", "message": {"role": "assistant", "content": [
            {"type": "tool_use", "id": "toolu_1", "name": "Write",
             "input": {"file_path": "/home/u/proj/config/settings", "content": text}}]}}
    return json.dumps({**base, **entry}).encode()


def strings_of(value) -> list[str]:
    out, stack = [], [value]
    while stack:
        item = stack.pop()
        if isinstance(item, dict):
            stack += list(item.keys()) + list(item.values())
        elif isinstance(item, list):
            stack += item
        elif isinstance(item, str):
            out.append(item)
    return out


def in_clear(secret: str, texts: list[str]) -> bool:
    """The secret, or its first or last half (8 characters at least), in any of the texts; JSON
    text is read decoded too (`\\/` is `/`)."""
    part = max(8, len(secret) // 2)
    probes = {secret, secret[:part], secret[-part:]}
    escaped = json.dumps(secret)[1:-1]
    probes |= {escaped, escaped[:part]} if escaped != secret else set()
    for text in texts:
        if any(p in text for p in probes):
            return True
    return False


class Outlets:
    """What leaves the vault for one transcript line: mask_line's bytes and the searchable text."""

    def __init__(self):
        import lcm.base.mask
        import lcm.capture.transcript
        self.mask, self.transcript = lcm.base.mask, lcm.capture.transcript

    def texts(self, line: bytes) -> dict[str, list[str]]:
        masked = self.mask.mask_line(line)
        decoded = strings_of(json.loads(masked))
        batch = self.transcript.Batch("/tmp/lcm-bench-secrets/-home-u-proj/bench-secrets.jsonl", None)
        self.transcript.parse_lines(batch, [line], True, 1 << 30)
        return {"mask_line": [masked.decode("utf-8", "replace")] + decoded,
                "searchable": [batch.rows[0][14]] if batch.rows else []}


def measure(samples: list, outlets: Outlets, counter: list) -> dict:
    """{place: [masked, total]} over every sample, position and outlet."""
    result = {p: [0, 0] for p in PLACES}
    for sample, secret in samples:
        for place in PLACES:
            for position in POSITIONS:
                counter[0] += 1
                texts = outlets.texts(entry_line(place, positioned(sample, position), counter[0]))
                result[place][1] += 1
                if not any(in_clear(secret, t) for t in texts.values()):
                    result[place][0] += 1
    return result


def not_secret_hidden(outlets: Outlets, counter: list) -> list[dict]:
    hidden = []
    for name, text, keep in NOT_SECRETS:
        for place in PLACES:
            for position in POSITIONS:
                counter[0] += 1
                texts = outlets.texts(entry_line(place, positioned(text, position), counter[0]))
                for outlet, found in texts.items():
                    readable = [t for t in found if keep in t or json.dumps(keep)[1:-1] in t]
                    if not readable:
                        hidden.append({"item": name, "place": place, "position": position, "outlet": outlet})
    return hidden


# -- the shared transcripts: tokens hidden and the time masking takes ---------------------------

def transcripts(data: Path) -> list[bytes]:
    lines = []
    for path in sorted(data.rglob("*.jsonl")):
        with open(path, "rb") as f:
            lines += [line.rstrip(b"\n") for line in f if line.strip()]
    return lines


def data_figures(data: Path, outlets: Outlets) -> dict:
    lines = transcripts(data)
    mask = outlets.mask
    masked, line_seconds = [], float("inf")
    for _ in range(REPEATS):  # the best of a few: the machine is shared
        started = time.perf_counter()
        masked = [mask.mask_line(line) for line in lines]
        line_seconds = min(line_seconds, time.perf_counter() - started)
    texts = []
    for line in lines:
        try:
            entry = json.loads(line)
        except ValueError:
            continue
        if isinstance(entry, dict):
            texts.append("\n".join(outlets.transcript.entry_blocks(entry)))
    text_seconds = float("inf")
    for _ in range(REPEATS):
        started = time.perf_counter()
        for text in texts:
            mask.mask(text)
        text_seconds = min(text_seconds, time.perf_counter() - started)
    kinds = Counter()
    for line in masked:
        for m in re.finditer(rb"\[secret:([a-z0-9-]+):[0-9a-f]{4}\]", line):
            kinds[m.group(1).decode()] += 1
    return {"lines": len(lines), "bytes": sum(map(len, lines)), "text_chars": sum(map(len, texts)),
            "mask_line_seconds": round(line_seconds, 3), "mask_text_seconds": round(text_seconds, 3),
            "tokens_hidden": sum(kinds.values()), "tokens_hidden_by_kind": dict(sorted(kinds.items()))}


def generic_evidence(rule: dict, data: Path, outlets: Outlets, measured: dict | None) -> dict:
    """What gitleaks' generic rule (any name holding key/token/secret/auth..., then a value over
    its entropy floor) finds in the shared transcripts, which hold no secret lcm knows of: each
    match is text that masking by that rule would hide."""
    source, flags = go_to_python(rule["regex"])
    pattern, floor = re.compile(source, flags), float(rule.get("entropy") or 0)
    # the wider reading a bare vendor name would need: a value over the floor after *any* name
    any_name = re.compile(r"""(?i)[\w.-]{1,50}[ \t]{0,3}(?:=|:|=>|:=)[ \t]{0,3}["'`]?([a-z0-9_+/=.-]{16,})""")
    found = wide = 0
    for line in transcripts(data):
        try:
            entry = json.loads(line)
        except ValueError:
            continue
        if not isinstance(entry, dict):
            continue
        for text in outlets.transcript.entry_blocks(entry):
            for m in pattern.finditer(text):
                secret = next((g for g in m.groups() if g), m.group(0))
                if entropy(secret) >= floor and not allowed(rule, secret, m.group(0)):
                    found += 1
            for m in any_name.finditer(text):
                value = m.group(1)
                wide += entropy(value) >= floor and any(c.isdigit() for c in value) and any(c.isalpha() for c in value)
    return {"matches_in_shared_transcripts": found, "any_name_over_the_floor_in_shared_transcripts": wide,
            "samples_masked_share": round(1 - measured["clear_share"], 3) if measured else None,
            "decision": "not copied: lcm masks a value by its name (password, token, secret, api_key, ...) "
                        "and by its vendor's prefix, not by its entropy after any name (paths, URLs, SHAs, "
                        "module names: the any-name count, none of them a secret)"}


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--rules", default=str(SHARED / "secrets" / "gitleaks.toml"))
    p.add_argument("--samples", type=int, default=3, help="samples per rule")
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--data", default=str(SHARED / "data"))
    p.add_argument("--skip-data", action="store_true", help="leave the shared transcripts out")
    p.add_argument("--root", default=str(HERE.parent), help="the lcm checkout to measure")
    p.add_argument("--verbose", action="store_true", help="per-rule detail on stderr")
    p.add_argument("--data-only", action="store_true", help="only the shared transcripts' figures (for timing runs)")
    args = p.parse_args(argv)
    sys.path.insert(0, str(Path(args.root) / "scripts"))
    if args.data_only:
        print(json.dumps({"root": args.root, "data": data_figures(Path(args.data), Outlets())}))
        return 0
    import tomllib
    with open(args.rules, "rb") as f:
        rules = tomllib.load(f)["rules"]
    rng = random.Random(args.seed)
    outlets = Outlets()
    counter = [0]
    per_rule, unsampled = {}, {}
    totals = {p: [0, 0] for p in PLACES}
    bare_totals = [0, 0]
    for rule in rules:
        named, bare, why = make_samples(rule, args.samples, rng)
        if why:
            unsampled[rule["id"]] = why
            continue
        result = measure(named, outlets, counter)
        for place, (ok, n) in result.items():
            totals[place][0] += ok
            totals[place][1] += n
        masked = sum(ok for ok, _n in result.values())
        total = sum(n for _ok, n in result.values())
        per_rule[rule["id"]] = {"masked": masked, "samples": total, "clear_share": round(1 - masked / total, 3),
                                "example": named[0][0][:120]}
        if bare:
            got = measure(bare, outlets, counter)
            bare_totals[0] += sum(ok for ok, _n in got.values())
            bare_totals[1] += sum(n for _ok, n in got.values())
    overall_ok = sum(ok for ok, _n in totals.values())
    overall_n = sum(n for _ok, n in totals.values())
    hidden = not_secret_hidden(outlets, counter)
    worst = sorted(per_rule.items(), key=lambda kv: -kv[1]["clear_share"])
    figures = {
        "rules": len(rules), "rules_sampled": len(per_rule), "unsampled": len(unsampled),
        "unsampled_rules": unsampled,
        "samples": overall_n, "masked_share": round(overall_ok / overall_n, 4),
        "masked_share_by_place": {p: round(ok / n, 4) for p, (ok, n) in totals.items()},
        "target_masked_share": 0.95,
        "rules_fully_masked": sum(1 for r in per_rule.values() if r["clear_share"] == 0),
        "worst_rules": {k: v["clear_share"] for k, v in worst[:12] if v["clear_share"] > 0},
        "bare_keyword_masked_share": round(bare_totals[0] / bare_totals[1], 4) if bare_totals[1] else None,
        "not_secret_items": len(NOT_SECRETS), "not_secret_cases": len(NOT_SECRETS) * len(PLACES) * len(POSITIONS) * 2,
        "not_secret_hidden": len(hidden), "not_secret_hidden_items": sorted({h["item"] for h in hidden}),
        "target_not_secret_hidden": 0,
    }
    if not args.skip_data and os.path.isdir(args.data):
        figures["data"] = data_figures(Path(args.data), outlets)
        generic = next((r for r in rules if r["id"] == "generic-api-key"), None)
        if generic is not None:
            figures["generic_api_key"] = generic_evidence(generic, Path(args.data), outlets, per_rule.get(generic["id"]))
    if args.verbose:
        for rule_id, r in worst:
            sys.stderr.write(f"{r['clear_share']:.3f} {r['masked']}/{r['samples']} {rule_id}: {r['example']!r}\n")
        for h in hidden:
            sys.stderr.write(f"hidden: {h}\n")
    print(json.dumps(figures))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

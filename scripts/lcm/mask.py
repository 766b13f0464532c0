"""Secret masking: what leaves the vault never carries an API key, a password or a private key.

`mask(text)` replaces each secret it recognises by `[secret:KIND:FP]`, where FP is the first
4 hex digits of the secret's SHA-256, so two mentions of one secret still match (and a search
for the fingerprint finds both). It is applied to the searchable text at ingest and, as a safety
net for vaults filled before masking existed, wherever text is printed, injected by a hook,
written to a file or sent to a model. The vault keeps each transcript line's original bytes in
`messages.raw`; `lcm_expand.py --raw --unmasked` is the one way to read them back unmasked.

Recognised: API keys and tokens of Anthropic, OpenAI, AWS (access key ids, and secret keys in
assignments), GitHub, GitLab, Slack (tokens and webhook URLs), Stripe, Google; JWTs; Bearer
tokens; PEM private key blocks; literal values assigned to password/secret/token/api_key-like
names (`PASSWORD=...`, `"password": "..."`, `--password ...`, `user:password@` in URLs);
`<private>...</private>` spans; and every regular expression of $LCM_HOME/redact.txt (one per
line, `#` starts a comment; an invalid one is reported on stderr and ignored).

Masking is idempotent (masked text masks to itself) and costs one pass of one regular
expression over text that holds nothing to mask (about as much as json.loads of the line it
came from); the patterns compile on first use. The module imports only `os` and `sys`: hooks
import it on every turn.
"""
from __future__ import annotations

import os
import sys

# The pattern of each kind; _scan decides which of them run on a text. A pattern's group
# `s` is the secret (else the whole match). Specific kinds come first, so the assignment rules
# below find their values already masked.
_PEM_BEGIN = r"-----BEGIN[A-Z0-9 ]*PRIVATE KEY(?: BLOCK)?-----"
_PEM_END = r"-----END[A-Z0-9 ]*PRIVATE KEY(?: BLOCK)?-----"
_PEM_BODY = r"(?:\\[nr]|[A-Za-z0-9+/=\s])*"  # base64 lines, newlines raw or JSON-escaped
_PATTERNS = {
    "private-key": _PEM_BEGIN,  # to its END line, else over the base64 lines that follow: _pem_blocks
    "private": r"<private>",  # to the next </private>: _private_spans
    "anthropic-key": r"(?<![\w-])sk-ant-[A-Za-z0-9_-]{20,}",
    # sk-, sk-proj-, sk-svcacct-, sk-admin-: at least 20 more characters, one of them a digit
    "openai-key": r"(?<![\w-])sk-(?!ant-)(?=[A-Za-z0-9_-]{0,200}\d)[A-Za-z0-9_-]{20,}",
    "aws-key": r"(?<![A-Za-z0-9])(?:AKIA|ASIA)[A-Z0-9]{16}(?![A-Za-z0-9])",
    "aws-secret": (r"(?i)(?:aws[_-]?)?secret[_-]?(?:access[_-]?)?key\\?[\"']?\s*[:=]\s*\\?[\"']?"
                   r"(?P<s>[A-Za-z0-9/+]{40})(?![A-Za-z0-9/+=])"),
    "github-token": r"(?<![A-Za-z0-9_])(?:gh[pousr]_[A-Za-z0-9]{30,}|github_pat_[A-Za-z0-9_]{30,})",
    "gitlab-token": r"(?<![\w-])glpat-[A-Za-z0-9_-]{20,}",
    "slack-token": r"(?<![\w-])xox[abposr]-[A-Za-z0-9-]{10,}",
    "slack-webhook": r"hooks\.slack\.com/services/(?P<s>[A-Za-z0-9_/-]{8,})",
    "stripe-key": r"(?<![A-Za-z0-9_])[sr]k_(?:live|test)_[A-Za-z0-9]{10,}",
    "google-key": r"(?<![\w-])AIza[0-9A-Za-z_-]{35}",
    "jwt": r"(?<![\w-])eyJ[A-Za-z0-9_-]{5,}\.eyJ[A-Za-z0-9_-]{5,}\.[A-Za-z0-9_-]*",
    "token": r"(?i)bearer\s+(?P<s>[A-Za-z0-9._~+/-]{16,}=*)",
    "password": r"://[^\s:/@\"'\\<>]*:(?P<s>[^\s/@\"'\\<>]+)@",  # scheme://user:password@host
}
# Assignments (NAME = value, NAME: value, "NAME": "value", NAME := value, name: Type = value,
# --NAME value) are found where _scan sees a keyword (pass, secret, token, credential, key):
# _name_end tells a secret's name (password, db_password, clientSecret, api_key, X-Api-Key, ...)
# from other words, and _VALUE, matched where the name ends, reads the separator and the value.
_TYPE = r"[A-Za-z_][\w.]*(?:\[[^\]\n]{0,40}\]+)?"  # str, Optional[str], t.Dict[str, int]
# (?a): \s and \w are ASCII only, so a value never ends inside a UTF-8 sequence (see _lowered)
_VALUE = (r"(?a)(?![\w-])(?:(?P<sep>\\?[\"']?[ \t]*(?::[ \t]*" + _TYPE + r"(?:[ \t]*\|[ \t]*" + _TYPE + r")*[ \t]*(?==))?"
          r"(?:=>|==|:=|=|:)[ \t]*)"
          # a mask already there is a value too: the match must not fall back to another reading
          r"(?:(?P<mk>\[secret:[a-z0-9-]+:[0-9a-f]{4}\])"
          r"|\\?(?P<q>[\"'`])(?P<qs>(?:(?!(?P=q))[^\\\n])+)\\?(?P=q)|(?P<us>[^\s\"'`,;&(){}\[\]<>\\]+))"
          r"|[ \t]+(?P<fs>[^\s\"'`\\-][^\s\"'`\\]*))")  # the value of --NAME value
# One regular expression over the lowercased text that matches wherever a rule could apply: a
# vendor token's prefix, a PEM header, a tag, or a secret's name followed by `=` or `:` (or, after
# --, by a value). Text it does not match, nearly all text, costs one pass and is returned as is.
# Each branch starts with a rarely used letter of its literal (lookbehinds check what precedes
# it), so the engine tries few positions; a named group says what matched (_GROUPS).
_SEP = r"""(?=\\?["']?[ \t]*[:=])"""
_FLAG_NAME = (r"(?:(?P<fpass>passw(?:or)?d|passphrase)|(?P<fsecret>secret(?:[_-]?key)?)|(?P<ftoken>token)"
              r"|(?P<fkey>(?:api|access|private)[_-]?key)|(?P<fcred>credentials?))")
_KEY_BEHIND = "|".join(f"(?<={p}key)" for p in ("api", "api_", "api-", "access", "access_", "access-",
                                                    "private", "private_", "private-"))
# (each branch fails on its second letter at most positions: the lookbehinds come after it)
_PREFILTER = (r"k(?:e(?:n(?<=token)(?P<tok>)" + _SEP + r"|y(?:" + _KEY_BEHIND + r")(?P<key>)" + _SEP + r")"
              r"|-(?<=sk-)(?P<sk>)|_(?P<stripe>live_|test_)|ia(?<=akia)(?P<akia>)|s(?<=hooks)(?P<slack>\.slack))"
              r"|cre(?:t(?<=secret)(?P<sec>)(?:(?:[_-]?key)?" + _SEP + r"|(?=[_-]?access[_-]?key))"
              r"|d(?P<cred>entials?)" + _SEP + r")"
              r"|p(?:ass(?P<pw>w(?:or)?d|phrase)" + _SEP + r"|rivate(?P<pem> key))"
              r"|-(?<=--)[a-z0-9_-]{0,40}?" + _FLAG_NAME + r"(?=[ \t]+[^\s-])"
              # every branch starts with a literal, outside any group: else the engine has no first
              # letters to skip to, and tries every position (50x slower)
              r"|g(?:(?P<gh>h[pousr]_|ithub_pat_)|(?P<glpat>lpat-))|x(?<=xox)(?P<xox>)|j(?<=eyj)(?P<jwt>)"
              r"|z(?<=aiz)a(?P<aiza>)|<(?P<private>private>)|@(?P<at>)|b(?P<bearer>earer)")
_MASK = r"\[secret:[a-z0-9-]+:[0-9a-f]{4}\]"
# an unquoted value made of these alone reads as a name or an attribute (`token = self.tok`)
_NAME_CHARS = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ_.")
_DIGITS = frozenset("0123456789")

_compiled: dict[str, object] = {}
_user: list | None = None  # compiled patterns of redact.txt, loaded on first use


def _sha256_hex(text: str) -> str:
    try:
        from _sha2 import sha256  # CPython 3.12+: hashlib would load OpenSSL (~3 ms)
    except ImportError:
        try:
            from _sha256 import sha256
        except ImportError:
            from hashlib import sha256
    return sha256(text.encode("utf-8", "surrogatepass")).hexdigest()


def token(kind: str, secret: str) -> str:
    """The mask of one secret: [secret:KIND:FP]."""
    return f"[secret:{kind}:{_sha256_hex(secret)[:4]}]"


def _regex(source: str):
    pattern = _compiled.get(source)
    if pattern is None:
        import re
        pattern = _compiled[source] = re.compile(source)
    return pattern


def _replacer(kind: str):
    def replace(m) -> str:
        if "s" not in m.re.groupindex or m.group("s") is None:
            return token(kind, m.group(0))
        secret = m.group("s")
        start, end = m.start("s") - m.start(), m.end("s") - m.start()
        whole = m.group(0)
        return whole[:start] + token(kind, secret) + whole[end:]
    return replace


def _kind_of(key: str) -> str:
    low = key.lower()
    if "pass" in low:
        return "password"
    if "token" in low:
        return "token"
    if "secret" in low or "credential" in low or "private" in low:
        return "secret"
    return "api-key"


def _literal(value: str, key: str, sep: str, quoted: bool, flag: bool) -> bool:
    """Whether an assigned value is a literal secret rather than an expression or a placeholder.

    sep is what joined name and value (`=`, `: `, `": "`, ...); flag is True for `--NAME value`.
    """
    if value.startswith(("$", "%", "{{", "[secret:", "<", "*", "&")) or value.strip(".xX*-_ ") == "":
        return False  # a variable, a template, our own mask, a placeholder or a pointer
    password = "pass" in key.lower()
    if quoted:
        return password or (len(value) >= 8 and not any(c.isspace() for c in value))
    if value.lower() in ("true", "false", "null", "none", "nil", "undefined"):
        return False
    if not set(value) <= _NAME_CHARS | _DIGITS:
        return True  # punctuation: hunter2!, a/b+c=, some-long-value
    if value.isdigit():
        return password and len(value) >= 4  # a PIN; else more likely a length or a count
    if set(value) & _DIGITS:
        return True  # hunter2, ab12cd34
    # a plain word: a name in code (password=password, token: str), a literal in a shell or
    # .env line (DB_PASSWORD=hunter) and after a command-line flag
    return flag or (sep == "=" and key.upper() == key and any(c.isalpha() for c in key))


_SEPARATORS = frozenset(("=", ":", '"', "'", "\\"))  # what may follow a name before its value
_KEY_CHARS = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_.-")
_KEY_PREFIXES = tuple(p + s for p in ("api", "access", "private") for s in ("", "_", "-"))


def _name_end(low: str, i: int, keyword: str) -> int:
    """Where the secret's name holding `keyword` at i ends, or -1 if it is not one."""
    if keyword == "pass":
        for name in ("password", "passwd", "passphrase"):
            if low.startswith(name, i):
                return i + len(name)
        return -1
    if keyword == "secret":
        for name in ("secret_key", "secret-key", "secretkey"):
            if low.startswith(name, i):
                return i + len(name)
        return i + 6
    if keyword == "token":
        return i + 5
    if keyword == "credential":
        return i + 11 if low.startswith("s", i + 10) else i + 10
    # key: api_key, apikey, access-key, private_key, ... (secret_key is found as "secret")
    return i + 3 if low.endswith(_KEY_PREFIXES, 0, i) else -1


def _assignments(text: str, low: str, found: list, utf8: bool) -> str:
    """text with the literal values assigned to secret names masked; found = [(position,
    keyword)] from _scan. text and low are one character per byte (_lowered); utf8 says they
    are UTF-8 bytes read as Latin-1, so a value is decoded before it is judged and fingerprinted."""
    shielded = [m.span() for m in _regex(_MASK).finditer(text)] if "[secret:" in text else []
    mask_ends = {start: end for start, end in shielded}
    starts = sorted(mask_ends)
    value_re = _regex(_VALUE)
    pieces, done = [], 0
    for i, keyword in sorted(found):
        if starts:
            from bisect import bisect_right
            k = bisect_right(starts, i) - 1
            if k >= 0 and i < mask_ends[starts[k]]:
                continue  # inside a mask
        if i < done:
            continue  # inside a value masked just now
        end = _name_end(low, i, keyword)
        if end < 0:
            continue
        after = end
        while text[after:after + 1] in (" ", "\t"):
            after += 1
        if text[after:after + 1] not in _SEPARATORS and (after == end or "--" not in text[max(0, i - 40):i]):
            continue  # prose ("the token is"): no separator, and no --flag (the common case, cheaply)
        m = value_re.match(text, end)
        if m is None or m.group("mk"):
            continue
        flag = m.group("fs") is not None
        if flag and "--" not in text[max(0, i - 40):i]:
            continue  # NAME value: prose, unless a command-line flag
        start = i
        while start > 0 and text[start - 1] in _KEY_CHARS:  # DB_PASSWORD, self.token, --password
            start -= 1
        key = text[start:end]
        if flag:
            if not key.startswith("--"):
                continue
            group, quoted, sep = "fs", False, " "
        else:
            quoted = m.group("q") is not None
            group, sep = ("qs" if quoted else "us"), m.group("sep")
        value = m.group(group)
        if not quoted and text[m.end():m.end() + 1] in ("(", "["):
            continue  # a call or a subscript: getpass(), os.environ["X"]
        if utf8:
            value = value.encode("latin-1").decode("utf-8", "surrogatepass")
        if not _literal(value, key, sep, quoted, key.startswith("--")):
            continue
        pieces += [text[done:m.start(group)], token(_kind_of(key), value)]
        done = m.end(group)
    return "".join(pieces) + text[done:] if pieces else text


def _load_user_patterns() -> list:
    """The patterns of $LCM_HOME/redact.txt (compiled once per process)."""
    global _user
    if _user is not None:
        return _user
    _user = []
    for number, pattern, error in _read_redact_file():
        if error is None:
            _user.append(pattern)
        else:
            sys.stderr.write(f"lcm: ignoring redact.txt line {number}: {error}\n")
    return _user


def reload_user_patterns() -> None:
    """Read redact.txt afresh on the next mask (a pattern was just added)."""
    global _user
    _user = None


def redact_path() -> str:
    import lcm.config
    return os.path.join(lcm.config.home_str(), "redact.txt")


def _read_redact_file() -> list[tuple[int, object, str | None]]:
    """(line number, compiled pattern or None, error or None) for each pattern line of redact.txt."""
    try:
        with open(redact_path(), encoding="utf-8", errors="replace") as f:
            lines = f.read().splitlines()
    except OSError:
        return []
    import re
    out = []
    for number, line in enumerate(lines, 1):
        source = line.strip()
        if not source or source.startswith("#"):
            continue
        try:
            pattern = re.compile(source)
        except (re.error, RecursionError, OverflowError) as exc:
            out.append((number, None, f"invalid regular expression {source!r}: {exc}"))
            continue
        if pattern.fullmatch(""):
            out.append((number, None, f"{source!r} matches the empty string"))
            continue
        out.append((number, pattern, None))
    return out


def redact_problems() -> list[str]:
    """What is wrong in redact.txt, one message per bad line (for lcm_doctor.py)."""
    return [f"{redact_path()} line {n}: {error}" for n, _p, error in _read_redact_file() if error]


def _user_replace(m) -> str:
    return token("redact", m.group(0)) if m.group(0) else ""


def _outside_masks(fn, text: str) -> str:
    """fn(part) for each part of text outside the masks already in it: a mask is never masked
    again, so masking masked text changes nothing."""
    if "[secret:" not in text:
        return fn(text)
    parts = _regex("(" + _MASK + ")").split(text)  # odd items are the masks
    return "".join(part if i % 2 else fn(part) for i, part in enumerate(parts))


def _sub(pattern, replace, text: str) -> str:
    return _outside_masks(lambda part: pattern.sub(replace, part), text)


def _spans_masked(text: str, kind: str, spans: list) -> str:
    out, done = [], 0
    for start, end in spans:
        out += [text[done:start], token(kind, text[start:end])]
        done = end
    return "".join(out) + text[done:] if out else text


def _private_spans(text: str) -> str:
    """<private>...</private> masked whole (str.find: linear however many tags lack a close)."""
    spans, i = [], text.find("<private>")
    while i >= 0:
        j = text.find("</private>", i + 9)
        if j < 0:
            break
        spans.append((i, j + 10))
        i = text.find("<private>", j + 10)
    return _spans_masked(text, "private", spans)


def _pem_blocks(text: str) -> str:
    """PEM private key blocks masked whole: from BEGIN to the next END line; without one (output
    cut short), over the base64 lines that follow. Linear: every END is found once."""
    ends = [m.end() for m in _regex(_PEM_END).finditer(text)]
    body = _regex(_PEM_BODY)
    spans, done = [], 0
    for m in _regex(_PEM_BEGIN).finditer(text):
        if m.start() < done:
            continue  # inside the block before
        end = next((e for e in ends if e > m.end()), None)  # few ENDs in any real text
        done = end if end is not None else body.match(text, m.end()).end()
        spans.append((m.start(), done))
    return _spans_masked(text, "private-key", spans)


_BLOCKS = {"private-key": _pem_blocks, "private": _private_spans}


# What each named group of _PREFILTER means: the kinds whose pattern must run, and the keyword
# of an assignment name with where that keyword starts: the group's start plus an offset (from
# the group's place in its branch: `token` matches as k, e, n, then the empty group tok), or
# for "end" its end minus 3.
_GROUPS = {
    "tok": ((), "token", -5), "key": ((), "key", -3), "sec": (("aws-secret",), "secret", -6),
    "cred": ((), "credential", -4), "pw": ((), "pass", -4),
    "fpass": ((), "pass", 0), "fsecret": ((), "secret", 0), "ftoken": ((), "token", 0),
    "fkey": ((), "key", "end"), "fcred": ((), "credential", 0),
    "pem": (("private-key",), None, 0), "sk": (("anthropic-key", "openai-key"), None, 0),
    "stripe": (("stripe-key",), None, 0), "akia": (("aws-key",), None, 0),
    "slack": (("slack-webhook",), None, 0), "gh": (("github-token",), None, 0),
    "glpat": (("gitlab-token",), None, 0), "xox": (("slack-token",), None, 0), "jwt": (("jwt",), None, 0),
    "aiza": (("google-key",), None, 0), "private": (("private",), None, 0), "at": (("password",), None, 0),
    "bearer": (("token",), None, 0),
}


def _scan(text: str, low: str) -> tuple[set, list]:
    """(kinds to run, [(position in low, keyword)] of secret names that may take a value)."""
    kinds, found = set(), []
    if "A" in text and "ASIA" in text:  # "asia" is common in lowercase text: not in _PREFILTER
        kinds.add("aws-key")
    pattern = _regex(_PREFILTER)
    first = pattern.search(low)  # usually None: one pass, and done
    for m in pattern.finditer(low, first.start()) if first else ():
        group = m.lastgroup
        more, keyword, offset = _GROUPS[group]
        kinds.update(more)
        if keyword is not None:
            found.append((m.end(group) - 3 if offset == "end" else m.start(group) + offset, keyword))
    return kinds, found


def _lowered(text: str) -> tuple[str, bytes | None]:
    """(text lowercased with one character per byte, its UTF-8 bytes or None for ASCII text).

    str.lower() is fast on ASCII only (else it consults Unicode tables for every character), and
    a regular expression runs faster over one-byte strings: other text is read through its UTF-8
    bytes (as Latin-1), which keep every ASCII character, all that _PREFILTER looks for, as is.
    """
    if text.isascii():
        return text.lower(), None
    data = text.encode("utf-8", "surrogatepass")
    return data.lower().decode("latin-1"), data


def mask(text):
    """text with every recognised secret replaced by [secret:KIND:FP]; anything else unchanged.

    Returns the same object when nothing was masked. Non-strings are returned as they are.
    """
    if not isinstance(text, str) or not text:
        return text
    low, utf8 = _lowered(text)
    patterns = _user if _user is not None else _load_user_patterns()
    kinds, found = _scan(text, low)
    out = text
    for kind in _PATTERNS:
        if kind in _BLOCKS and kind in kinds:
            out = _outside_masks(_BLOCKS[kind], out)
        elif kind in kinds:
            out = _sub(_regex(_PATTERNS[kind]), _replacer(kind), out)
    if found:
        if out is not text:  # positions moved: find the names again
            low, utf8 = _lowered(out)
            found = _scan(out, low)[1]
        data = out if utf8 is None else utf8.decode("latin-1")
        masked = _assignments(data, low, found, utf8 is not None)
        if masked is not data:
            out = masked if utf8 is None else masked.encode("latin-1").decode("utf-8", "surrogatepass")
    for pattern in patterns:
        out = _sub(pattern, _user_replace, out)
    return text if out == text else out


def has_user_patterns() -> bool:
    """Whether redact.txt adds patterns (text masked when stored may predate them)."""
    return bool(_user if _user is not None else _load_user_patterns())


def may_contain(data) -> bool:
    """Whether mask() could change this text or bytes (a quick test, for callers that would
    otherwise walk a parsed structure)."""
    if isinstance(data, (bytes, bytearray, memoryview)):
        data = bytes(data).decode("latin-1")  # one char per byte: the ASCII tests see the same
    if not isinstance(data, str):
        return False
    kinds, found = _scan(data, _lowered(data)[0])
    return bool(kinds or found) or bool(
        _user if _user is not None else _load_user_patterns())


def mask_tree(value):
    """A copy of a JSON-like value (dicts, lists, strings) with every string masked."""
    if isinstance(value, str):
        return mask(value)
    if isinstance(value, dict):
        return {k: mask_tree(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [mask_tree(v) for v in value]
    return value


def mask_bytes(raw) -> bytes:
    """An original transcript line (bytes) with its secrets masked; the same bytes if none."""
    raw = bytes(raw)
    text = raw.decode("utf-8", "surrogateescape")
    masked = mask(text)
    return raw if masked is text else masked.encode("utf-8", "surrogateescape")

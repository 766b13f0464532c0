"""Secret masking: what leaves the vault never carries an API key, a password or a private key.

Two entry points; every exit (printed, injected by a hook, written to a file, sent to a model,
and the searchable text made at ingest) goes through one of them:
- `mask(text)` for plain text;
- `mask_json(value)` for a decoded JSON value, `mask_line(raw)` for a JSON line: every string,
  value or key, is masked after unescaping, and a string under a secret's name (`"password":
  "..."`) whole. Escaped JSON is the wrong place to look: a newline there is the two characters
  `\\n`, so a key on a line of its own reads as the end of a word. (`mask` still takes a JSON
  escape as the edge of a token, for text that quotes JSON: older vaults, model output.)
A secret becomes `[secret:KIND:FP]`, FP the first 4 hex digits of its SHA-256, so two mentions
still match (and a search for the fingerprint finds both). The vault keeps each line's original
bytes in `messages.raw`: `lcm_expand.py --raw --unmasked` is the one way back to them.

Recognised: the kinds of KINDS below (vendors' keys by their prefix, wherever they stand: after a
letter of any script too), passwords in the forms commands and config files give them (URLs,
`mysql -p`, curl's `-u` and credential headers, `sshpass`, `.netrc`, `.pgpass`, `.npmrc`, YAML
blocks, a Kubernetes Secret's data, ...), literal values assigned to secret-like names
(`PASSWORD=`, `"api_key": "..."` at any depth of JSON quoting, `--password x`),
`<private>...</private>` in any case (unclosed: to the end of the string), and each regular
expression of $LCM_HOME/redact.txt (one a line, `#` comments; a bad one is reported on stderr and
ignored). Not recognised: a secret encoded (base64, hex) or cut across lines or strings, or under
a vendor's name alone (`adafruit=...`; bench/masking.py measures it). Masking is idempotent, and
text with nothing to mask costs one pass of one regular expression (and one of a few literals in
capitals). The module imports only `os` and `sys`: hooks import it on every turn.
"""
from __future__ import annotations

import os
import sys

import lcm.base.config

_compiled: dict[str, object] = {}
_user: list | None = None  # compiled patterns of redact.txt, loaded on first use
_stored: dict | None = None  # what earlier processes compiled (_store), read on first use


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
        pattern = _compiled[source] = _from_store(source) or _compile(source)
    return pattern


# Compiled patterns kept between processes, the way Python keeps bytecode: a hook masks each turn's
# text in a new process, where building the prefilter's source (~2 ms) and compiling it (~6 ms:
# re's parser is Python) cost a Stop hook 15% of its time (bench/hooks.py, 1M vault); read back
# from the store they cost ~0.1 ms. The store, __pycache__/mask.<python tag>.regex beside this file,
# holds the prefilter's source and each pattern as re's compiler left it for _sre.compile; it is
# used only by the Python that wrote it and while this file is unchanged (its stamp), and a pattern
# goes in only once rebuilt from it equals re.compile's own. Anything amiss: compiled as before.

def _store_path() -> str | None:
    tag = sys.implementation.cache_tag
    if tag is None or sys.implementation.name != "cpython":  # the code format is CPython's
        return None
    return os.path.join(os.path.dirname(os.path.abspath(__file__)), "__pycache__", f"mask.{tag}.regex")


def _stamp() -> list:
    import _sre
    st = os.stat(__file__)
    return [sys.version, _sre.MAGIC, st.st_mtime_ns, st.st_size]


def _store() -> dict:
    """{"stamp": _stamp(), "prefilter": its source or None, "patterns": {source: _sre.compile's
    arguments after the source}}, from the file when it belongs to this Python and this file."""
    global _stored
    if _stored is None:
        _stored = {"stamp": None, "prefilter": None, "patterns": {}}
        path = _store_path()
        try:
            import marshal
            with open(path, "rb") as f:
                data = marshal.loads(f.read())
            if type(data) is dict and data.get("stamp") == _stamp() and type(data.get("patterns")) is dict:
                _stored = data
        except (OSError, TypeError, ValueError, EOFError):
            pass  # none yet, or unreadable: written anew on the next compile
    return _stored


def _from_store(source: str):
    entry = _store()["patterns"].get(source)
    if entry is None:
        return None
    try:
        import _sre
        return _sre.compile(source, *entry)
    except Exception:  # noqa: BLE001 - a damaged entry (_sre validates the code): compiled anew
        return None


def _compile(source: str):
    import re
    pattern = re.compile(source)
    if _store_path() is not None and not sys.dont_write_bytecode:
        try:
            entry = _compiled_entry(source)
            import _sre
            if _sre.compile(source, *entry) == pattern:  # same flags, groups and code as re's own
                _store()["patterns"][source] = entry
                _save_store()
        except Exception:  # noqa: BLE001 - another Python's compiler internals: no store, same pattern
            pass
    return pattern


def _compiled_entry(source: str) -> tuple:
    """What re.compile passes _sre.compile after the source (re/_compiler.py's compile())."""
    try:
        from re import _compiler, _parser
    except ImportError:  # Python 3.9, 3.10
        import sre_compile as _compiler
        import sre_parse as _parser
    parsed = _parser.parse(source, 0)
    code = [int(op) for op in _compiler._code(parsed, 0)]  # its opcodes are int subclasses
    names = [None] * parsed.state.groups
    for name, index in parsed.state.groupdict.items():
        names[index] = name
    return parsed.state.flags, code, parsed.state.groups - 1, dict(parsed.state.groupdict), tuple(names)


def _save_store() -> None:
    """Write the store whole under a temporary name, then rename it: a reader sees the old file or
    the new one. A directory that cannot be written is left alone, as Python leaves its bytecode."""
    import _thread
    import marshal
    store = _store()
    store["stamp"] = _stamp()
    path = _store_path()
    tmp = f"{path}.{os.getpid()}-{_thread.get_ident()}"  # threads of one process (lcm.maps) write their own
    try:
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(tmp, "wb") as f:
            f.write(marshal.dumps(store))
        os.replace(tmp, path)
    except OSError:
        try:
            os.remove(tmp)
        except OSError:
            pass


def _spans_masked(text: str, spans: list) -> str:
    """text with each of [(start, stop, kind, secret)], in order, replaced by its mask (a span
    that starts inside the one before is already masked with it)."""
    out, done = [], 0
    for start, stop, kind, secret in spans:
        if start >= done:
            out += [text[done:start], token(kind, secret)]
            done = stop
    return "".join(out) + text[done:] if out else text


def _private_spans(text: str) -> str:
    """<private>...</private> (any case) masked whole; an unclosed tag to the end of the text.
    One pass over the tags: linear however many lack a close."""
    spans, start = [], None
    for m in _regex(r"(?i)<(/?)private(?:\s[^<>]*)?>").finditer(text):  # <private reason=...>, </private >
        if start is None and not m.group(1):
            start = m.start()
        elif start is not None and m.group(1):
            spans.append((start, m.end()))
            start = None
    if start is not None:
        spans.append((start, len(text)))
    return _spans_masked(text, [(start, stop, "private", text[start:stop]) for start, stop in spans])


_PEM_BEGIN = r"-----BEGIN[A-Z0-9 ]*PRIVATE KEY(?: BLOCK)?-----"
_PEM_END = r"-----END[A-Z0-9 ]*PRIVATE KEY(?: BLOCK)?-----"
# base64 runs, newlines raw or JSON-escaped; a run must end where base64 does: one going on
# with `.`, `-` or `_` is the next token (a JWT pasted after a key cut short), not the key
_PEM_BODY = (r"(?:(?:\\[nr]|\s)*(?:Proc-Type|DEK-Info|Comment|Version):[^\n\\]*)*"  # an encrypted key's headers
             r"(?:(?:\\[nr]|\s)*[A-Za-z0-9+/=]+(?:(?![A-Za-z0-9+/=._-])|(?=-----)))*")  # or ends at a marker


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
    return _spans_masked(text, [(start, stop, "private-key", text[start:stop]) for start, stop in spans])


def _basic_credentials(value: str) -> bool:
    """Whether a `Basic ...` value is base64 of user:password (so `Basic authentication` is not);
    what follows whole quads (`=/` of a path) is let be."""
    import binascii
    try:
        plain = binascii.a2b_base64(value[:len(value) // 4 * 4]).decode("utf-8")
    except (ValueError, UnicodeDecodeError):
        return False
    return ":" in plain and plain.isprintable()


_VARIABLE = ("$", "%", "{{", "<")  # `-p$DB_PASS`: the value is elsewhere


# A token may start where an ASCII word does not go on (`(?<![A-Za-z0-9_-])`, or a stricter
# class), or right after a JSON escape: in text that quotes JSON, `\n` or `\u2028` before a key is
# not a letter. Any other letter is an edge: Japanese and Chinese put no space before a key
# (`APIキーはsk-ant-...です`), and no key of any kind starts inside a word of their scripts.
def _edge(lookbehind: str = r"(?<![A-Za-z0-9_-])") -> str:
    return rf"(?:{lookbehind}|(?<=\\[nrtbf])|(?<=\\u[0-9a-fA-F]{{4}}))"


def _escaped(literal: str) -> str:
    """re.escape without importing re (the hooks import this module, not re, on every turn)."""
    return "".join("\\" + c if c in ".^$*+?{}[]\\|()" else c for c in literal)


def _edge_after(literal: str, chars: str = "A-Za-z0-9_-") -> str:
    """`literal` where a token may start (as _edge), the test made after it: a pattern that opens
    with a literal is searched for at memory speed, one that opens with a lookbehind is tried at
    every position (30x slower on a long tool result)."""
    lit = _escaped(literal)
    return rf"{lit}(?:(?<![{chars}]{lit})|(?<=\\[nrtbf]{lit})|(?<=\\u[0-9a-fA-F]{{4}}{lit}))"


def _edged(body: str, chars: str) -> str:
    """body with _edge's test: after its opening literal if it has one (_edge_after), else before it."""
    lead = 0
    while lead < len(body) and (body[lead].isalnum() and body[lead].isascii() or body[lead] in "_~-"):
        lead += 1
    if lead < 2:
        return _edge(f"(?<![{chars}])") + body
    return _edge_after(body[:lead], chars) + body[lead:]


_SPACE = r"(?:[ \t]|\\\r?\n)+"  # between shell words, a continued line included
_WORDS = rf"(?:{_SPACE}[^\s;|&]+){{0,40}}?{_SPACE}"  # the other arguments of a command, up to the one sought

def _htpasswd(text: str) -> str:
    """`htpasswd -b[c] FILE USER PASSWORD` and `htpasswd -nb USER PASSWORD`: the last word masked."""
    def replace(m):
        flags = m.group("flags")
        if "b" not in flags.replace("-", ""):
            return m.group(0)
        words = m.group("words").split()
        need = 2 if "n" in flags else 3
        if len(words) < need or words[need - 1].startswith(_VARIABLE + ("[secret:",)):
            return m.group(0)
        secret = words[need - 1]
        head = m.group(0)[:m.start("words") - m.start()]
        rest = m.group("words")
        at = 0
        for word in words[:need - 1]:
            at = rest.index(word, at) + len(word)
        at = rest.index(secret, at)
        return head + rest[:at] + token("password", secret) + rest[at + len(secret):]
    return _regex(r"htpasswd(?P<flags>(?:[ \t]+-[A-Za-z]+)+)(?P<words>(?:[ \t]+[^\s;|&]+){2,3})").sub(replace, text)


def _shell_word(text: str, i: int) -> tuple[str, list]:
    """The shell word that starts at text[i], quotes removed (`"ann":'pw'` is `ann:pw`), and the
    place in text of each of its characters. A JSON escape ends it (`\\n`) or quotes (`\\"`): in
    text that quotes JSON, that is what it was."""
    chars, places, end = [], [], len(text)
    while i < end:
        c = text[i]
        if c in " \t\r\n;|&<>" or (c == "\\" and text[i + 1:i + 2] in ("n", "r", "t")):
            break
        escaped = c == "\\" and text[i + 1:i + 2] in ('"', "'")
        quote = text[i + 1] if escaped else c if c in "\"'" else None
        if quote is None:
            chars.append(c)
            places.append(i)
            i += 1
            continue
        close = ("\\" + quote) if escaped else quote
        start = i + len(close)
        stop = text.find(close, start)
        stop = end if stop < 0 else stop
        for j in range(start, stop):
            if text[j] == "\n":
                break
            chars.append(text[j])
            places.append(j)
        i = stop + len(close)
    return "".join(chars), places


# a credential in an HTTP header, by the header's name: Authorization, X-Api-Key, X-Auth-Token, ApiToken, ...
_HEADER_NAME = r"(?i)(?:proxy-)?authorization|(?:x-)?(?:[a-z0-9]+-)*(?:api-?)?(?:key|token|secret|auth|password|passwd)"
_SCHEME = r"(?i)(?:basic|bearer|token|api-?token|apikey|api-key|key|sso-key|digest|negotiate)[ \t]+"


CURL_WORDS = 60  # how far a curl command's options may run on, over lines as the field writes them


def _curl_credentials(text: str) -> str:
    """In a curl command (its arguments may run on over a few lines, as the field writes them):
    `-u`/`--user USER:PASSWORD` whole, and the value of a credential header (`-H 'X-Api-Key: ...'`,
    `--header "Authorization: Basic ..."`), however the word is quoted."""
    option = _regex(r"(?:(?<=[ \t\r\n])|(?<=\\[nrt]))(?:(?P<u>-u|--user)|-H|--header)(?:=|(?:[ \t]|\\t){0,5})(?=\S)")
    spans, done = [], 0
    for command in _regex(_E + r"curl(?![\w-])").finditer(text):
        at = max(command.end(), done)
        # the command's reach counted in words, not characters: a secret masked before a `-u` (a
        # mask is one word, as the secret was) must not bring it into reach on a second pass
        reach = _regex(r"(?:\s*\S+){1,%d}" % CURL_WORDS).match(text, command.end())
        stop = reach.end() if reach else command.end()
        while True:
            m = option.search(text, at, stop)
            if m is None:
                break
            word, places = _shell_word(text, m.end())
            at = done = places[-1] + 1 if places else m.end() + 1
            found = _curl_secret(word, bool(m.group("u")))
            if found is not None:
                first, kind = found
                spans.append((places[first], places[-1] + 1, kind, word[first:]))
    return _spans_masked(text, spans)


def _curl_secret(word: str, user: bool):
    """(where the secret starts in a -u or -H word, its kind), or None: a user without a password
    (curl asks), a variable, a header that holds no credential."""
    if "[secret:" in word:
        return None  # masked already: masking twice changes nothing
    if user:  # the pair is the credential (a key is often the user: `-u sk_live_...:`)
        name, colon, password = word.partition(":")  # `KEY:` (no password) is a key for a user
        if not colon or is_variable(password or name) or (password or name).strip("*x.") == "":
            return None
        return 0, "password"
    name, colon, value = word.partition(":")
    if not colon or _regex(_HEADER_NAME).fullmatch(name.strip()) is None:
        return None
    first = len(name) + 1 + len(value) - len(value.lstrip(" \t"))
    scheme = _regex(_SCHEME).match(word, first)
    first = scheme.end() if scheme and len(word) - scheme.end() >= 4 else first
    secret = word[first:]
    if len(secret) < 4 or secret.startswith(_VARIABLE) or secret.strip("*x.") == "":
        return None
    return first, "token"


# a Kubernetes Secret's `data:` block: each key's value is the secret, base64 (gitleaks' window: 200 characters)
_K8S_ENTRY = (r"(?i)(?:\s|\\[nrt])+(?P<k>[\w.-]+):(?:(?:[ \t]|\\t)*(?:\||>[-+]?)(?:\s|\\[nrt])+)?(?:[ \t]|\\t)*\\?[\"']?"
              r"(?P<s>[a-z0-9+/]{6,}={0,3})")


def _kubernetes_secrets(text: str) -> str:
    """The entries under `data:` of a manifest that says `kind: Secret` (before or after it, a
    few lines apart): `password: aHVudGVyMg==` masked whole, one key a line."""
    kinds = [m.start() for m in _regex(r"(?i)(?:(?<![A-Za-z0-9_-])|(?<=\\[nrt]))kind:(?:[ \t]|\\t)*\\?[\"']?secret(?![A-Za-z0-9_-])").finditer(text)]
    if not kinds:
        return text
    entry, spans, done = _regex(_K8S_ENTRY), [], 0
    for data in _regex(r"(?i)(?:(?<![A-Za-z0-9_-])|(?<=\\[nrt]))data:").finditer(text):
        if data.start() < done or not any(abs(k - data.start()) <= 300 for k in kinds):
            continue
        # its first key within gitleaks' window, never past a mask: masked again, the text would
        # otherwise give the next `word:` (a URL's `https:`) for the entry it masked before
        masked = text.find("[secret:", data.end(), data.end() + 120)
        m = entry.search(text, data.end(), masked if masked >= 0 else data.end() + 120)
        while m is not None and m.group("k").lower() not in ("kind", "metadata", "apiversion", "type"):
            spans.append((m.start("k"), m.end("s"), "secret", m.group(0).strip()))  # the key too, as the field counts it
            done = m.end()
            m = entry.match(text, done)
    return _spans_masked(text, spans)


# `password: |` (or `>`, `|-`, ...): a YAML block scalar under a secret's name, its lines masked
_YAML_BLOCK = (r"(?im)(?:^|(?<=\\n)|(?<=\"))(?P<indent>[ \t]*)[\w.-]*(?:pass(?:word|wd|phrase)?|secret|token"
               r"|api[_-]?key|private[_-]?key|credentials?)[\"']?[ \t]*:[ \t]*[|>][+-]?[0-9]?[ \t]*(?P<nl>\r?\n|(?:\\r)?\\n)"
               # the lines indented deeper than the name, their newlines raw or JSON-escaped like the first
               r"(?P=indent)[ \t]+(?P<s>\S(?:(?!\\[nr])[^\n])*(?:(?P=nl)(?P=indent)[ \t]+\S(?:(?!\\[nr])[^\n])*)*)")


def _yaml_blocks(text: str) -> str:
    if not _regex(r":[ \t]*[|>][+-]?[0-9]?[ \t]*(?:\r?\n|\\n)").search(text):
        return text  # no block scalar at all: one quick pass (the full pattern opens with a lookbehind)

    def replace(m):
        body = m.group("s")
        if body.startswith("[secret:"):
            return m.group(0)
        start = m.start("s") - m.start()
        return m.group(0)[:start] + token("secret", body) + m.group(0)[start + len(body):]
    return _regex(_YAML_BLOCK).sub(replace, text)


def _cookie_values(text: str) -> str:
    """`Cookie: a=1; sessionid=X` (a request header, curl -b): every value masked, names kept."""
    def replace(m):
        pairs = _regex(r"(?P<n>[^\s=;,\"'\\]+)=(?P<v>[^;\s\"'\\]{4,})").sub(
            lambda p: p.group(0) if p.group("v").startswith("[secret:") else f"{p.group('n')}={token('cookie', p.group('v'))}",
            m.group("pairs"))
        return m.group("head") + pairs
    return _regex(r"(?i)(?P<head>(?<![A-Za-z0-9_-])(?:set-)?cookie\\?[\"']?[ \t]*:[ \t]*|(?<![A-Za-z0-9_-])(?:-b|--cookie)[ \t]+[\"']?)"
                  r"(?P<pairs>[^\s\"'\\=;]+=[^\n\"'\\]*)").sub(replace, text)


# .pgpass: host:port:database:user:password, one a line
_PGPASS = (r"(?m)(?:^|(?<=\\n)|(?<=[^\x00-\x7f])|(?<=\"))[A-Za-z0-9.*_\[\]-]+:(?:\d{1,5}|\*):[^\s:\"]+:[^\s:\"]+:"
           r"(?P<s>(?:[^\s:\\\"]|\\.)+)(?=\r?$|\\[nr]|\")")

# from the `:` of `://` (a literal first: searched for at memory speed); `\/` in JSON, `\\/` in JSON of JSON
_URL_PASSWORD = (r":(?<=[A-Za-z0-9+.-]:)(?:\\*/){2}(?P<user>[^\s:/@\"'<>\[\]\\]*):"
                 r"(?P<s>(?:(?!:(?:\\*/){2})\S){1,256})@(?=[A-Za-z0-9\[][A-Za-z0-9.\]:-]*(?:[/?#\s\"'\\,;|)>}]|$))")


def _url_passwords(text: str) -> str:
    """scheme://user:password@host with any characters in the password, `/` and `@` too (the last
    `@` before a host ends it); a host's port and path (`registry.npmjs.org:443/@types/node`,
    `localhost:8080/users@me`) is no password: there the part before `:` is a host, not a user."""
    def replace(m):
        secret, user = m.group("s"), m.group("user")
        if secret.startswith("[secret:") or is_variable(secret):
            return m.group(0)
        if ("." in user or user.lower() == "localhost") and _regex(r"\d{1,5}(?:[/?#]|\\+/)").match(secret):
            return m.group(0)
        start = m.start("s") - m.start()
        return m.group(0)[:start] + token("password", secret) + m.group(0)[start + len(secret):]
    return _regex(_URL_PASSWORD).sub(replace, text)


# a value that names one held elsewhere: $DB_PASS, ${DB_PASS}, $(cat f), %(password)s, %PASS%, {{ pass }}, <password>
_VARIABLE_FORM = (r"\$[A-Za-z_][A-Za-z0-9_]*|\$\{[^{}]+\}|\$\([^()]*\)|%\([A-Za-z_]\w*\)[sdr]|%[A-Za-z_]\w*%"
                  r"|\{\{[^{}]*\}\}|<[A-Za-z_][\w -]*>")


def is_variable(value: str) -> bool:
    """Whether a URL's password is a reference to one (`$DB_PASS`), not the password itself."""
    return _regex(_VARIABLE_FORM).fullmatch(value) is not None


_VALUE_WORD = r"(?P<q>['\"])?(?P<s>(?(q)(?:(?!(?P=q))[^\n\\])+|[^\s;|&'\"]+))(?(q)(?P=q))"  # one shell word, quoted or not

# Where to add a secret pattern: one row of KINDS, nothing else.
#   (kind, triggers, pattern, check)
#   kind      what the mask says: [secret:KIND:fp]
#   triggers  lowercase literals that every match contains; the prefilter (built from them)
#             looks for these first, and the pattern runs only on text that holds one (a literal
#             in capitals, such as "SK", is looked for as written instead: see _CASED)
#   pattern   a regular expression (group `s` = the secret when the match holds more; start it
#             with _edge() so it also starts after a JSON escape), or a function text -> text
#   check     None, or a function secret -> bool that must say yes
# Rows run in order: specific kinds first, so the assignment rules below (names such as
# `password` followed by a value) find their values already masked. Then add a sample to
# SAMPLES in tests/base/test_mask.py: the property tests put it in every place a string can sit.
# A new *name* for assigned values (like `passphrase`) is a branch of _NAMES and of _NAME_GROUPS.
# Keys that open with a vendor's prefix, each row run only on text that holds its prefix (the
# prefix alone is too short to be a word). A vendor's key under its name (`lobToken=live_...`) is
# found by the name.
_PREFIXED = [
    (("A3-",), r"A3-[A-Z0-9]{6}(?:-[A-Z0-9]{5,11}){4,5}"),  # 1Password secret key
    (("ops_eyj",), r"ops_eyJ[A-Za-z0-9+/]{100,}={0,3}"),
    (("p8e-",), r"p8e-[A-Za-z0-9]{32}"),  # Adobe
    (("AGE-SECRET-KEY-1",), r"AGE-SECRET-KEY-1[0-9A-Z]{58}"),
    (("LTAI",), r"LTAI[A-Za-z0-9]{20}"),  # Alibaba
    (("AKCp",), r"AKCp[A-Za-z0-9]{60,}"),  # Artifactory
    (("cmvmd",), r"cmVmd[A-Za-z0-9]{50,}"),
    ((".acc_", ".acc-"), r"(?:sc|ext|scauth|authress)_[a-z0-9]{5,30}\.[a-z0-9]{4,6}\.acc[_-][a-z0-9-]{10,32}\.[A-Za-z0-9+/_=-]{30,}"),
    (("4b1d",), r"4b1d[A-Za-z0-9]{38}"),  # ClickHouse
    (("CLOJARS_",), r"CLOJARS_[a-z0-9]{60}"),
    (("v1.0-",), r"v1\.0-[a-f0-9]{24}-[a-f0-9]{140,}"),  # Cloudflare origin CA
    (("dapi",), r"dapi[a-f0-9]{32}(?:-\d)?"),  # Databricks
    (("_v1_",), r"do[opr]_v1_[a-f0-9]{64}"),  # DigitalOcean
    (("dp.pt.",), r"dp\.pt\.[A-Za-z0-9]{40,}"),  # Doppler
    (("duffel_",), r"duffel_(?:test|live)_[A-Za-z0-9_=-]{40,}"),
    (("dt0c01.",), r"dt0c01\.[A-Za-z0-9]{24}\.[A-Za-z0-9]{64}"),  # Dynatrace
    (("EZAK", "EZTK"), r"EZ[AT]K[A-Za-z0-9]{54}"),  # EasyPost
    (("EAA",), r"EAA[A-Za-z0-9]{30,}"),  # Facebook, Square
    (("EAAA",), r"EAAA[A-Za-z0-9_-]{22,60}"),  # Square, with `_` and `-`
    (("sq0atp-", "sq0csp-"), r"sq0(?:atp|csp)-[A-Za-z0-9_-]{22,}"),  # Square
    (("FLWSECK_", "FLWPUBK_"), r"FLW(?:SECK|PUBK)_TEST-[A-Za-z0-9]{12,}(?:-X)?"),  # Flutterwave
    (("fo1_", "fm1a_", "fm1r_", "fm2_"), r"(?:fo1_[\w-]{40,}|fm(?:1[ar]|2)_[A-Za-z0-9+/]{80,}={0,3})"),  # Fly.io
    (("fio-u-",), r"fio-u-[A-Za-z0-9_=-]{60,}"),  # Frame.io
    (("pat.",), r"(?:pat|sat)\.[A-Za-z0-9_-]{22}\.[A-Za-z0-9]{24}\.[A-Za-z0-9]{20}"),  # Harness
    ((".atlasv1.",), r"[A-Za-z0-9]{14}\.atlasv1\.[A-Za-z0-9_=-]{60,}"),  # Terraform Cloud
    (("HRKU-",), r"HRKU-AA[0-9A-Za-z_-]{58}"),  # Heroku
    (("ico-",), r"ico-[A-Za-z0-9]{32}"),  # Infracost
    (("s-s4t2",), r"s-s4t2(?:ud|af)-[a-f0-9]{64}"),  # 42 intra
    (("lin_api_",), r"lin_api_[A-Za-z0-9]{40}"),  # Linear
    (("_mmk",), r"[A-Za-z0-9]{6}_[A-Za-z0-9]{29}_mmk"),  # MaxMind
    (("ntn_",), r"ntn_[0-9]{11}[A-Za-z0-9]{35}"),  # Notion
    (("sha256~",), r"sha256~[\w-]{43}"),  # OpenShift
    (("pplx-",), r"pplx-[A-Za-z0-9]{48}"),  # Perplexity
    (("pscale_",), r"pscale_(?:tkn|oauth|pw)_[\w=.-]{32,}"),  # PlanetScale
    (("PMAK-",), r"PMAK-[a-f0-9]{24}-[a-f0-9]{34}"),  # Postman
    (("pnu_",), r"pnu_[A-Za-z0-9]{36}"),  # Prefect
    (("pul-",), r"pul-[a-f0-9]{40}"),  # Pulumi
    (("rdme_",), r"rdme_[a-z0-9]{70}"),  # ReadMe
    (("rubygems_",), r"rubygems_[a-f0-9]{48}"),
    (("tk-us-",), r"tk-us-[\w-]{48}"),  # Scalingo
    (("xkeysib-",), r"xkeysib-[a-f0-9]{64}-[A-Za-z0-9]{16}"),  # Sendinblue
    (("sntrys_", "sntryu_"), r"(?:sntrys_eyJ[A-Za-z0-9+/=_]{50,}|sntryu_[a-f0-9]{64})"),  # Sentry
    (("sm_aat_", "sm_pat_", "sm_sat_"), r"sm_[aps]at_[A-Za-z0-9]{16}"),  # SettleMint
    (("shippo_",), r"shippo_(?:live|test)_[A-Fa-f0-9]{40}"),
    (("shpat_", "shpca_", "shppa_", "shpss_"), r"shp(?:at|ca|pa|ss)_[A-Fa-f0-9]{32}"),  # Shopify
    (("sgp_",), r"sgp_(?:[A-Fa-f0-9]{16}_|local_)?[A-Fa-f0-9]{40}"),  # Sourcegraph
    (("tfp_",), r"tfp_[A-Za-z0-9_.=-]{59}"),  # Typeform
    (("hvb.", "hvs."), r"hv[bs]\.[\w-]{90,}"),  # Vault
    (("ctp_",), r"ctp_[A-Za-z0-9]{36}"),
    (("dnkey-",), r"dnkey-[a-z0-9=_-]{26}-[a-z0-9=_-]{52}"),  # Defined Networking
    (("NRAK-", "NRII-", "NRJS-"), r"NR(?:AK|II|JS)-[A-Za-z0-9-]{19,32}"),  # New Relic
    (("SK",), r"SK[0-9a-fA-F]{32}"),  # Twilio
    (("API-",), r"API-[A-Z0-9]{26}"),  # Octopus Deploy
    (("pat14.",), r"pat[A-Za-z0-9]{14}\.[a-f0-9]{64}"),  # Airtable
]

_E = _edge()
_A = _edge(r"(?<![A-Za-z0-9])")
_END = r"(?![A-Za-z0-9])"
KINDS = [
    ("private-key", ("private key",), _pem_blocks, None),
    ("private", ("<private",), _private_spans, None),
    ("anthropic-key", ("sk-",), _E + r"sk-ant-[A-Za-z0-9_-]{20,}", None),
    # sk-, sk-proj-, sk-svcacct-, sk-admin-: at least 20 more characters, one of them a digit
    ("openai-key", ("sk-",), _E + r"sk-(?!ant-)(?=[A-Za-z0-9_-]{0,200}\d)[A-Za-z0-9_-]{20,}", None),
    ("aws-key", ("akia", "ASIA", "ABIA", "ACCA", "A3T"), _A + r"(?:AKIA|ASIA|ABIA|ACCA|A3T[A-Z0-9])[A-Z0-9]{16}" + _END, None),
    # its secret key is found by its name (_NAME_GROUPS "sec"): 40 characters of base64 alone are anything;
    # the CLI's table output puts a `|` between them
    ("aws-secret", (), (r"(?i)(?:aws[_-]?)?secret[_-]?(?:access[_-]?)?key\\?[\"']?[ \t]*(?:[:=]|\|)[ \t]*\\?[\"']?"
                        r"(?P<s>[A-Za-z0-9/+]{40})(?![A-Za-z0-9/+=])"), None),
    ("aws-key", ("absk", "bedrock-api-key-"), _A + r"(?:ABSK[A-Za-z0-9+/]{100,}={0,2}|bedrock-api-key-[A-Za-z0-9+/=]{20,})", None),
    ("token", ("sessiontoken",), r"(?i)sessiontoken[ \t]*\|[ \t]*(?P<s>[A-Za-z0-9/+=]{16,})", None),  # aws sts, table output
    ("github-token", ("ghp_", "gho_", "ghu_", "ghs_", "ghr_", "github_pat_"),
     _edge(r"(?<![A-Za-z0-9_])") + r"(?:gh[pousr]_[A-Za-z0-9]{30,}|github_pat_[A-Za-z0-9_]{30,})", None),
    ("gitlab-token", ("glpat-", "glcbt-", "gldt-", "glffct-", "glft-", "glimt-", "glagent-", "gloas-", "glptt-", "glrt-",
                      "glsoat-", "gr1348941"),
     _E + r"(?:gl(?:pat|cbt|dt|ffct|ft|imt|agent|oas|ptt|rt|soat)-[A-Za-z0-9_.-]{20,}|GR1348941[A-Za-z0-9_-]{20,})", None),
    ("gitlab-token", ("_gitlab_session=",), r"_gitlab_session=(?P<s>[0-9a-z]{20,})", None),
    ("slack-token", ("xox", "xapp-"), _E + r"(?:xox[a-z](?:.xox[a-z])?|xapp)-[A-Za-z0-9-]{10,}", None),
    ("slack-webhook", ("hooks.slack",), r"hooks\.slack\.com/(?:services|workflows|triggers)/(?P<s>[A-Za-z0-9_+/-]{8,})", None),
    ("stripe-key", ("sk_live_", "sk_test_", "sk_prod_", "rk_live_", "rk_test_", "rk_prod_", "whsec_"),
     _edge(r"(?<![A-Za-z0-9_])") + r"(?:[sr]k_(?:live|test|prod)_[A-Za-z0-9]{10,}|whsec_[A-Za-z0-9+/=]{20,})", None),
    ("google-key", ("aiza",), _E + r"AIza[0-9A-Za-z_-]{35}", None),
    ("google-token", ("ya29.",), _E + r"ya29\.[0-9A-Za-z_-]{20,}", None),
    ("huggingface-token", ("hf_", "api_org_"), _E + r"(?:hf_|api_org_)[A-Za-z0-9]{30,}", None),
    ("npm-token", ("npm_",), _E + r"npm_[A-Za-z0-9]{36}" + _END, None),
    ("pypi-token", ("pypi-",), _E + r"pypi-[A-Za-z0-9_-]{50,}", None),
    ("sendgrid-key", ("sg.",), _E + r"SG\.(?:[A-Za-z0-9_-]{16,}\.[A-Za-z0-9_-]{16,}|[A-Za-z0-9=_.-]{60,})", None),
    ("azure-key", ("accountkey",), r"(?i)accountkey[ \t]*=[ \t]*(?P<s>[A-Za-z0-9+/]{20,}={0,2})", None),
    ("azure-key", ("q~",), r"(?<![A-Za-z0-9_~.])[A-Za-z0-9_~.]{3}\dQ~[A-Za-z0-9_~.-]{31,34}", None),
    ("grafana-token", ("eyjrijoi", "glc_", "glsa_"),
     _E + r"(?:eyJrIjoi[A-Za-z0-9]{40,}={0,3}|glc_[A-Za-z0-9+/]{32,}={0,3}|glsa_[A-Za-z0-9]{32}_[A-Fa-f0-9]{8})", None),
    ("jwt", ("eyj",), _E + r"eyJ[A-Za-z0-9_-]{5,}\.eyJ[A-Za-z0-9_/\\-]{5,}\.[A-Za-z0-9_/\\-]*", None),
    # the same shape whatever the header's first character (`eyA...`, `ey0...`): the payload's `.ey` says it
    ("jwt", (".ey",), _E + r"ey[A-Za-z0-9]{17,}\.ey[A-Za-z0-9_/\\-]{17,}\.(?:[A-Za-z0-9_/\\-]{10,}={0,2})?", None),
    # Facebook: an app's id, `|` (or `%`, URL-encoded) and its secret
    ("vendor-token", ("fb|", "fb%"), r"(?<![0-9])\d{15,16}(?:\||%(?:7[Cc])?)[0-9A-Za-z_-]{27,40}(?![0-9A-Za-z_-])", None),
    ("jwt", ("zxlk",), _E + r"ZXlK[A-Za-z0-9+/]{10,}={0,2}", None),  # a JWT in base64
    ("telegram-token", ("api.telegram.org/bot",), r"api\.telegram\.org/(?:file/)?bot(?P<s>\d{5,}:[A-Za-z0-9_-]{30,})", None),
    ("discord-webhook", ("/api/webhooks/",), r"discord(?:app)?\.com/api/webhooks/\d+/(?P<s>[A-Za-z0-9_-]{30,})", None),
    ("webhook", ("webhook.office.com",), r"webhook\.office\.com/webhookb2/(?P<s>[^\s\"'\\<>]{20,})", None),
    # a prefix base64 can hold (EAA, SK) is no key after base64's `/` or `+` either (an image's `/EAAB...`)
    *[("vendor-token", triggers, _edged(body, "A-Za-z0-9_." + ("/+" if all(t.isalnum() for t in triggers) else ""))
       + _END, None) for triggers, body in _PREFIXED],
    ("token", ("bearer",), r"(?i)bearer\s+(?P<s>[A-Za-z0-9._~+/-]{16,}=*)", None),
    ("token", ("authorization",), r"(?i)authorization\\?[\"']?[ \t]*[:=][ \t]*\\?[\"']?(?:token|bearer|apikey|key|sso-key)"
                                  r"[ \t]+(?P<s>[A-Za-z0-9._~+/=:-]{8,})", None),
    ("basic-auth", ("basic",), r"(?i)basic[ \t]+(?P<s>[A-Za-z0-9+/]{4,}=*[A-Za-z0-9+/=]*)", _basic_credentials),
    ("cookie", ("cookie",), _cookie_values, None),
    ("password", ("mysql", "mariadb"), _E + r"(?:mysql|mariadb)[\w-]*" + _WORDS + r"-p" + _VALUE_WORD,
     lambda value: not value.startswith(_VARIABLE)),
    ("password", ("curl",), _curl_credentials, None),
    ("password", ("sshpass",), _E + r"sshpass(?:" + _WORDS + r")?-p[ \t]*" + _VALUE_WORD, lambda value: not value.startswith(_VARIABLE)),
    *[("password", (tool,), _edge_after(tool) + r"[ \t]+login" + _WORDS + r"-p[ \t]*" + _VALUE_WORD,
       lambda value: not value.startswith(_VARIABLE)) for tool in ("docker", "podman")],
    ("password", ("redis-cli",), _E + r"redis-cli" + _WORDS + r"-a[ \t]*" + _VALUE_WORD,
     lambda value: not value.startswith(_VARIABLE)),
    ("password", ("-passin", "-passout", "-pass "), r"(?<![A-Za-z0-9_-])-(?:pass(?:in|out)?|k|password)[ \t]+['\"]?pass:(?P<s>[^\s'\"]+)", None),  # openssl
    ("password", ("htpasswd",), _htpasswd, None),
    ("password", ("machine",), (_edge_after("machine") + r"[ \t]+\S+(?:[ \t\n]+(?:login|account|port)[ \t]+\S+)*"
                                          r"[ \t\n]+password[ \t]+(?P<s>[^\s\\]+)"), None),  # .netrc
    ("password", ("_auth",), r"_auth(?<![A-Za-z0-9]_auth)(?:[Tt]oken)?[ \t]*=[ \t]*['\"]?(?P<s>[^\s'\"\\]{8,})", None),  # .npmrc
    ("password", (":port:",), _PGPASS, None),
    # Sidekiq Enterprise: the user is the licence too
    ("password", ("contribsys.com",), r"(?i)https?://(?P<s>[a-f0-9]{8}:[a-f0-9]{8})@(?:gems|enterprise)\.contribsys\.com", None),
    ("password", ("@",), _url_passwords, None),
    ("secret", ("kind:",), _kubernetes_secrets, None),  # scheme://user:password@host, `/` and `@` in it too
    ("password", ("<add key=",), r"(?i)<add key=\\?\"(?:cleartext)?password\\?\"[ \t]*value=\\?\"(?P<s>[^\"\\]+)\\?\"", None),
    ("secret", (), _yaml_blocks, None),  # run when a name is seen (_NAME_GROUPS)
]

# The prefilter: one regular expression over the lowercased text that matches wherever a rule
# could apply. Text it does not match, nearly all text, costs one pass and is returned as is.
# Each branch starts with the rarest letter of its literal (a lookbehind checks what precedes
# it), so the engine skips to few positions; a named group says what matched. The vendor
# branches are built from KINDS' triggers; the names of assigned secrets are written out here:
# a name (pass, secret, token, credential, key) followed by `=` or `:` (or, after --, a value).
# `\"`, `\\\"`: a name quoted in JSON, in JSON inside JSON (a tool input quoting a config), ...
_SEP = r"""(?=\\*["']?[ \t]*[:=])"""
_FLAG_NAME = (r"(?:(?P<fpass>passw(?:or)?d|passphrase)|(?P<fsecret>secret(?:[_-]?key)?)|(?P<ftoken>token)"
              r"|(?P<fkey>(?:api|access|private)[_-]?key)|(?P<fcred>credentials?))")
_KEY_BEHIND = "|".join(f"(?<={p}key)" for p in ("api", "api_", "api-", "access", "access_", "access-",
                                                    "private", "private_", "private-"))
# by first letter (each fails on its second letter at most positions: the lookbehinds come after it)
_NAMES = {
    "k": r"e(?:n(?<=token)(?P<tok>)" + _SEP + r"|y(?:" + _KEY_BEHIND + r")(?P<key>)" + _SEP + r")",
    "c": (r"re(?:t(?<=secret)(?P<sec>)(?:(?:[_-]?key)?" + _SEP + r"|(?=[_-]?access[_-]?key))"
          r"|d(?P<cred>entials?)" + _SEP + r")"),
    "p": r"ass(?P<pw>w(?:or)?d|phrase|)" + _SEP,  # `pass` alone too: DB_PASS=, SMTP_PASS=, pass: '...'
    # a lookahead: the flag's text is not consumed, so a trigger inside it (`--rk_test_..password`) is still seen
    "-": r"(?<=--)(?=[a-z0-9_-]{0,40}?" + _FLAG_NAME + r"[ \t]+[^\s-])",
}
# each name group: the keyword it holds, where that keyword starts (the group's start plus an
# offset, from the group's place in its branch: `token` matches as k, e, n, then the empty group
# tok; "end": the group's end minus 3) and the kinds whose pattern must run too
_NAME_GROUPS = {
    "tok": ("token", -5, ("secret",)), "key": ("key", -3, ("secret",)), "sec": ("secret", -6, ("aws-secret", "secret")),
    "cred": ("credential", -4, ("secret",)), "pw": ("pass", -4, ("secret",)), "fpass": ("pass", 0, ()),
    "fsecret": ("secret", 0, ()), "ftoken": ("token", 0, ()), "fkey": ("key", "end", ()),
    "fcred": ("credential", 0, ()),
}
# triggers that are patterns, not literals: (first character, the rest as a regular expression)
_PATTERN_TRIGGERS = {":port:": (":", r"(?:\d{1,5}|\*):[^\s:\"]+:[^\s:\"]+:"),  # .pgpass: host:5432:db:user:password
                     "fb|": ("|", r"(?<=\d{15}\|)[0-9a-z_-]{27}"), "fb%": ("%", r"(?<=\d{15}%)[0-9a-z_-]{27}"),  # Facebook
                     "pat14.": ("p", r"at[a-z0-9]{14}\.")}  # Airtable: `path` is everywhere
# letters by how seldom text holds them, those other branches start with already first: the engine
# stops at each position holding a first letter (each kind of this round's adds ~4% to the pass;
# measured on ../shared/data: c 2.6% of characters, p 2.0, _ 1.2, - 0.9, v 0.6, 9 0.3, k 0.5)
_RARE_FIRST = "zqjx<@~kbgpc_-9vywfmu"


def _prefilter(triggers: list[str]) -> str:
    """One branch per first letter: the names' branches of that letter, the pattern triggers', then
    the literals as a trie of what follows the letter, each ending in a lookbehind for the whole
    literal and its group t0, t1, ..."""
    import re
    by_letter = {letter: [body] for letter, body in _NAMES.items()}
    literals: dict[str, list] = {}
    for n, literal in enumerate(triggers):
        if literal in _PATTERN_TRIGGERS:
            first, rest = _PATTERN_TRIGGERS[literal]
            # looked ahead, not read: what it spans may hold another trigger (`admin:0:0:@db` holds
            # the `@` of a URL's password), and the scan goes on from its first letter
            by_letter.setdefault(first, []).append(f"(?={rest})(?P<t{n}>)")
            continue
        # the rarest letter; of two alike, not the last (a branch with letters after its own opens with them)
        at = min(range(len(literal)), key=lambda i: ((_RARE_FIRST + literal[i]).index(literal[i]), i == len(literal) - 1))
        behind = f"(?<={re.escape(literal)})" if at else ""
        literals.setdefault(literal[at], []).append((literal[at + 1:], f"{behind}(?P<t{n}>)"))
    for letter, items in literals.items():
        by_letter.setdefault(letter, []).append(_trie(items))
    # every branch starts with a literal, outside any group: else the engine has no first
    # letters to skip to, and tries every position (50x slower)
    return "|".join(f"{re.escape(c)}(?:{'|'.join(rest)})" for c, rest in by_letter.items())


def _trie(items: list) -> str:
    """[(rest of a literal, its ending)] as one expression that reads each letter once: at a stop
    of the prefilter the engine tries a letter per branch (a branch that opens with another
    letter is skipped at once), not a whole literal per trigger (25 under `p`: 2x the pass). A
    longer literal goes first: where one ends another (`eyj`, `ops_eyj`), the one that says more wins."""
    import re
    children: dict[str, list] = {}
    for rest, ending in items:
        if rest:
            children.setdefault(rest[0], []).append((rest[1:], ending))
    branches = [re.escape(c) + _trie(sub) for c, sub in children.items()]
    branches += sorted((ending for rest, ending in items if not rest), key=len, reverse=True)  # the longer lookbehind first
    return branches[0] if len(branches) == 1 else "(?:" + "|".join(branches) + ")"


_TRIGGERS = sorted({t for _k, triggers, _p, _c in KINDS for t in triggers if t == t.lower()})
# literals looked for as written (capitals, digits, `-`, `_`: no regular expression syntax), by one
# more pass of their own: in lowercase text they are common ("asia", "sk", "api-"), in capitals rare
_ROWS_OF: dict[str, set] = {}  # trigger -> the rows of KINDS it starts
for _i, (_k, _triggers, _p, _c) in enumerate(KINDS):
    for _t in _triggers:
        _ROWS_OF.setdefault(_t, set()).add(_i)
_CASED_ROWS = {t: rows for t, rows in sorted(_ROWS_OF.items()) if t != t.lower()}
_CASED = "|".join(sorted(_CASED_ROWS, key=len, reverse=True))
_TRIGGER_ROWS = {f"t{n}": _ROWS_OF[t] for n, t in enumerate(_TRIGGERS)}
_NAME_ROWS = {g: {i for i, row in enumerate(KINDS) if row[0] in kinds} for g, (_w, _o, kinds) in _NAME_GROUPS.items()}
_PREFILTER = None  # built on first use (re is imported then)
# every branch of the prefilter holds one of these: a trigger, or the keyword of a name group
_QUICK = (*(t for t in _TRIGGERS if t not in _PATTERN_TRIGGERS), *(first for first, _r in _PATTERN_TRIGGERS.values()),
          "token", "key", "secret", "cred", "pass")
QUICK_CHARS = 4096  # text up to this long is tested for them before the prefilter is compiled
_MASK = r"\[secret:[a-z0-9-]+:[0-9a-f]{4}\]"


def _replacer(kind: str, check):
    def replace(m) -> str:
        if "s" not in m.re.groupindex or m.group("s") is None:
            return m.group(0) if check and not check(m.group(0)) else token(kind, m.group(0))
        secret = m.group("s")
        if secret.startswith("[secret:") or (check and not check(secret)):
            return m.group(0)  # masked already (`-p[secret:..]`): as it is, so masking twice changes nothing
        start, end = m.start("s") - m.start(), m.end("s") - m.start()
        whole = m.group(0)
        return whole[:start] + token(kind, secret) + whole[end:]
    return replace


# Assignments (NAME = value, NAME: value, "NAME": "value", NAME := value, name: Type = value,
# --NAME value) are found where _scan sees a name: _name_end tells a secret's name (password,
# db_password, clientSecret, api_key, X-Api-Key, ...) from other words, and _VALUE, matched
# where the name ends, reads the separator and the value.
_TYPE = r"[A-Za-z_][\w.]*(?:\[[^\]\n]{0,40}\]+)?"  # str, Optional[str], t.Dict[str, int]
# (?a): \s and \w are ASCII only, so a value never ends inside a UTF-8 sequence (see _lowered)
# A type is read only where its `=` stands apart (` = `, `="`): in `password: cGFz==` or
# `secret: ab=cd12` the `=` is part of the value, which is masked whole.
_VALUE = (r"(?a)(?![\w-])(?:(?P<sep>\\*[\"']?[ \t]*(?::[ \t]*" + _TYPE + r"(?:[ \t]*\|[ \t]*" + _TYPE + r")*"
          r"(?:[ \t]+(?==(?!=))|(?==[ \t\\\"'`])))?"
          r"(?:=>|==|:=|=|:)[ \t]*)"
          # a mask already there is a value too: the match must not fall back to another reading
          r"(?:(?P<mk>\[secret:[a-z0-9-]+:[0-9a-f]{4}\])"
          r"|\\*(?P<q>[\"'`])(?P<qs>(?:(?!(?P=q))[^\\\n])+)\\*(?P=q)|(?P<us>[^\s\"'`,;&(){}\[\]<>\\]+))"
          r"|[ \t]+(?P<fs>[^\s\"'`\\-][^\s\"'`\\]*))")  # the value of --NAME value
# an unquoted value made of these alone reads as a name or an attribute (`token = self.tok`)
_NAME_CHARS = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ_.")
_DIGITS = frozenset("0123456789")


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
    if not quoted and _regex(r"[|>][+-]?[0-9]?").fullmatch(value):
        return False  # a YAML block scalar: its lines are the value (_yaml_blocks)
    if value.lower() in ("true", "false", "null", "none", "nil", "undefined"):
        return False  # a switch or an empty value, quoted or not (PERMISSION_BYPASS="true")
    password = "pass" in key.lower()
    if quoted:
        return password or (len(value) >= 8 and not any(c.isspace() for c in value))
    if not set(value) <= _NAME_CHARS | _DIGITS:
        return True  # punctuation: hunter2!, a/b+c=, some-long-value
    if value.isdigit():  # a PIN, or an id that is a key (16 digits and more); else a length or a count
        return (password and len(value) >= 4) or len(value) >= 16
    if set(value) & _DIGITS:
        return True  # hunter2, ab12cd34
    # a plain word: a name in code (password=password, token: str), a literal in a shell or
    # .env line (DB_PASSWORD=hunter) and after a command-line flag; 16 letters and more in one
    # case and without a `_` or `.` is no name in code (getAccessToken is camelCase) but a key
    if flag or (sep == "=" and key.upper() == key and any(c.isalpha() for c in key)):
        return True
    if not value.isalpha():
        return False
    # cut where a capital follows a small letter: words (get|Access|Token) or random runs (hv|JoCVqv|Vhzww)
    runs = _regex(r"[A-Z]*[a-z]*").findall(value)
    short = sum(0 < len(run) <= 2 for run in runs)
    if len(value) >= 12 and short >= 3 and short * 5 >= 2 * sum(1 for run in runs if run):
        return True  # many runs of a letter or two: random case, not a name in camelCase
    return len(value) >= 16 and (value.islower() or value.isupper())


_SEPARATORS = frozenset(("=", ":", '"', "'", "\\"))  # what may follow a name before its value
_KEY_CHARS = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_.-")
_KEY_PREFIXES = tuple(p + s for p in ("api", "access", "private") for s in ("", "_", "-"))


def _name_end(low: str, i: int, keyword: str) -> int:
    """Where the secret's name holding `keyword` at i ends, or -1 if it is not one."""
    if keyword == "pass":
        for name in ("password", "passwd", "passphrase", "pass"):
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
    mask_ends = dict(shielded)
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
        if end - i == 4 and keyword == "pass" and not quoted and "=" not in sep:
            continue  # `PASS: tests/x.sh` is a test runner's line; `pass: '...'`, `X_PASS=...` are not
        pieces += [text[done:m.start(group)], token(_kind_of(key), value)]
        done = m.end(group)
    return "".join(pieces) + text[done:] if pieces else text


def _scan(text: str, low: str) -> tuple[set, list]:
    """(rows of KINDS to run, [(position in low, keyword)] of secret names that may take a value)."""
    global _PREFILTER
    rows, found = set(), []
    if _regex(_CASED).search(text) is not None:  # one pass; the rows of each literal found (rare)
        for literal, cased in _CASED_ROWS.items():
            if literal in text:
                rows |= cased
    if _PREFILTER is None and len(low) <= QUICK_CHARS and not any(word in low for word in _QUICK):
        return rows, found  # the prefilter could not match: a process that masks only short,
        # plain text (a grep's echoed query) never compiles it (~1 ms)
    if _PREFILTER is None:
        _PREFILTER = _store()["prefilter"]
        if _PREFILTER is None:
            _PREFILTER = _store()["prefilter"] = _prefilter(_TRIGGERS)  # saved with its compiled pattern
    pattern = _regex(_PREFILTER)
    first = pattern.search(low)  # usually None: one pass, and done
    for m in pattern.finditer(low, first.start()) if first else ():
        group = m.lastgroup
        if group in _TRIGGER_ROWS:
            rows |= _TRIGGER_ROWS[group]
            continue
        keyword, offset, _kinds = _NAME_GROUPS[group]
        rows |= _NAME_ROWS[group]
        found.append((m.end(group) - 3 if offset == "end" else m.start(group) + offset, keyword))
    return rows, found


def _lowered(text: str) -> tuple[str, bytes | None]:
    """(text lowercased with one character per byte, its UTF-8 bytes or None for ASCII text).

    str.lower() is fast on ASCII only (else it consults Unicode tables for every character), and
    a regular expression runs faster over one-byte strings: other text is read through its UTF-8
    bytes (as Latin-1), which keep every ASCII character, all that the prefilter looks for, as is.
    """
    if text.isascii():
        return text.lower(), None
    data = text.encode("utf-8", "surrogatepass")
    return data.lower().decode("latin-1"), data


def _outside_masks(fn, text: str) -> str:
    """fn(part) for each part of text outside the masks already in it: a mask is never masked
    again, so masking masked text changes nothing."""
    if "[secret:" not in text:
        return fn(text)
    parts = _regex("(" + _MASK + ")").split(text)  # odd items are the masks
    return "".join(part if i % 2 else fn(part) for i, part in enumerate(parts))


def mask(text):
    """Plain text with every recognised secret replaced by [secret:KIND:FP]; anything else unchanged.

    Returns the same object when nothing was masked. Non-strings are returned as they are.
    """
    if not isinstance(text, str) or not text:
        return text
    low, utf8 = _lowered(text)
    patterns = _user if _user is not None else _load_user_patterns()
    rows, found = _scan(text, low)
    out = text
    for i in sorted(rows):
        kind, _triggers, how, check = KINDS[i]
        # over the whole text, masks included: no pattern matches inside a mask, and a secret
        # group that is one is left (_replacer), so `curl -H '[secret:..]' -u a:b` is still one command
        out = how(out) if callable(how) else _regex(how).sub(_replacer(kind, check), out)
    if found:
        if out is not text:  # positions moved: find the names again
            low, utf8 = _lowered(out)
            found = _scan(out, low)[1]
        data = out if utf8 is None else utf8.decode("latin-1")
        masked = _assignments(data, low, found, utf8 is not None)
        if masked is not data:
            out = masked if utf8 is None else masked.encode("latin-1").decode("utf-8", "surrogatepass")
    for pattern in patterns:
        redacted = lambda m: token("redact", m.group(0)) if m.group(0) else ""  # noqa: E731
        out = _outside_masks(lambda part: pattern.sub(redacted, part), out)
    return text if out == text else out


def _named_value(key, value):
    """`"password": "hunter2"` in JSON: a string value under a secret's name, masked whole."""
    if not (isinstance(key, str) and isinstance(value, str) and value) or value.startswith("[secret:"):
        return value
    if _is_name(key) and _literal(value, key, '": "', True, False):
        return token(_kind_of(key), value)
    return value


def _is_name(key) -> bool:
    """Whether a JSON key is a secret's name (password, db_password, apiKey, ...)."""
    if not isinstance(key, str):
        return False
    probe = f'"{key}":'
    low = _lowered(probe)[0]  # one character per UTF-8 byte: its length, not the probe's, places the end
    return any(_name_end(low, i, keyword) == len(low) - 2 for i, keyword in _scan(probe, low)[1])


def mask_json(value):
    """A decoded JSON value (dicts, lists, strings, as json.loads gives them) with every string
    masked, keys included, and each string under a secret's name masked whole. The same object
    when nothing changed, else a copy. Walks with a stack of its own: any depth is fine."""
    if isinstance(value, str):
        return mask(value)
    if not isinstance(value, (dict, list, tuple)):
        return value
    # each frame: [node, its (key, child) pairs, next index, the new pairs, changed, the name its
    # strings are under: the node's own key in a dict for a list (`"passwords": ["a", "b"]`)]
    frames = [[value, list(value.items() if isinstance(value, dict) else enumerate(value)), 0, [], False, None]]
    while True:
        frame = frames[-1]
        node, items, i, new = frame[0], frame[1], frame[2], frame[3]
        if i == len(items):
            frames.pop()
            done = node if not frame[4] else dict(new) if isinstance(node, dict) else [v for _k, v in new]
            if not frames:
                return done
            parent = frames[-1]
            key = parent[1][parent[2] - 1][0]
            masked_key = mask(key) if isinstance(parent[0], dict) else key
            parent[3].append((masked_key, done))
            parent[4] = parent[4] or done is not node or masked_key is not key
            continue
        frame[2] += 1
        key, child = items[i]
        named = isinstance(node, dict)
        if isinstance(child, (dict, list, tuple)):
            name = key if named else frame[5]  # a list's strings are under the key that holds the list
            frames.append([child, list(child.items() if isinstance(child, dict) else enumerate(child)), 0, [],
                           False, name if isinstance(child, (list, tuple)) else None])
            continue
        masked_key = mask(key) if named else key
        masked = mask(child) if isinstance(child, str) else child
        if masked is child and (named or frame[5] is not None):
            masked = _named_value(key if named else frame[5], child)
        new.append((masked_key, masked))
        frame[4] = frame[4] or masked is not child or masked_key is not key


def mask_line(raw) -> bytes:
    """A JSON line (bytes, as a transcript holds it) with every string masked as mask_json does;
    the same bytes if none holds a secret. Strings are masked where they stand, everything else
    (numbers, spacing, key order, escapes of untouched strings) is kept byte for byte; a line that
    is not JSON after some point is masked as plain text from there."""
    raw = bytes(raw)
    if not may_contain(raw):
        return raw
    from json import dumps
    from json.decoder import scanstring
    text, space = raw.decode("utf-8", "surrogateescape"), _regex(r"[ \t\r\n]*")
    out, done, pos, key, value_at = [], 0, 0, None, -1
    listed: dict[int, str] = {}  # start of a string in an array under a secret's name -> that name
    while True:
        start = text.find('"', pos)
        if start < 0:
            break
        try:
            value, end = scanstring(text, start + 1, False)
        except ValueError:  # not JSON from here on
            out, done = out + [text[done:start], mask(text[start:])], len(text)
            break
        after = space.match(text, end).end()
        is_key = text.startswith(":", after)
        masked = mask(value)
        if masked is value and start == value_at:
            masked = _named_value(key, value)
        elif masked is value and start in listed and not is_key:
            masked = _named_value(listed[start], value)
        if masked is not value:
            try:
                piece = dumps(masked, ensure_ascii=False)
                piece.encode("utf-8")
            except UnicodeEncodeError:  # a lone surrogate: as an escape
                piece = dumps(masked)
            out += [text[done:start], piece]
            done = end
        if is_key:  # where its value starts, if that is a string
            key, value_at = value, space.match(text, after + 1).end()
            if text.startswith("[", value_at) and _is_name(key):  # an array nested in one is
                listed.update(dict.fromkeys(array_strings(text, value_at), key))  # met later: it wins
        pos = end
    masked = "".join(out) + text[done:]
    return raw if masked == text else masked.encode("utf-8", "surrogateescape")


def may_contain(data) -> bool:
    """Whether masking could change this text, bytes or escaped JSON text (a quick test, for
    callers that would otherwise walk a parsed structure). JSON escapes are allowed for: \\u may
    hide any character, and a tab (`--password\\tx`) is one to the names."""
    if isinstance(data, (bytes, bytearray, memoryview)):
        data = bytes(data).decode("latin-1")  # one char per byte: the ASCII tests see the same
    if not isinstance(data, str):
        return False
    if "\\" in data:
        if "\\u" in data:
            return True
        data = data.replace("\\t", "\t")
    rows, found = _scan(data, _lowered(data)[0])
    return bool(rows or found) or bool(_user if _user is not None else _load_user_patterns())


def has_user_patterns() -> bool:
    """Whether redact.txt adds patterns (text masked when stored may predate them)."""
    return bool(_user if _user is not None else _load_user_patterns())


def _load_user_patterns() -> list:
    """The patterns of $LCM_HOME/redact.txt (compiled once per process)."""
    global _user
    if _user is not None:
        return _user
    _user = []
    for number, pattern, error in redact_patterns():
        if error is None:
            _user.append(pattern)
        else:
            sys.stderr.write(f"lcm: ignoring redact.txt line {number}: {error}\n")
    return _user


def reload_user_patterns() -> None:
    """Read redact.txt afresh on the next mask (a pattern was just added)."""
    global _user
    _user = None


# $LCM_HOME/redact.txt: the person's own patterns of what to mask, one regular expression a

def redact_path() -> str:
    return os.path.join(lcm.base.config.home_str(), "redact.txt")


def redact_patterns() -> list[tuple[int, object, str | None]]:
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
        # a line is often the secret itself, typed as a pattern: reported by its number, never shown
        except (re.error, RecursionError, OverflowError) as exc:
            out.append((number, None, f"invalid regular expression ({getattr(exc, 'msg', None) or type(exc).__name__}"
                                      + (f" at position {exc.pos}" if getattr(exc, "pos", None) is not None else "") + ")"))
            continue
        if pattern.fullmatch(""):
            out.append((number, None, "the pattern matches the empty string"))
            continue
        out.append((number, pattern, None))
    return out


def redact_problems() -> list[str]:
    """What is wrong in redact.txt, one message per bad line (for lcm_doctor.py)."""
    return [f"{redact_path()} line {n}: {error}" for n, _p, error in redact_patterns() if error]


# Reading a JSON text in place, without decoding it: where the strings of an array start.

def array_strings(text: str, at: int) -> set:
    """The starts of the strings that are elements of the JSON array opening at text[at] or of
    the arrays nested in it, not those inside an object in it (their own key names them)."""
    from json.decoder import scanstring
    stack, found, pos = [], set(), at
    while pos < len(text):
        ch = text[pos]
        if ch == '"':
            if "{" not in stack:
                found.add(pos)
            try:
                pos = scanstring(text, pos + 1, False)[1]
            except ValueError:
                return found  # not JSON from here on
            continue
        if ch in "[{":
            stack.append(ch)
        elif ch in "]}":
            stack.pop()
            if not stack:
                return found
        pos += 1
    return found

"""Secrets as the field writes them (issue 31): a key glued to a letter of any script, the
ordinary forms of passwords and keys in commands, config files and URLs, each masked whole in
every place a transcript holds it; and what is not a secret stays readable."""
from __future__ import annotations

import json
import string

from hypothesis import assume, example, given, settings, strategies as st

import lcm.base.mask
import lcm.capture.transcript

from test_mask import SAMPLES

mask = lcm.base.mask.mask

# letters of every script but ASCII's: an ASCII letter before a key makes it part of a word
# (`task-...`); Japanese, Chinese, Cyrillic, accented Latin put a key right after a letter
LETTERS = st.characters(whitelist_categories=("Lu", "Ll", "Lt", "Lm", "Lo"), blacklist_characters=string.ascii_letters)
# sample rows whose text is the key itself (the others are a name and a value, found by the name)
GLUED = [row for row in SAMPLES if row[1].startswith(row[2][:8])
         and row[0] not in ("private", "private-unclosed", "private-key")]


@settings(max_examples=400, deadline=None)
@given(st.sampled_from(GLUED), st.text(LETTERS, min_size=1, max_size=3), st.text(LETTERS, max_size=3))
def test_a_key_glued_to_a_letter_of_any_script_is_masked(sample, before, after):
    kind, text, secret = sample
    s = before + text + after
    masked = mask(s)
    assert secret not in masked, (kind, s)
    assert masked.startswith(before) and masked.endswith(after)  # the letters stay
    line = json.dumps({"type": "user", "message": {"role": "user", "content": s}}, ensure_ascii=False).encode()
    assert secret.encode() not in lcm.base.mask.mask_line(line)


def test_the_reported_cases_in_japanese_chinese_cyrillic_and_accented_latin():
    key = "sk-ant-api03-" + "Zx9" * 12
    for text in (f"APIキーは{key}です", f"密钥是{key}。", f"ключ{key}готов", f"clé{key}é"):
        assert key[12:] not in mask(text), text


FORMS = [  # (form, text holding the secret, the secret): each must go whole
    ("url password with /", "postgres://app:pa/ss@db.internal:5432/app", "pa/ss"),
    ("url password with @", "mongodb://root:p@ss@w0rd@mongo.local/admin", "p@ss@w0rd"),
    ("url, json-escaped slashes", "postgres:\\/\\/u:Hunter2pw@h.example", "Hunter2pw"),
    ("mysql quoted with a space", "mysql -u root -p'Hunter2 Pass' app", "Hunter2 Pass"),
    ("curl quoted with a space", "curl -u 'admin:Hunter2 Pass' https://api.example.com", "Hunter2 Pass"),
    ("sshpass", "sshpass -p Hunter2Pass ssh deploy@host", "Hunter2Pass"),
    ("docker login", "docker login -u ann -p Hunter2Pass registry.example.com", "Hunter2Pass"),
    ("redis-cli", "redis-cli -h cache.local -a Hunter2Pass ping", "Hunter2Pass"),
    ("openssl pass:", "openssl rsa -in k.pem -passin pass:Hunter2Pass -out k2.pem", "Hunter2Pass"),
    ("htpasswd -b", "htpasswd -bc /etc/nginx/.htpasswd ann Hunter2Pass", "Hunter2Pass"),
    ("htpasswd -nb", "htpasswd -nbB ann Hunter2Pass", "Hunter2Pass"),
    (".netrc", "machine api.example.com login ann password Hunter2Pass", "Hunter2Pass"),
    (".pgpass", "db.internal:5432:app:ann:Hunter2Pass", "Hunter2Pass"),
    (".npmrc _auth", "//registry.npmjs.org/:_auth=YW5uOkh1bnRlcjJQYXNz", "YW5uOkh1bnRlcjJQYXNz"),
    (".npmrc _authToken", "//npm.example.com/:_authToken=0f3c9a2e-7d41-4b8e-9c55-21a7e3d4b6f1", "0f3c9a2e-7d41-4b8e"),
    ("yaml block scalar", "db:\n  password: |\n    Hunter2 Pass phrase\n  user: ann", "Hunter2 Pass phrase"),
    ("pem with headers", "-----BEGIN RSA PRIVATE KEY-----\nProc-Type: 4,ENCRYPTED\nDEK-Info: AES-128-CBC,0A1B2C3D4E5F6071\n\n"
                         "MIIEpAIBAAKCAQEA7yq3plantedkeymaterial0123\nb2xkZXJsaW5lczAxMjM0NTY3ODk=\n", "plantedkeymaterial"),
    ("slack app token", "xapp-1-A0123BCDE-4567890123-0a1b2c3d4e5f60718293a4b5c6d7e8f9", "A0123BCDE-4567890123"),
    ("stripe webhook secret", "whsec_5Zb3kQ9vT1xW8yR2nM4pL6jH0gF7dS3a", "5Zb3kQ9vT1xW8yR2nM4p"),
    ("google oauth token", "ya29.a0AfH6SMBx0q9Z8y7X6w5V4u3T2s1R0qPoNmLkJiH", "a0AfH6SMBx0q9Z8y7X6w"),
    ("pypi token", "pypi-AgEIcHlwaS5vcmcCJDBmM2M5YTJlLTdkNDEtNGI4ZS05YzU1LTIxYTdlM2Q0YjZmMQACKlszLCJ",
     "AgEIcHlwaS5vcmcCJDBmM2M5YTJl"),
    ("telegram bot url", "curl https://api.telegram.org/bot123456789:AAHdqTcvCH1vGWJxfSeofSAs0K5PALDsaw/getMe",
     "AAHdqTcvCH1vGWJxfSeofSAs0K5PALDsaw"),
    ("discord webhook", "https://discord.com/api/webhooks/112233445566778899/Zq8XyW7vU6tS5rQ4pO3nM2lK1jI0hG9fE8dC7bA",
     "Zq8XyW7vU6tS5rQ4pO3nM2lK1jI0hG9f"),
    ("authorization token", "-H 'Authorization: token 0f3c9a2e7d414b8e9c5521a7e3d4'", "0f3c9a2e7d414b8e9c5521a7e3d4"),
    ("cookie", "Cookie: csrftoken=abc; sessionid=q8w7e6r5t4y3u2i1o0p9", "q8w7e6r5t4y3u2i1o0p9"),
    ("aws cli table", "||  SecretAccessKey |  wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY  ||", "wJalrXUtnFEMI/K7MDENG"),
    ("aws cli table token", "||  SessionToken |  FwoGZXIvYXdzEBYaDHQa0Zq8XyW7vU6tS5rQ4pO3  ||", "FwoGZXIvYXdzEBYaDHQa"),
    ("private tag with a space", "<private >home: 12 Elm St</private>", "12 Elm St"),
    ("private tag with a reason", '<private reason="pii">home: 12 Elm St</private>', "12 Elm St"),
]
POSITIONS = {
    "alone": lambda s: s,
    "after a newline": lambda s: "run this:\n" + s + "\nthen go on",
    "after a CJK letter": lambda s: "設定は" + s,
    "inside JSON": lambda s: "payload " + json.dumps({"config": {"value": s}}),
}
TRANSCRIPT_PLACES = ["user text", "tool result", "bash command", "file written"]


def entry(place: str, text: str) -> dict:
    if place == "user text":
        return {"type": "user", "uuid": "u1", "message": {"role": "user", "content": text}}
    if place == "tool result":
        return {"type": "user", "uuid": "u1", "message": {"role": "user", "content": [
            {"type": "tool_result", "tool_use_id": "toolu_1", "content": text}]}}
    tool = {"bash command": ("Bash", {"command": text}),
            "file written": ("Write", {"file_path": "/home/u/proj/.env", "content": text})}[place]
    return {"type": "assistant", "uuid": "u1", "message": {"role": "assistant", "content": [
        {"type": "tool_use", "id": "toolu_1", "name": tool[0], "input": tool[1]}]}}


def searchable(line: bytes) -> str:
    """The text ingest stores for search (what grep, snippets and summaries read)."""
    batch = lcm.capture.transcript.Batch("/tmp/projects/-home-u-proj/s1.jsonl", None)
    lcm.capture.transcript.parse_lines(batch, [line], True, 1 << 30)
    return batch.rows[0][14]


@settings(max_examples=400, deadline=None)
@given(st.sampled_from(FORMS), st.sampled_from(sorted(POSITIONS)), st.sampled_from(TRANSCRIPT_PLACES))
def test_each_form_is_masked_whole_in_each_place(form, position, place):
    name, text, secret = form
    s = POSITIONS[position](text)
    assert secret not in mask(s), (name, position)
    line = json.dumps(entry(place, s)).encode()
    masked = lcm.base.mask.mask_line(line)
    assert secret not in json.dumps(json.loads(masked), ensure_ascii=False), (name, position, place)
    assert secret not in searchable(line), (name, position, place)
    assert lcm.base.mask.mask_line(masked) == masked  # idempotent


PRINTABLE = st.text(st.characters(min_codepoint=0x21, max_codepoint=0x7e), min_size=1, max_size=40)


@settings(max_examples=500, deadline=None)
# a password that looks like a .pgpass line's middle (`:0:0:`) once hid the URL's `@` from the prefilter
@example("0:0:", "postgres", ":5432/app", "after a CJK letter")
@given(PRINTABLE, st.sampled_from(["postgres", "mysql", "https", "redis", "amqp"]),
       st.sampled_from(["", "/app", ":5432/app", "/db?sslmode=require"]), st.sampled_from(sorted(POSITIONS)))
def test_a_url_password_with_any_printable_characters_is_masked_whole(password, scheme, tail, position):
    assume(not lcm.base.mask.is_variable(password))  # `$DB_PASS`, `%(password)s`: the password is elsewhere
    url = f"{scheme}://admin:{password}@db.internal{tail}"
    s = POSITIONS[position](url)
    masked = mask(s)
    whole = POSITIONS[position](f"{scheme}://admin:{lcm.base.mask.token('password', password)}@db.internal{tail}")
    if position == "inside JSON":  # escaped: `"` is `\"` there, so another fingerprint
        escaped = json.dumps(password)[1:-1]
        assert f":{escaped}@" not in masked and masked.count("[secret:password:") == 1 and "@db.internal" in masked
    else:
        assert masked == whole  # the password whole, and nothing else
    line = json.dumps({"type": "user", "message": {"content": s}}).encode()
    decoded = json.loads(lcm.base.mask.mask_line(line))["message"]["content"]
    assert f":{password}@" not in decoded and (position == "inside JSON" or decoded == whole)


NOT_SECRETS = [
    "commit 4b825dc642cb6eb9a060e54bf8d69288fbee4904 (short a3f9c21)",
    "session 7acd37a8-2745-4b58-a8a9-46164b22ad9e resumed",
    "sha256: 9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08",
    '"integrity": "sha512-z4PhNX7vuL3xVChQ1m2AB9Yg5AULVxXcg/SpIdNs6c5H0NE8XYXysP+DGNKHfuwvY7kxvUdBeoGlODJ6+SfaPg=="',
    "const t = getAccessTokenFromRefreshToken(refreshToken)",
    "export OPENAI_API_KEY",
    'key = os.environ["ANTHROPIC_API_KEY"]',
    "open http://localhost:8080/api/v1/users@me for the profile",
    "10:42:17 INFO worker up; ether 00:11:22:33:44:55; fe80:0:0:0:200:f8ff:fe21:67cf",
    "pip install scikit-learn==1.4.2 sk-learn-helpers; task-ant-farm",
    "the default value, the machine learning model, passing -pass tests",
    "Cookie handling is described in docs/cookies.md",
    'PERMISSION_BYPASS="true"  # always on',              # a switch, quoted, under a name holding "pass"
    'DB_PASSWORD="null" until the vault is unlocked',
]


def test_what_is_not_a_secret_stays_readable():
    for text in NOT_SECRETS:
        assert mask(text) is text, text
        for position in POSITIONS.values():
            assert mask(position(text)) == position(text), text
    assert "hunter2hunter" not in mask('PERMISSION_PASSWORD="hunter2hunter"')  # a quoted password still is one


def test_text_stored_under_the_rules_before_is_masked_on_output_after_the_upgrade(tmp_path, capsys, monkeypatch):
    """A vault the release before filled (its masking left a key after a Japanese letter and a URL
    password holding `/` in clear) is upgraded: grep masks those rows on the way out, and
    lcm_doctor.py --remask masks them in place."""
    import lcm.care.doctor
    import lcm.vault.db
    import lcm.vault.schema
    import lcm_grep
    import lcm_ingest
    from conftest import run
    from transcripts import Transcript

    key, url_password = "sk-ant-api03-" + "Qw3" * 12, "pa/ss9word"
    t = Transcript(tmp_path / "projects", session_id="s-old", cwd=str(tmp_path))
    t.user(f"デプロイのAPIキーは{key}です and the db is postgres://app:{url_password}@db.internal/app")
    t.write()
    with monkeypatch.context() as m:  # stored as the older rules left it: these two in clear
        m.setattr(lcm.base.mask, "mask", lambda text: text)
        m.setattr(lcm.base.mask, "mask_json", lambda value: value)
        assert run(capsys, lcm_ingest, str(tmp_path / "projects"))[0] == 0
    conn = lcm.vault.db.connect()
    with lcm.vault.db.transaction(conn):  # as that release left the vault: all of it masked by its rules
        conn.execute("UPDATE vault_meta SET value = (SELECT max(id) + 1 FROM messages) WHERE key = 'masked_from_message'")
        conn.execute(f"PRAGMA user_version = {lcm.vault.schema.MASK_RULES_VERSION - 1}")
    conn.close()
    conn = lcm.vault.db.connect()  # migrates
    assert lcm.vault.db.masked_from(conn)["message"] > conn.execute("SELECT max(id) FROM messages").fetchone()[0]
    code, out, _err = run(capsys, lcm_grep, "デプロイ db.internal", "--all-sessions", "--json")
    assert code == 0 and json.loads(out)["count"] == 1
    assert key[12:] not in out, out
    assert url_password not in out, out
    assert lcm.base.mask.token("password", url_password) in out  # masked under the new rules
    assert lcm.care.doctor.remask_content(conn)["messages"] == 1
    stored = conn.execute("SELECT content FROM messages").fetchone()[0]
    assert key[12:] not in stored and url_password not in stored


VENDOR_KEYS = [  # keys whose prefix holds another's (`ops_eyJ` holds `eyJ`, `shpat_` holds `pat`): each found
    "ops_eyJ" + "a1B2c3D4" * 32,  # 1Password service account
    "eyJrIjoi" + "Qm9vb2tzQW5kU3RyZWFtczEyMzQ1Njc4OTAxMjM0NTY3ODkwMTIzNDU2Nzg5MA",  # Grafana API key
    "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",  # Shopify
    "sm_pat_Zq8XyW7vU6tS5rQ4",  # SettleMint
    "glsa_Zq8XyW7vU6tS5rQ4pO3nM2lK1jI0hG9f_0a1b2c3d",  # Grafana service account
    "dop_v1_" + "0a1b2c3d4e5f6071" * 4,  # DigitalOcean
    "AKIA" + "Q3EXAMPLEKEY7ZZZ", "A3T" + "XQ3EXAMPLEKEY7ZZZ",  # AWS
]


def test_a_vendor_key_whose_prefix_holds_another_is_masked():
    for key in VENDOR_KEYS:
        for text in (key, f"key: {key}\n", f"鍵は{key}です"):
            assert key[-12:] not in mask(text), text


def test_a_key_in_another_script_is_a_secrets_name_only_where_it_ends_with_one():
    """A JSON key `日本 DB_PASSWORD=[secret:...]` (masked once) ended, counted in UTF-8 bytes, where
    its mask's `password` ends: its value `1` was masked on the second pass, not the first."""
    entry = {"input": {"env": {"日本 \u2028DB_PASSWORD=correcthorse9": "1"}}}
    once = lcm.base.mask.mask_line(json.dumps(entry).encode())
    assert lcm.base.mask.mask_line(once) == once and json.loads(once)["input"]["env"].popitem()[1] == "1"
    assert lcm.base.mask.mask_json({"パスワード password": "hunter2!"}) == {
        "パスワード password": lcm.base.mask.token("password", "hunter2!")}

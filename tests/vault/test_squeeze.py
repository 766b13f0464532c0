"""The searchable text compressed row by row (lcm/vault/squeeze.py): every text back as it was,
the full-text index held to its definition through inserts, compressions, rewrites and deletes,
the conversational index still telling tool calls from words, and a first import that leaves
the vault small."""
from __future__ import annotations

import re
import sqlite3

import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

import lcm.capture.bulk
import lcm.capture.ingest
import lcm.vault.db
import lcm.vault.pack
import lcm.vault.schema
import lcm.vault.squeeze
from conftest import shared_data

WORDS = ["alpha", "bravo", "charlie", "delta", "echo", "foxtrot", "golf", "hotel", "india", "juliet"]
DICTIONARY = lcm.vault.squeeze.build_dictionary(
    [" ".join(WORDS[i:] + WORDS[:i]) * 8 + "\nRead {\"file_path\": \"/src/app.py\"}" for i in range(10)] * 2)

texts = st.one_of(
    st.text(st.characters(blacklist_characters="\x00", blacklist_categories=("Cs",)), max_size=40),
    st.lists(st.sampled_from(WORDS), min_size=1, max_size=400).map(" ".join),  # long enough to compress
    st.builds(lambda name, words: f"{name} {{\"command\": \"{' '.join(words)}\"}}",  # a tool call's flat text
              st.sampled_from(["Bash", "Read", "Edit"]), st.lists(st.sampled_from(WORDS), max_size=200)),
)


def test_empty_and_odd_texts_round_trip(tmp_path):
    conn = lcm.vault.db.connect(str(tmp_path / "v.db"))
    with lcm.vault.db.transaction(conn):
        dict_id = lcm.vault.squeeze.store_dictionary(conn, DICTIONARY, 20)
    enc = lcm.vault.squeeze.Encoder(dict_id, DICTIONARY)
    for text in ["", "x" * 300, "日本語のテキスト" * 60, "emoji \U0001F600 " * 80, "Bash {" + "a" * 500]:
        stored = enc.encode(text)
        assert lcm.vault.squeeze.text(conn, stored) == text
    assert isinstance(enc.encode("short"), str)  # short rows stay text
    assert isinstance(enc.encode("x" * 300), bytes) and len(enc.encode("x" * 300)) < 300
    assert enc.encode("\ud800 lone surrogate " * 30) == "\ud800 lone surrogate " * 30  # stored as text


def test_an_unknown_codec_is_refused_clearly(tmp_path):
    conn = lcm.vault.db.connect(str(tmp_path / "v.db"))
    with pytest.raises(ValueError, match="newer lcm"):
        lcm.vault.squeeze.Decoder(conn).text(b"\x09\x00\x00")
    with pytest.raises(sqlite3.Error):  # in SQL: the statement fails, nothing is misread
        conn.execute("SELECT lcm_text(x'09000000')").fetchone()


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.lists(st.tuples(st.sampled_from(["insert", "squeeze", "rewrite", "delete"]), st.integers(0, 50), texts,
                          st.sampled_from(["user", "assistant"])), min_size=1, max_size=30))
def test_full_text_index_holds_to_its_definition(tmp_path_factory, ops):
    """Whatever the sequence of inserts, compressions in place (packing), rewrites (a remask:
    the old text out of the index, the new in) and deletes, a word matches exactly the rows
    whose decoded text holds it; FTS5's own integrity-check (which reads the text through the
    view that decodes) passes; and messages_talk holds exactly the rows TALK_WHERE names."""
    conn = lcm.vault.db.connect(str(tmp_path_factory.mktemp("v") / "v.db"))
    with lcm.vault.db.transaction(conn):
        dict_id = lcm.vault.squeeze.store_dictionary(conn, DICTIONARY, 20)
    enc = lcm.vault.squeeze.Encoder(dict_id, DICTIONARY)
    truth: dict[int, tuple[str, str]] = {}  # id -> (role, text)
    n = 0
    for op, pick, text, role in ops:
        ids = sorted(truth)
        with lcm.vault.db.transaction(conn):
            if op == "insert" or not ids:
                n += 1
                stored = enc.encode(text) if pick % 2 else text  # a bulk import's row, or a hook's
                mid = conn.execute("INSERT INTO messages (uuid, session_id, type, role, content, token_count, raw)"
                                   " VALUES (?, 's', ?, ?, ?, ?, ?)", (f"u{n}", role, role, stored, len(text) // 4 + 1,
                                                                       b'{"uuid": "u%d"}' % n)).lastrowid
                truth[mid] = (role, text)
                continue
            mid = ids[pick % len(ids)]
            if op == "squeeze":
                conn.execute("UPDATE messages SET content = ? WHERE id = ?", (enc.encode(truth[mid][1]), mid))
            elif op == "rewrite":
                old = conn.execute("SELECT lcm_text(content) FROM messages WHERE id = ?", (mid,)).fetchone()[0]
                conn.execute("INSERT INTO messages_fts(messages_fts, rowid, content) VALUES ('delete', ?, ?)", (mid, old))
                conn.execute("UPDATE messages SET content = ? WHERE id = ?", (enc.encode(text), mid))
                conn.execute("INSERT INTO messages_fts(rowid, content) VALUES (?, ?)", (mid, text))
                truth[mid] = (truth[mid][0], text)
            else:
                conn.execute("DELETE FROM messages WHERE id = ?", (mid,))
                del truth[mid]
    conn.execute("INSERT INTO messages_fts(messages_fts, rank) VALUES ('integrity-check', 1)")
    for word in WORDS + ["bash", "command"]:
        found = {r[0] for r in conn.execute("SELECT rowid FROM messages_fts WHERE messages_fts MATCH ?", (word,))}
        expected = {mid for mid, (_, text) in truth.items() if word in re.findall(r"\w+", text.lower())}
        assert found == expected, word
    talk = {r[0] for r in conn.execute(f"SELECT id FROM messages INDEXED BY messages_talk WHERE"
                                       f" {lcm.vault.schema.TALK_WHERE}")}
    assert talk == {mid for mid, (role, text) in truth.items()
                    if role == "user" or not lcm.vault.squeeze.tool_call(text)}
    for mid, (_, text) in truth.items():
        assert conn.execute("SELECT content FROM messages_text WHERE id = ?", (mid,)).fetchone()[0] == text
    conn.close()


def test_first_import_leaves_the_vault_small_and_every_text_as_extracted(tmp_path):
    """lcm_ingest.py's import alone packs the lines and compresses the text: nothing waits for
    packing, and every row's text reads back as a hook-by-hook import stored it."""
    bulk, plain = tmp_path / "bulk.db", tmp_path / "plain.db"
    conn = lcm.vault.db.connect(str(bulk))
    lcm.capture.bulk.ingest_paths(conn, [shared_data("claude-projects")])
    other = lcm.vault.db.connect(str(plain))
    with lcm.vault.db.transaction(other):  # file by file, every row plain, as the hooks store them
        lcm.capture.bulk.ingest_paths(other, [shared_data("claude-projects")])
    texts = dict(other.execute("SELECT uuid, content FROM messages"))
    assert all(isinstance(t, str) for t in texts.values())
    assert dict(conn.execute("SELECT uuid, lcm_text(content) FROM messages")) == texts
    compressed = conn.execute("SELECT count(*) FROM messages WHERE typeof(content) = 'blob'").fetchone()[0]
    assert compressed > len(texts) // 4
    assert lcm.vault.pack.unsqueezed(conn) == 0 and not lcm.vault.pack.due(conn)
    assert lcm.vault.pack.pending(conn) < len(texts) // 20  # a file with a uuid twice waits for packing
    conn.execute("INSERT INTO messages_fts(messages_fts, rank) VALUES ('integrity-check', 1)")
    conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")  # as the command leaves it when it closes the vault
    ratio = lcm.vault.pack.ratio(conn)["ratio"]
    assert ratio < 0.9, ratio  # 11 MB of transcripts: fixed pages weigh more than on a large corpus
    # the plain vault converts: packing compresses lines and text alike, and grep's answers agree
    doc = lcm.vault.pack.pack(other, everything=True)
    assert doc["pending_lines"] == 0
    assert other.execute("SELECT count(*) FROM messages WHERE typeof(content) = 'blob'").fetchone()[0] > compressed // 2
    assert dict(other.execute("SELECT uuid, lcm_text(content) FROM messages")) == texts
    for word in ("error", "test", "function"):
        q = ("SELECT m.uuid FROM messages_fts f JOIN messages m ON m.id = f.rowid WHERE messages_fts MATCH ?"
             " ORDER BY m.uuid")
        assert [r[0] for r in conn.execute(q, (word,))] == [r[0] for r in other.execute(q, (word,))]


def test_purge_leaves_no_copy_in_a_dictionary(tmp_path):
    """A purged text frequent enough to be a line of the text dictionary: the dictionary is
    replaced by one without it, and every other row reads back as before."""
    import json
    import lcm.care.purge
    conn = lcm.vault.db.connect(str(tmp_path / "v.db"))
    secret = "project-nightjar-budget-line"
    data = DICTIONARY + b"\n" + (secret + " approved by finance\n").encode() * 2
    with lcm.vault.db.transaction(conn):
        dict_id = lcm.vault.squeeze.store_dictionary(conn, data, 20)
    enc = lcm.vault.squeeze.Encoder(dict_id, data)
    texts = {f"u{i}": " ".join(WORDS[i % 10:] + WORDS) * 6 + (f" {secret} approved by finance" if i == 3 else "")
             for i in range(8)}
    with lcm.vault.db.transaction(conn):
        for uuid, text in texts.items():
            raw = json.dumps({"type": "user", "uuid": uuid, "sessionId": "s", "message": {"role": "user", "content": text}})
            conn.execute("INSERT INTO messages (uuid, session_id, type, role, content, token_count, raw) VALUES"
                         " (?, 's', 'user', 'user', ?, 10, ?)", (uuid, enc.encode(text), raw.encode()))
    sel = lcm.care.purge.select(conn, match=secret)
    doc = lcm.care.purge.purge(conn, sel)
    assert doc["dictionaries_replaced"] == 1
    assert all(secret.encode() not in bytes(r[0]) for r in conn.execute("SELECT data FROM zdicts"))
    del texts["u3"]
    assert dict(conn.execute("SELECT uuid, lcm_text(content) FROM messages")) == texts
    assert conn.execute("SELECT count(*) FROM messages WHERE typeof(content) = 'blob'").fetchone()[0] == len(texts)
    conn.execute("INSERT INTO messages_fts(messages_fts, rank) VALUES ('integrity-check', 1)")
    assert lcm.vault.squeeze.encoder(conn).dict_id != dict_id  # new rows use the clean one
    conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    conn.close()
    for name in ("v.db", "v.db-wal"):  # not a byte of it left in the file: the old dictionary's pages are zeroed
        path = tmp_path / name
        assert not path.exists() or secret.encode() not in path.read_bytes(), name


def test_a_vault_from_before_converts_online_and_resumably(tmp_path, monkeypatch, capsys):
    """A vault whose lines an older lcm packed, its text plain: doctor says text waits, and
    `lcm_compact.py --pack --all` compresses it in short batches from a mark; a run stopped
    mid-way (its time budget) goes on where it stopped, turns stored meanwhile by the hooks are
    kept and compressed too, and every text, line and index entry stays as it was."""
    import json
    from conftest import run
    from transcripts import Transcript
    vault = tmp_path / "old.db"
    monkeypatch.setenv("LCM_DB", str(vault))
    conn = lcm.vault.db.connect(str(vault))
    with lcm.vault.db.transaction(conn):  # file by file: every line and text plain, as the hooks store them
        lcm.capture.bulk.ingest_paths(conn, [shared_data("claude-projects")])
    with monkeypatch.context() as patch:  # packed as an lcm before compressed text did: lines only
        patch.setattr(lcm.vault.pack, "_dictionary", lambda conn, turns: None)
        lcm.vault.pack.pack(conn, everything=True)
    conn.execute("DELETE FROM vault_meta WHERE key = 'squeezed_through'")  # an older lcm kept no mark
    assert lcm.vault.pack.pending(conn) == 0 and lcm.vault.pack.unsqueezed(conn) > 2000
    texts = dict(conn.execute("SELECT uuid, content FROM messages"))
    lines = dict(conn.execute("SELECT uuid, lcm_line(raw, block_id, block_pos) FROM messages"))
    conn.close()
    monkeypatch.setattr(lcm.vault.pack, "CONVERT_LINES", 1000)  # the shared data is smaller than a real backlog
    code, out, _ = run(capsys, "lcm_doctor", "--json")
    storage = json.loads(out)["storage"]
    assert storage["pending"] and storage["unsqueezed_rows"] > 2000
    # a run that stops after its first batch (the hooks' detached runs have a time budget)
    monkeypatch.setattr(lcm.vault.pack, "SQUEEZE_ROWS", 500)
    conn = lcm.vault.db.connect(str(vault))
    doc = lcm.vault.pack.pack(conn, time_budget=0.0)
    left = lcm.vault.pack.unsqueezed(conn)
    assert doc["stopped"] == "time_budget" and 0 < left < len(texts) - 400
    # a hook stores a turn meanwhile
    t = Transcript(tmp_path / "projects", session_id="s-during")
    t.user("the kestrel migration finished overnight " * 20)
    t.write()
    lcm.capture.ingest.ingest_file(conn, t.path, patience=1.0)
    conn.close()
    assert run(capsys, "lcm_compact", "--pack", "--all", "--vacuum")[0] == 0
    conn = lcm.vault.db.connect(str(vault))
    assert lcm.vault.pack.unsqueezed(conn) == 0 and lcm.vault.pack.pending(conn) == 0
    assert conn.execute("SELECT count(*) FROM messages WHERE typeof(content) = 'blob'").fetchone()[0] > len(texts) // 4
    now = dict(conn.execute("SELECT uuid, lcm_text(content) FROM messages"))
    assert {u: now[u] for u in texts} == texts and len(now) == len(texts) + 1
    assert dict(conn.execute("SELECT uuid, lcm_line(raw, block_id, block_pos) FROM messages WHERE uuid IN"
                             f" ({','.join('?' * len(lines))})", list(lines))) == lines
    conn.execute("INSERT INTO messages_fts(messages_fts, rank) VALUES ('integrity-check', 1)")
    assert conn.execute("SELECT count(*) FROM messages_fts WHERE messages_fts MATCH 'kestrel'").fetchone()[0] == 1
    code, out, _ = run(capsys, "lcm_doctor", "--json")
    storage = json.loads(out)["storage"]
    assert not storage["pending"] and storage["parts"]["searchable text"]["compressed_rows"] > 0


def test_a_vault_too_small_for_a_dictionary_is_not_packed_again_every_turn(tmp_path):
    """One session's text makes no dictionary (its lines must come from two sessions): packing
    packs the lines, leaves the text as it is, and the Stop hook's due check is quiet after."""
    from transcripts import Transcript
    t = Transcript(tmp_path / "projects", session_id="s-alone")
    for i in range(1100):
        t.user(f"turn {i}: the heron build passed")
    t.write()
    conn = lcm.vault.db.connect(str(tmp_path / "v.db"))
    lcm.capture.ingest.ingest_file(conn, t.path)
    assert lcm.vault.pack.due(conn)
    lcm.vault.pack.pack(conn, everything=True)
    assert lcm.vault.squeeze.encoder(conn) is None and not lcm.vault.pack.due(conn)
    assert lcm.vault.pack.unsqueezed(conn) == 0

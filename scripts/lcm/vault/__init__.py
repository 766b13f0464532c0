"""The vault wing: the SQLite file, its layout, and who may read what. Imports base only.

  schema    the append-only migrations and the tables they build
  purgelist the uuids of purged messages in a file beside the vault, which outlives it
  db        the one guard every vault is opened through; transactions; writers take turns
  store     stored transcript lines, plain or in compressed blocks: the only reader of `raw`
  squeeze   the searchable text, compressed row by row with a preset dictionary: the only
            reader of `messages.content`
  pack      plain lines into compressed blocks (and their text compressed), online and resumable
  order     a session's conversation order (`messages.seq`)
  grants    expansion grants and the one scope check of every reading command
  resolve   which session a command means
"""

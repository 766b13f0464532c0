"""lcm: the library behind the commands in scripts/ and the hooks in hooks/.

The package is a handful of wings, each a folder whose __init__ docstring is its map. A module
imports only its own wing and the wings before it in this order (tests/commands/test_layout.py
checks it, and that nothing imports in a cycle):

  base      errors, settings, text helpers, masking, the delegation guard, the model seam,
            commands as printed; the standard library only
  vault     the SQLite file: schema, opening, stored lines, packing, conversation order, grants,
            which session a command means
  capture   transcripts into the vault: reading lines, exclusion, large files, ingest, bulk
            import, derived search indexes
  search    a person's words to ranked results: query, one record per result type, notes,
            ranking, the search itself, its text output, recall for the prompt hook
  summary   the summary DAG: extraction, prompts, compaction, work logs, digests, checkpoints
  care      keeping the vault whole: purge, installation checks, recovery, backups, doctor
  readers   one node, session or vault as read: expand, describe, export, answer, status,
            sessions
  cli       the command skeleton every scripts/lcm_<verb>.py runs in (one module)
  maps      the llm_map and agentic_map machinery
  view      the read-only web view
  entry     the `lcm` command over the scripts (one module)

See references/architecture.md for the data paths through the wings.
"""

WINGS = ("base", "vault", "capture", "search", "summary", "care", "readers", "cli", "maps", "view", "entry")

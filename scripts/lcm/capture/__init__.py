"""The capture wing: Claude Code transcripts into the vault. Imports base and vault.

  transcript  one transcript line to a row: which file is which, the searchable text of an entry
  exclude     LCM_EXCLUDE: the projects lcm never captures, injects into or compacts
  files       large content blocks kept as files under $LCM_HOME/files
  ingest      incremental import by byte offset, deduplicated on uuid (hooks, one file)
  bulk        a large first import: files in groups, parsed in a second process
  indexes     the search indexes derived from messages (CJK runs, exchange windows, file text)
  tokens      the token counts each response reports (its usage field), kept in the usage table
"""

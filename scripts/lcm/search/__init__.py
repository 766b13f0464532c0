"""The search wing: from a person's words to ranked results. Imports base, vault and capture.

  query         user text to finished, safe FTS5 terms, parsed once
  result_types  one record per result type: its table, index, columns, head line and `Next:`
  notes         notes pinned with lcm_remember.py (a result type, injected at SessionStart)
  conversation  who talks next to whom: a hit's neighbours, for ranking
  rank          auto-mode ranking: BM25 over rarer words, then coverage, role and neighbours
  engine        one search over the result types: the --json document of lcm_grep.py
  output        that document as the text lines lcm_grep.py prints
  recall        the prompt hook's recall: strong matches only, bounded, never twice a session
"""

"""The summary wing: the DAG of summaries and what is read back from a session. Imports base,
vault, capture and search.

  failures    the line of a failed tool result that says what failed
  extract     deterministic extractive summaries (LCM_LLM=none and the fallback level)
  prompts     the summariser's prompts, read from prompts.md inside this wing (package data)
  dag         a session's active context and what to summarise next
  compact     leaf and condensed passes with escalation: normal, aggressive, deterministic
  worklog     what happened in a session, from its original lines
  digest      one page of lessons per session
  checkpoint  a session's state as markdown a later session resumes from
"""

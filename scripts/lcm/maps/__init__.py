"""The maps wing: the map tools' machinery (lcm_llm_map.py, lcm_agentic_map.py), one job a module:

  job       the command line both share, and everything checked before the first model call
  state     run state in the vault (map_runs, map_items), the output file and the summary
  worker    the one item loop (ask, parse, retry with feedback) and the bounded thread pool
  backends  how each backend asks: one call, `claude -p`, a tool loop, an agent per item
  batches   the Message Batches driver of lcm_llm_map.py --batch
  tools     the file tools an API agent gets, confined to its working directory
  run       one map run from start to end: llm_map and agentic_map, resumable

Every model call goes through lcm.base.llm.
"""

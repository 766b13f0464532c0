"""The base wing: what every other wing stands on. Standard library only at import time.

  errors    LcmError (message + hint) and the model's error kinds
  config    settings from the environment, lcm's locations, ids, time and token estimates
  text      one-line cuts, a summary's head line, an entry's content blocks, safe UTF-8 text
  mask      secrets out of everything that leaves the vault, redact.txt included
  guard     the delegation guard of lcm's own sub-agents
  llm       the model seam: every model call (anthropic SDK, `claude -p`, none); the only
            importer of anthropic
  shell     commands as printed: every `Next:` line and hint runnable where it is printed
  progress  the bar of a long run by hand on a terminal: tqdm's, else a plain line
"""

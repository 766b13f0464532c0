"""The readers wing: one node, one session or the vault as a person or Claude reads it.
Imports every wing before it.

  expand    from a summary id back to its children and original messages
  describe  one node: a summary, a stored file, a message, a session's DAG
  export    a session out of the vault as its transcript lines or markdown
  answer    a question answered from the exact messages behind summaries (expand_query)
  status    vault and session status: counts, context use, index health
  sessions  sessions as a person sees them: title, time, what they hold
  usage     tokens and cost by day, week, month, session, project or model (prices.json: the
            dated price table)
  bundle    sessions that travel: a bundle written, and merged into another vault
"""

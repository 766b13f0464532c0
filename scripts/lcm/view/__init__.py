"""The view wing: the local, read-only web view of the vault (lcm_view.py). Everything shown is
masked.

  server  answers requests: loopback only, a credential on every request, a strict
          Content-Security-Policy, a read-only connection
  pages   the sessions list, a session's conversation, its summary DAG as SVG, a node, search
  assets  the one stylesheet and script it serves
"""

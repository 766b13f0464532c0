"""The local, read-only web view of the vault (lcm_view.py): `server` answers requests (loopback
only, a token on every request, a strict Content-Security-Policy, a read-only connection), `pages`
renders the sessions list, a session's conversation, its summary DAG as SVG, a node and search,
and `assets` holds the one stylesheet and script it serves. Everything shown is masked."""

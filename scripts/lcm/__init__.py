"""lcm: the library behind the commands in scripts/ and the hooks in hooks/ (see references/architecture.md)."""

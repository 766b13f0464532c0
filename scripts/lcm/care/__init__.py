"""The care wing: keeping the vault whole. Imports every wing before it.

  purge         the one path that deletes: forgetting messages for good
  installation  what surrounds the vault: leftover files, hook runs, the plugin, the backend
  recovery      a damaged vault rebuilt from the transcripts
  backup        verified copies of the vault taken without being asked, scrubbed by purges, restored atomically
  doctor        examine() checks the vault and its surroundings, repair() fixes what it can
"""

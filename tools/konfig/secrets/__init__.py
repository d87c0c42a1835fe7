"""Secrets in the repository: SOPS-format files with age recipients, decrypted in memory.

- :mod:`konfig.secrets.sopsfile` — the SOPS file format (read, decrypt with the MAC
  check, encrypt, edit keeping unchanged ciphertext, rotate);
- :mod:`konfig.secrets.plainyaml` — the plaintext an editor shows and encrypt reads back;
- :mod:`konfig.secrets.keys` — age identities and recipients (through pyrage);
- :mod:`konfig.secrets.yamlcore` — YAML typed as the ``sops`` binary types it;
- :mod:`konfig.secrets.errors` — :class:`SecretsError`, naming file, key and line.

Nothing in this package reads the environment or prints: the CLI reads
``SOPS_AGE_KEY`` / ``SOPS_AGE_KEY_FILE`` and hands the key text in.
"""

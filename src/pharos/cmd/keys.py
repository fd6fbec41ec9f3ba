"""`pharos keys new`: a fresh client key, printed once, and the config entry holding its hash."""

from __future__ import annotations

import argparse
import re
import secrets
from typing import TextIO

from pharos.proxy.auth import hash_key

KEY_PREFIX = "pk-"
KEY_BYTES = 32
_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._@-]*")


def new_key() -> str:
    """A new client key: `pk-` + 32 random bytes, URL-safe base64."""
    return KEY_PREFIX + secrets.token_urlsafe(KEY_BYTES)


def key_entry_yaml(name: str, key: str) -> str:
    return f'  - name: {name}\n    sha256: "{hash_key(key)}"\n'


def run_keys_new(args: argparse.Namespace, out: TextIO, err: TextIO) -> int:
    name: str = args.name
    if not _NAME.fullmatch(name):
        err.write(
            f'pharos keys new: --name "{name}": use letters, digits and . _ @ - '
            "(it is how usage is recorded)\n"
        )
        return 2
    key = new_key()
    out.write(
        f"Key for {name} (shown once; Pharos stores only its hash):\n\n"
        f"  {key}\n\n"
        "Add this entry under `keys:` in the config file:\n\n"
        f"{key_entry_yaml(name, key)}"
    )
    return 0

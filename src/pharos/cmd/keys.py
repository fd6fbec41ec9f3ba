"""`pharos keys new`: a fresh client key, printed once, and the config entry holding its hash."""

from __future__ import annotations

import argparse
from typing import TextIO

from pharos.proxy.keys import KEY_NAME, key_entry_yaml, new_key


def run_keys_new(args: argparse.Namespace, out: TextIO, err: TextIO) -> int:
    name: str = args.name
    if not KEY_NAME.fullmatch(name):
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

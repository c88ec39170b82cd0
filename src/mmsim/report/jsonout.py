"""JSON output: one formatting for every command, so ``--json`` outputs diff cleanly.

Key order is the order the library builds its dicts in (``RunResult.to_dict``
documents it); it is not sorted, so the most important keys come first.
"""

from __future__ import annotations

import json


def dumps(data: object) -> str:
    """``data`` as indented JSON. Same input → byte-identical output."""
    return json.dumps(data, indent=2)

"""`mmsim machine show X --json > m.json && mmsim machine show m.json` works: the JSON is a machine file."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from mmsim.cli import main
from mmsim.machine import get_machine, list_machines

Cap = pytest.CaptureFixture[str]


@pytest.mark.parametrize("name", [n for n, _ in list_machines()])
def test_machine_show_json_is_a_machine_file(capsys: Cap, tmp_path: Path, name: str) -> None:
    assert main(["machine", "show", name, "--json"]) == 0
    out = capsys.readouterr().out
    f = tmp_path / "m.json"
    f.write_text(out)
    assert main(["machine", "show", str(f)]) == 0
    text = capsys.readouterr().out
    assert text.startswith(f"{name}: ")
    assert get_machine(str(f)) == get_machine(name)  # the same machine, field for field
    assert main(["machine", "show", str(f), "--json"]) == 0
    assert json.loads(capsys.readouterr().out) == json.loads(out)

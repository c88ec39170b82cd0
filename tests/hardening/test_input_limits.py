"""The bounded loader (:mod:`mmsim.inputs`) and the checks behind it: each hostile input of issue 23 and the
message rules of issue 24 section 5, with the exact line the user sees."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
import yaml

from mmsim import inputs
from mmsim.cli import main
from mmsim.errors import UserError
from mmsim.machine import get_machine, machine_to_dict


def _err(capsys: pytest.CaptureFixture[str], argv: list[str]) -> str:
    assert main(argv) == 2
    lines = capsys.readouterr().err.splitlines()
    assert len(lines) == 1, lines
    return lines[0]


def _machine_yaml(tmp_path: Path, edit: str = "", **changes: object) -> Path:
    d = machine_to_dict(get_machine("tiny"))
    for k, v in changes.items():
        d[k] = v
    p = tmp_path / "m.yaml"
    p.write_text(yaml.safe_dump(d) + edit)
    return p


def test_device_and_directory_refused_before_reading(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    assert _err(capsys, ["machine", "show", "/dev/zero"]) == (
        "mmsim: error: /dev/zero: invalid value 'a character device'; allowed: a machine YAML file (a regular file)")
    assert _err(capsys, ["plot", "scaling", "/dev/zero", "-o", str(tmp_path / "x.png")]) == (
        "mmsim: error: INPUT /dev/zero: invalid value 'a character device'; allowed: a JSON file (a regular file)")
    os.mkfifo(tmp_path / "fifo")  # opened non-blocking: no writer needed for the refusal
    assert "invalid value 'a FIFO'" in _err(capsys, ["machine", "show", str(tmp_path / "fifo")])
    assert "invalid value 'a directory'" in _err(capsys, ["report", str(tmp_path), "-o", str(tmp_path / "r.html")])


def test_size_limit(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    p = tmp_path / "big.yaml"
    with open(p, "wb") as f:
        f.truncate(10 << 20)
    assert _err(capsys, ["machine", "show", str(p)]) == (
        f"mmsim: error: {p}: invalid value '10,485,760 bytes'; allowed: a machine YAML file of at most 256 KiB")


def test_alias_bomb_and_recursive_alias(tmp_path: Path) -> None:
    lines = ["a0: &a0 [lol, lol, lol, lol, lol, lol, lol, lol, lol]"]
    lines += [f"a{i}: &a{i} [{', '.join([f'*a{i - 1}'] * 9)}]" for i in range(1, 9)]
    with pytest.raises(UserError) as e:
        inputs.parse_yaml("\n".join(lines), "f", "x")
    assert str(e.value.value).startswith("an alias bomb: over 200,000 nodes with aliases expanded at line")
    few = "base: &b v3.12\nname: *b\n"  # aliases as such are fine
    assert inputs.parse_yaml(few, "f", "x") == {"base": "v3.12", "name": "v3.12"}
    with pytest.raises(UserError) as e:
        inputs.parse_yaml("a: &a [*a]\n", "f", "x")
    assert str(e.value.value).startswith("a recursive alias")


def test_depth(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    p = tmp_path / "deep.yaml"
    p.write_text("name: " + "[" * 1000 + "]" * 1000 + "\n")
    assert _err(capsys, ["machine", "show", str(p)]) == (
        f"mmsim: error: {p}: invalid value 'nesting deeper than 32 levels at line 1, column 38'; allowed: a YAML "
        "mapping with keys name, description, freq_ghz, sockets, caches, nodes, distances, cost")
    j = tmp_path / "deep.json"
    j.write_text("[" * 100000 + "]" * 100000)
    assert "invalid value 'nesting deeper than 32 levels'" in _err(capsys, ["report", str(j), "-o", "r.html"])
    assert inputs.parse_json("[" * 32 + "]" * 32, "f", "x") is not None  # 32 is allowed
    with pytest.raises(UserError) as e:
        inputs.parse_json("[" + ",".join(["[]"] * 250_001) + "]", "f", "x")
    assert e.value.value == "more than 250,000 arrays and objects"
    with pytest.raises(UserError):
        inputs.parse_json("[" * 33 + "]" * 33, "f", "x")


def test_utf8_offset(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    p = tmp_path / "m.yaml"
    p.write_bytes(b"name: x\n" * 2000 + b"\xff")
    assert _err(capsys, ["machine", "show", str(p)]) == (
        f"mmsim: error: {p}: invalid value 'not UTF-8 (byte offset 16000)'; allowed: a machine YAML file in UTF-8")


def test_duplicate_key_and_big_ints() -> None:
    with pytest.raises(UserError) as e:
        inputs.parse_yaml("name: a\nbase: v3.12\nname: b\n", "k.yaml", "x")
    assert e.value.value == "duplicate key 'name' at line 3, column 1"
    with pytest.raises(UserError) as e:
        inputs.parse_yaml("x: " + "9" * 5000, "f", "x")
    assert e.value.value == "an integer of more than 40 digits at line 1, column 4"
    assert inputs.parse_yaml("<<: {a: 1}\na: 2\n", "f", "x") == {"a": 2}  # a merge key may be overridden
    for text, value in (('{"a": 1e400}', "a number out of range (1e400)"), ("[NaN]", "NaN (not a JSON number)"),
                        ("[" + "9" * 5000 + "]", "an integer of more than 40 digits")):
        with pytest.raises(UserError) as e:
            inputs.parse_json(text, "f", "x")
        assert e.value.value == value


def test_machine_ranges(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    d = machine_to_dict(get_machine("tiny"))
    d["nodes"][1]["latency_ns"] = 10**39
    p = tmp_path / "m.yaml"
    p.write_text(yaml.safe_dump(d))
    assert _err(capsys, ["machine", "show", str(p)]) == (
        f"mmsim: error: {p}: nodes[1].latency_ns: invalid value 1000000000000000000000000000000000000000; "
        "allowed: a number from 0.1 to 10000000 (ns: 0.1 ns to 10 ms)")
    d["nodes"][1]["latency_ns"] = 80.0
    d["freq_ghz"] = 1e-9
    p.write_text(yaml.safe_dump(d))
    assert _err(capsys, ["machine", "show", str(p)]).endswith(
        "freq_ghz: invalid value 1e-09; allowed: a number from 0.1 to 10 (GHz)")
    d["freq_ghz"] = 1.0
    d["cost"]["page_fault_ns"] = float("inf")
    p.write_text(yaml.safe_dump(d))
    assert _err(capsys, ["machine", "show", str(p)]).endswith(
        "cost.page_fault_ns: invalid value inf; allowed: a number from 0.1 to 10000000 (ns: 0.1 ns to 10 ms)")


def test_no_file_content_echoed(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    p = tmp_path / "shadow"
    p.write_text("root:$6$salt$HASHHASH:19000:0:99999:7:::\ndaemon:*:19000:0:99999:7:::\n")
    line = _err(capsys, ["run", "lockstress", "-m", str(p)])
    assert "HASHHASH" not in line and "$6$" not in line and "daemon" not in line
    assert line == (f"mmsim: error: {p}: <a key that is not a field name>: invalid value 'unknown key'; allowed: "
                    "keys of the top level: name, description, freq_ghz, sockets, caches, nodes, distances, cost, "
                    "sources")


def test_report_and_plot_kinds(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    p = tmp_path / "s.json"
    p.write_text(json.dumps({"kind": "sweep", "workload": "lockstress"}))
    assert _err(capsys, ["plot", "profile", str(p), "-o", str(tmp_path / "x.png")]) == (
        "mmsim: error: INPUT: invalid value 'a sweep result'; allowed: `mmsim plot profile` takes compare results "
        "(see docs/cli.md)")
    assert _err(capsys, ["report", str(p), "-o", str(tmp_path / "r.html")]) == (
        "mmsim: error: INPUT: sweep result: grid: invalid value '<missing>'; allowed: a required field (the --json "
        "output of mmsim sweep)")
    p.write_text(json.dumps({"name": "tiny"}))
    assert _err(capsys, ["report", str(p), "-o", str(tmp_path / "r.html")]) == (
        "mmsim: error: INPUT: invalid value 'not an mmsim result (a JSON object without a kind)'; allowed: "
        "`mmsim report` takes compare/sweep/bisect/run/reproduce results (see docs/cli.md)")


@pytest.mark.parametrize(("argv", "line"), [
    (["run", "pmbench", "-p", "shape=1e400"], "-p shape: invalid value '1e400'; allowed: a number > 0, finite"),
    (["run", "lockstress", "-p", "tasks=\u0661"], "-p tasks: invalid value '\u0661'; allowed: an integer >= 1 "
     "(printable ASCII, at most 200 characters)"),
    (["run", "pmbench", "-p", "basecpu=18446744073709551616"],
     "-p basecpu: invalid value '18446744073709551616'; allowed: an integer >= 0, at most 2^63-1"),
    (["run", "pmbench", "-p", "basecpu=9"], "-p basecpu: invalid value 9; allowed: an integer from 0 to 7 on tiny"),
    (["run", "lockstress", "--set", "stat_interval_ms=99999999999"],
     "--set.stat_interval_ms: invalid value '99999999999'; allowed: an integer 0..2147483647 "
     "(proc_dointvec_jiffies: an int)"),
    (["sweep", "lockstress", "--executor", "dask", "--scheduler", "tcp://[::1", "--no-store"],
     "--scheduler: invalid value 'tcp://[::1'; allowed: a Dask scheduler address SCHEME://HOST[:PORT] like "
     "tcp://node1:8786 (SCHEME tcp, tls, ws, wss; HOST a name, an IPv4 address or [IPv6]; PORT 1..65535)"),
    (["bisect", "lockstress", "--good", "v3.12", "--bad", "v4.14", "--threshold", "nan", "--no-store"],
     "--threshold: invalid value nan; allowed: a finite percentage > 0"),
    (["bisect", "lockstress", "--good", "v3.12", "--bad", "v4.14", "--max-spread", "-inf", "--no-store"],
     "--max-spread: invalid value -inf; allowed: a finite percentage >= 0"),
    (["bisect", "lockstress", "--good", "v3.12", "--bad", "v4.14", "--max-runs", "0", "--no-store"],
     "--max-runs: invalid value 0; allowed: an integer >= 1 (default 3 x --runs)"),
    (["machine"], "COMMAND: missing; allowed: one of the commands listed above"),
])
def test_option_errors(capsys: pytest.CaptureFixture[str], argv: list[str], line: str) -> None:
    assert main(argv) == 2
    assert capsys.readouterr().err.splitlines()[-1] == "mmsim: error: " + line


def test_scheduler_addresses() -> None:
    for ok in ("tcp://127.0.0.1:8786", "tcp://[::1]:8786", "tls://node-1.example:8786", "tcp://h"):
        assert inputs.check_scheduler(ok) == ok
    for bad in ("tcp://[::1", "localhost:1", "tcp://h:0", "tcp://h:99999", "tcp://a b:1", "udp://h:1", "tcp://",
                "tls://[::1]]:1", "tcp://[::1]x:1", "tcp://u@h:1", "tcp://h:1/x", "tcp://h:1?y", "", " "):
        with pytest.raises(UserError):
            inputs.check_scheduler(bad)


def test_long_values_are_cut() -> None:
    e = UserError("f", "x" * 1000, "y")
    assert str(e) == "f: invalid value '" + "x" * 76 + "...; allowed: y"

"""Bounded reading of every file the CLI takes: machine, kernel, patch and series YAML, result JSON.

A hostile or mistaken file (a device, a 10 MB file, a YAML alias bomb,
nesting 1000 deep, a 5000-digit integer, bytes that are not UTF-8) becomes one
:class:`~mmsim.errors.UserError` line, never a hang, a ``MemoryError`` or a
traceback. The limits (documented in docs/reliability.md, "Input limits"):

- only regular files are read (no devices, FIFOs or directories), opened
  non-blocking so that a FIFO cannot stall the open;
- at most :data:`MAX_YAML_BYTES` of YAML and :data:`MAX_JSON_BYTES` of JSON,
  checked with ``fstat`` before reading and again while reading;
- UTF-8 only; the error names the byte offset of the first bad byte;
- nesting at most :data:`MAX_DEPTH` levels;
- YAML anchors and aliases are allowed, but the document with every alias
  expanded may have at most :data:`MAX_YAML_NODES` nodes (a "billion laughs"
  bomb expands to ~10^9), and a recursive alias is refused;
- duplicate mapping keys are an error (YAML would keep the last silently);
- integers have at most :data:`MAX_INT_DIGITS` digits, and JSON has no
  NaN/Infinity (``1e400`` is infinite, so also refused).

Error messages quote at most the offending key, and only when it looks like a
field name (:func:`quote_key`): a wrong file (``-m /etc/shadow``) never has
its content echoed.
"""

from __future__ import annotations

import json
import math
import os
import re
import stat
from pathlib import Path
from typing import Any

import yaml

from mmsim.errors import UserError

MAX_YAML_BYTES = 256 << 10  # 8x the largest preset's YAML (sgi-uv2000-512, 64 nodes: 30 KB)
MAX_JSON_BYTES = 16 << 20  # a saved sweep of ~1,000 points (~15 KB each); worst case ~20x this in memory
MAX_JSON_CONTAINERS = 250_000  # a saved sweep has ~85 per point (~5.5 per KB): 2.7x what 16 MiB of results hold
MAX_DEPTH = 32  # machine YAML nests 4 deep, result JSON 7 deep
MAX_YAML_NODES = 200_000  # expanded node count (aliases counted as copies); sgi-uv2000-512 has ~5,500
MAX_INT_DIGITS = 40  # 2^128 has 39 digits; Python itself refuses int() of more than 4300

_KEY_RE = re.compile(r"[A-Za-z_][A-Za-z0-9_.\-]{0,63}")


def quote_key(key: object) -> str:
    """``key`` for an error message if it looks like a field name, else a placeholder (never file content)."""
    if isinstance(key, str) and _KEY_RE.fullmatch(key):
        return key
    return "<a key that is not a field name>"


def _size_text(n: int) -> str:
    return f"{n >> 20} MiB" if n >= 1 << 20 else f"{n >> 10} KiB"


def kind_of(mode: int) -> str:
    """What a non-regular file is ("a directory", "a FIFO", ...), for an error message."""
    for test, name in ((stat.S_ISDIR, "a directory"), (stat.S_ISCHR, "a character device"),
                       (stat.S_ISBLK, "a block device"), (stat.S_ISFIFO, "a FIFO"), (stat.S_ISSOCK, "a socket")):
        if test(mode):
            return name
    return "not a regular file"


def read_text(path: str | Path, field: str, what: str, limit: int) -> str:
    """The UTF-8 text of regular file ``path``, at most ``limit`` bytes; else a UserError on ``field``.

    ``what`` describes the file wanted ("a machine YAML file") for the message's "allowed" part.
    """
    p = str(path)
    try:
        fd = os.open(p, os.O_RDONLY | os.O_NONBLOCK | os.O_NOCTTY | getattr(os, "O_CLOEXEC", 0))
    except OSError as e:
        raise UserError(field, p, f"{what} that exists and is readable ({e.strerror or type(e).__name__})") from None
    except ValueError:  # an embedded NUL byte in the path
        raise UserError(field, p, f"{what} (a path without NUL bytes)") from None
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise UserError(field, kind_of(st.st_mode), f"{what} (a regular file)")
        if st.st_size > limit:
            raise UserError(field, f"{st.st_size:,} bytes", f"{what} of at most {_size_text(limit)}")
        chunks: list[bytes] = []
        total = 0
        while True:  # the file may grow after fstat: never read more than limit + 1 bytes
            b = os.read(fd, min(1 << 20, limit + 1 - total))
            if not b:
                break
            chunks.append(b)
            total += len(b)
            if total > limit:
                raise UserError(field, f"more than {limit:,} bytes", f"{what} of at most {_size_text(limit)}")
    except OSError as e:
        raise UserError(field, p, f"{what} that is readable ({e.strerror or type(e).__name__})") from None
    finally:
        os.close(fd)
    data = b"".join(chunks)
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as e:
        raise UserError(field, f"not UTF-8 (byte offset {e.start})", f"{what} in UTF-8") from None


# -- YAML ----------------------------------------------------------------------------------


class InputLimit(yaml.YAMLError):
    """A bound of this module was exceeded (a YAMLError, so callers' YAML handling sees it)."""

    def __init__(self, problem: str, mark: Any = None) -> None:
        super().__init__(problem)
        self.problem = problem
        self.problem_mark = mark


class _Loader(yaml.SafeLoader):
    """PyYAML's safe loader with the limits above; pure Python, so every step is bounded by the checks."""

    def __init__(self, stream: str) -> None:
        super().__init__(stream)
        self._depth = 0

    def compose_node(self, parent: Any, index: Any) -> Any:
        self._depth += 1
        try:
            if self._depth > MAX_DEPTH:
                raise InputLimit(f"nesting deeper than {MAX_DEPTH} levels", self.peek_event().start_mark)  # type: ignore[no-untyped-call]
            return super().compose_node(parent, index)
        finally:
            self._depth -= 1

    def compose_document(self) -> Any:
        node = super().compose_document()
        _check_expanded(node)
        return node

    def construct_yaml_int(self, node: Any) -> int:
        value = str(node.value)
        if sum(c.isdigit() for c in value) > MAX_INT_DIGITS:
            raise InputLimit(f"an integer of more than {MAX_INT_DIGITS} digits", node.start_mark)
        n: int = super().construct_yaml_int(node)
        return n

    def construct_mapping(self, node: Any, deep: bool = False) -> dict[Any, Any]:
        if isinstance(node, yaml.MappingNode):
            seen: set[Any] = set()
            for key_node, _ in node.value:
                if key_node.tag == "tag:yaml.org,2002:merge" or not isinstance(key_node, yaml.ScalarNode):
                    continue  # merge keys may be overridden; unhashable keys are refused by PyYAML
                key = self.construct_object(key_node)
                try:
                    dup = key in seen
                    seen.add(key)
                except TypeError:
                    continue
                if dup:
                    raise InputLimit(f"duplicate key {quote_key(key)!r}", key_node.start_mark)
        m: dict[Any, Any] = super().construct_mapping(node, deep)
        return m


_Loader.add_constructor("tag:yaml.org,2002:int", _Loader.construct_yaml_int)


def _check_expanded(root: Any) -> None:
    """Refuse a recursive alias, and a document whose alias-expanded size exceeds MAX_YAML_NODES."""
    sizes: dict[int, int] = {}
    active: set[int] = set()

    def size(node: Any) -> int:  # depth is bounded by MAX_DEPTH, so recursion is too
        k = id(node)
        if k in sizes:
            return sizes[k]
        if k in active:
            raise InputLimit("a recursive alias", node.start_mark)
        active.add(k)
        n = 1
        if isinstance(node, yaml.SequenceNode):
            n += sum(size(c) for c in node.value)
        elif isinstance(node, yaml.MappingNode):
            n += sum(size(a) + size(b) for a, b in node.value)
        active.discard(k)
        if n > MAX_YAML_NODES:
            raise InputLimit(f"an alias bomb: over {MAX_YAML_NODES:,} nodes with aliases expanded",
                             node.start_mark)
        sizes[k] = n
        return n

    if root is not None:
        size(root)


def yaml_problem(e: yaml.YAMLError) -> str:
    """A YAML error as a short phrase with its line and column; never the file's text."""
    problem = getattr(e, "problem", None) or type(e).__name__
    mark = getattr(e, "problem_mark", None)
    where = f" at line {mark.line + 1}, column {mark.column + 1}" if mark is not None else ""
    return " ".join(f"{problem}{where}".split())


def parse_yaml(text: str, field: str, what: str) -> Any:
    """Parse YAML ``text`` within the limits; any problem is a UserError on ``field``."""
    try:
        return yaml.load(text, Loader=_Loader)
    except yaml.YAMLError as e:
        raise UserError(field, yaml_problem(e), what) from None
    except RecursionError:  # not reachable with MAX_DEPTH, kept as a backstop
        raise UserError(field, f"nesting deeper than {MAX_DEPTH} levels", what) from None


def load_yaml(path: str | Path, field: str, what: str, hint: str | None = None) -> Any:
    """Read and parse a YAML file within every limit above. ``what`` names the file wanted ("a kernel YAML
    file"), ``hint`` the content wanted (for parse errors; default ``what``)."""
    return parse_yaml(read_text(path, field, what, MAX_YAML_BYTES), field, hint or what)


# -- JSON ----------------------------------------------------------------------------------


def _json_int(s: str) -> int:
    if len(s.lstrip("-")) > MAX_INT_DIGITS:
        raise ValueError(f"an integer of more than {MAX_INT_DIGITS} digits")
    return int(s)


def _json_float(s: str) -> float:
    f = float(s)
    if not math.isfinite(f):
        raise ValueError(f"a number out of range ({s[:20]})")
    return f


def _json_constant(s: str) -> Any:
    raise ValueError(f"{s} (not a JSON number)")


def _depth(obj: Any) -> int:
    """Nesting depth of parsed JSON, up to MAX_DEPTH + 1: a depth-first walk whose stack holds one iterator
    per open level, so it costs no memory however many nodes there are."""
    stack = [iter((obj,))]
    deepest = 0
    while stack:
        for child in stack[-1]:
            if isinstance(child, (dict, list)):
                stack.append(iter(child.values() if isinstance(child, dict) else child))
                deepest = max(deepest, len(stack) - 1)
                if deepest > MAX_DEPTH:
                    return deepest
                break
        else:
            stack.pop()
    return deepest


def parse_json(text: str, field: str, what: str) -> Any:
    # bound the parse's memory before it starts: each array/object costs json.loads ~60-100 bytes, numbers and
    # strings are bounded by the size limit (brackets inside strings are counted too: an over-estimate)
    if text.count("[") + text.count("{") > MAX_JSON_CONTAINERS:
        raise UserError(field, f"more than {MAX_JSON_CONTAINERS:,} arrays and objects", what)
    try:
        data = json.loads(text, parse_int=_json_int, parse_float=_json_float, parse_constant=_json_constant)
    except json.JSONDecodeError as e:
        raise UserError(field, f"not JSON ({e.msg} at line {e.lineno}, column {e.colno})", what) from None
    except ValueError as e:
        raise UserError(field, str(e), what) from None
    except RecursionError:
        raise UserError(field, f"nesting deeper than {MAX_DEPTH} levels", what) from None
    except MemoryError:
        raise UserError(field, "too large to parse in memory", what) from None
    if _depth(data) > MAX_DEPTH:  # only containers are visited: a 32 MiB list of numbers costs nothing here
        raise UserError(field, f"nesting deeper than {MAX_DEPTH} levels", what)
    return data


def load_json(path: str | Path, field: str, what: str, hint: str | None = None) -> Any:
    """Read and parse a JSON file within the limits above (``what``, ``hint``: as for :func:`load_yaml`)."""
    return parse_json(read_text(path, field, what, MAX_JSON_BYTES), field, hint or what)


# -- addresses -----------------------------------------------------------------------------

SCHEDULER_SCHEMES = ("tcp", "tls", "ws", "wss", "inproc")
_HOST_RE = re.compile(r"[A-Za-z0-9](?:[A-Za-z0-9-]{0,62})(?:\.[A-Za-z0-9](?:[A-Za-z0-9-]{0,62}))*\.?")
_SCHED_ALLOWED = ("a Dask scheduler address SCHEME://HOST[:PORT] like tcp://node1:8786 (SCHEME tcp, tls, ws, wss; "
                  "HOST a name, an IPv4 address or [IPv6]; PORT 1..65535)")


_NETLOC_RE = re.compile(r"(?:\[(?P<v6>[0-9A-Fa-f:.]+)\]|(?P<host>[^\[\]:/@?#]+))(?::(?P<port>[0-9]{1,5}))?")


def check_scheduler(address: str, field: str = "--scheduler") -> str:
    """A Dask scheduler address, checked before Dask parses it (Dask raises a bare ValueError on ``tcp://[::1``).

    ``SCHEME://NETLOC`` with NETLOC exactly ``HOST[:PORT]`` or ``[IPv6][:PORT]``; nothing else (no path,
    user, query, second bracket).
    """
    import ipaddress

    def bad() -> UserError:
        return UserError(field, address, _SCHED_ALLOWED)

    if not isinstance(address, str) or not address.isascii() or not address.isprintable() or len(address) > 300:
        raise bad()
    scheme, sep, rest = address.partition("://")
    if not sep:
        raise bad()
    if scheme == "inproc":  # inproc://IP/PID/N: Dask's in-process transport
        if not rest:
            raise bad()
        return address
    m = _NETLOC_RE.fullmatch(rest.removesuffix("/"))
    if scheme not in SCHEDULER_SCHEMES or m is None:
        raise bad()
    if m["port"] is not None and not 1 <= int(m["port"]) <= 65535:
        raise bad()
    if m["v6"] is not None:
        try:
            ipaddress.IPv6Address(m["v6"])
        except ValueError:
            raise bad() from None
    elif not _HOST_RE.fullmatch(m["host"]):
        raise bad()
    return address

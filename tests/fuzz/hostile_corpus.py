"""A hostile-input generator for the mmsim CLI, and a runner that contains what it triggers.

The classes are those an independent fuzzer used against main 5cd2754 (issue 23):
alias bombs, huge files, devices/FIFOs/directories, deep nesting, huge
integers, inf/NaN and out-of-range numbers, wrong-kind and truncated result
JSON, bad encodings, bad scheduler addresses; plus duplicate keys, files that
must not be echoed (a shadow-like file), non-ASCII digits and bad bisect
options (issue 24 section 5). :func:`cases` draws them from a seeded RNG.

:func:`run_case` runs one case in a forked child of the test process (which
has imported mmsim once, so a case costs milliseconds, not an interpreter
start): the child gets ``RLIMIT_AS`` = the parent's address space + 512 MiB,
its stdout/stderr go to files, and the parent kills it after 5 s. A hang or a
memory blow-up is a failed case, never a stuck machine.
"""

from __future__ import annotations

import copy
import json
import os
import random
import resource
import signal
import sys
import time
import traceback
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

WALL_SECONDS = 5.0
MEMORY_BYTES = 512 << 20  # on top of the parent's address space at fork
SECRET = "S3CRET$HASH9f8e7d"  # planted in files that must never be echoed (not a field-like name: has a $)

CLASSES = ("alias-bomb", "huge-file", "device", "depth", "huge-int", "inf-nan", "wrong-kind", "encoding",
           "address", "duplicate-key", "no-echo", "non-ascii", "bisect-options", "range")

File = bytes | tuple[str, int]  # content, or ("sparse", size) / ("fifo", 0) / ("dir", 0)


@dataclass
class Case:
    klass: str
    argv: list[str]
    files: dict[str, File] = field(default_factory=dict)
    secret: bool = False  # SECRET must not appear in the output
    expect: str | None = None  # the case must fail (exit 2) with this text in its line, e.g. the field

    def label(self) -> str:
        return f"{self.klass}: mmsim {' '.join(a[:40] for a in self.argv)}"


@dataclass
class Outcome:
    rc: int | None  # None: killed after WALL_SECONDS
    stdout: str
    stderr: str
    seconds: float
    signal: int | None = None

    def problem(self, case: Case) -> str | None:
        """Why this outcome breaks the input contract, or None."""
        if self.rc is None:
            return f"hang (killed after {WALL_SECONDS:g} s)" if self.signal is None else f"signal {self.signal}"
        if "Traceback" in self.stderr or "MemoryError" in self.stderr:
            return "traceback: " + self.stderr.strip().splitlines()[-1][:200]
        if case.secret and (SECRET in self.stderr or SECRET in self.stdout):
            return f"echoed the file's content: {self.stderr.strip()[:200]}"
        lines = self.stderr.strip().splitlines()
        if case.expect is not None and (self.rc != 2 or not lines or case.expect not in lines[-1]):
            return f"expected exit 2 naming {case.expect!r}; got exit {self.rc}: {self.stderr.strip()[-200:]!r}"
        if self.rc == 0:
            return None
        if self.rc not in (1, 2):
            return f"exit {self.rc}"
        if len(lines) != 1 or not lines[0].startswith("mmsim: error: "):
            return f"exit {self.rc} without one error line: {self.stderr[-300:]!r}"
        return None


# -- building blocks -----------------------------------------------------------------------


def _dump(d: Any) -> bytes:
    import yaml

    return yaml.safe_dump(d, sort_keys=False).encode()


def _bomb(r: random.Random, shape: str) -> str:
    levels, width = r.randint(6, 12), r.randint(6, 12)
    lines = [f"a0: &a0 [{', '.join(['lol'] * width)}]"]
    for i in range(1, levels):
        refs = ", ".join([f"*a{i - 1}"] * width)
        lines.append(f"a{i}: &a{i} [{refs}]" if shape == "list" else
                     f"a{i}: &a{i} {{{', '.join(f'k{j}: *a{i - 1}' for j in range(width))}}}")
    if shape == "unused":  # anchors under a key no schema reads
        return "name: x\nunused:\n" + "".join(f"  {ln}\n" for ln in lines)
    return "\n".join(lines) + f"\nname: *a{levels - 1}\n"


def _deep_yaml(r: random.Random, depth: int) -> str:
    style = r.choice(["flow-list", "flow-map", "block"])
    if style == "flow-list":
        return "name: " + "[" * depth + "]" * depth + "\n"
    if style == "flow-map":
        return "name: " + "{a: " * depth + "1" + "}" * depth + "\n"
    return "".join(" " * i + "k:\n" for i in range(depth)) + " " * depth + "v: 1\n"


def _deep_json(r: random.Random, depth: int) -> str:
    if r.random() < 0.5:
        return "[" * depth + "]" * depth
    return '{"kind": "sweep", "grid": ' + '{"a": ' * depth + "1" + "}" * depth + "}"


def _set_path(d: Any, r: random.Random, value: Any) -> None:
    """Replace one random numeric leaf of ``d`` with ``value``."""
    leaves: list[tuple[Any, Any]] = []

    def walk(x: Any) -> None:
        items = x.items() if isinstance(x, dict) else enumerate(x) if isinstance(x, list) else ()
        for k, v in items:
            if isinstance(v, (int, float)) and not isinstance(v, bool):
                leaves.append((x, k))
            else:
                walk(v)

    walk(d)
    if leaves:
        parent, key = r.choice(leaves)
        parent[key] = value


def _yaml_number(r: random.Random) -> str:
    return r.choice([".inf", "-.inf", ".nan", ".NaN", "1.0e400", "-1.0e400", "1e39", "1.0e39", "1e-39",
                     "1" + "0" * r.randint(39, 60), "9" * r.randint(41, 6000), "0x" + "f" * r.randint(30, 200),
                     "-" + "1" * r.randint(20, 50), "0", "-0.0", "1e-400", "2.5e-320", "0o777777777777777"])


# -- the corpus ----------------------------------------------------------------------------


class Corpus:
    """Seeds: a valid machine dict, kernel and series YAML, and saved results of every kind."""

    def __init__(self, machine: dict[str, Any], results: dict[str, Any]) -> None:
        self.machine = machine
        self.results = results  # kind -> parsed JSON

    def machine_case(self, r: random.Random, text: bytes, klass: str, secret: bool = False) -> Case:
        use = r.choice(["show", "show", "run", "compare", "kernel", "series"])
        if use == "show":
            argv = ["machine", "show", "m.yaml"] + (["--json"] if r.random() < 0.3 else [])
        elif use == "run":
            argv = ["run", "lockstress", "-m", "m.yaml", "-p", "iterations=5", "--max-events", "1000"]
        elif use == "compare":
            argv = ["compare", "lockstress", "-k", "v3.12", "-k", "v4.14", "-m", "m.yaml", "-r", "1",
                    "--no-store", "--executor", "serial", "--max-events", "1000"]
        elif use == "kernel":
            argv = ["run", "lockstress", "-k", "m.yaml", "-p", "iterations=5", "--max-events", "1000"]
        else:
            argv = ["bisect", "lockstress", "--series", "m.yaml", "-r", "1", "--no-store", "--executor", "serial",
                    "--max-events", "1000"]
        return Case(klass, argv, {"m.yaml": text}, secret)

    def json_case(self, r: random.Random, text: bytes, klass: str) -> Case:
        cmd = r.choice(["report", "scaling", "profile", "locks"])
        argv = ["report", "in.json", "-o", "out.html"] if cmd == "report" else \
            ["plot", cmd, "in.json", "-o", r.choice(["out.png", "out.svg"])]
        return Case(klass, argv, {"in.json": text})

    def case(self, r: random.Random, klass: str) -> Case:
        if klass == "alias-bomb":
            return self.machine_case(r, _bomb(r, r.choice(["list", "map", "unused"])).encode(), klass)
        if klass == "huge-file":
            how = r.choice(["yaml-real", "yaml-sparse", "json-real", "json-sparse"])
            if how == "yaml-real":  # real bytes: just past the limit, or 10 MB
                body = b"name: x\nsources:\n" + b"".join(b"  k%d: text\n" % i for i in range(r.choice([30000, 40000])))
                return self.machine_case(r, body * r.choice([1, 1, 20]), klass)
            if how == "json-real":  # 2 MB of valid JSON of no kind (under the limit: parsed, then refused)
                return self.json_case(r, json.dumps([1] * (1 << 20)).encode(), klass)
            size = r.choice([300 << 10, 1 << 20, 10 << 20, 64 << 20, 1 << 30, 1 << 40])  # sparse: any size, instantly
            c = self.machine_case(r, b"", klass) if how == "yaml-sparse" else self.json_case(r, b"", klass)
            c.files = {name: ("sparse", size) for name in c.files}
            return c
        if klass == "device":
            target = r.choice(["/dev/zero", "/dev/null", "/dev/urandom", "/dev/full", "fifo", "dir", "dir.yaml",
                               "/proc/self/mem", "/dev/stdin", "/proc/self/fd/0"])
            files: dict[str, File] = {target: ("fifo", 0) if target == "fifo" else ("dir", 0)} \
                if not target.startswith("/") else {}
            argv = r.choice([["machine", "show", target], ["run", "lockstress", "-m", target],
                             ["run", "lockstress", "-k", target], ["plot", "scaling", target, "-o", "x.png"],
                             ["report", target, "-o", "r.html"], ["bisect", "lockstress", "--series", target,
                                                                 "--no-store"]])
            return Case(klass, argv, files)
        if klass == "depth":
            depth = r.choice([33, 100, 1000, 1000, 5000, 50000])
            if r.random() < 0.5:
                return self.machine_case(r, _deep_yaml(r, min(depth, 20000)).encode(), klass)
            return self.json_case(r, _deep_json(r, depth).encode(), klass)
        if klass in ("huge-int", "inf-nan", "range"):
            if r.random() < 0.6:
                m = copy.deepcopy(self.machine)
                _set_path(m, r, "__N__")
                text = _dump(m).decode().replace("__N__", _yaml_number(r) if klass != "range" else
                                                 r.choice(["1e-9", "0.01", "1000000000", "99999", "-1", "0"]))
                return self.machine_case(r, text.encode(), klass)
            if r.random() < 0.5:
                kind = r.choice(sorted(self.results))
                d = copy.deepcopy(self.results[kind])
                _set_path(d, r, "__N__")
                num = r.choice(["NaN", "Infinity", "-Infinity", "1e400", "-1e400", "9" * r.randint(41, 6000)])
                return self.json_case(r, json.dumps(d).replace('"__N__"', num).encode(), klass)
            v = r.choice(["inf", "nan", "-inf", "1e400", "1e39", "9" * r.randint(20, 5000), "2^64",
                          "18446744073709551616", "-1", "0", "1e-400", "0x" + "f" * 40, "1_0", "+5", " 7 "])
            wl, key = r.choice([("pmbench", "shape"), ("pmbench", "duration"), ("pmbench", "memhog_exit"),
                                ("pmbench", "basecpu"), ("pmbench", "jobs"), ("lockstress", "tasks"),
                                ("lmbench/bw_unix", "msg"), ("thp_memscale", "bytes"),
                                ("vm-scalability/anon-w-seq", "size"), ("will-it-scale/page_fault1", "nr_task")])
            argv = r.choice([["run", wl, "-p", f"{key}={v}"], ["run", "lockstress", "--set", f"stat_interval_ms={v}"],
                             ["run", "lockstress", "--max-events", v], ["run", "lockstress", "--max-memory", v]])
            return Case(klass, argv + ["--max-events", "1000"] if "--max-events" not in argv else argv)
        if klass == "wrong-kind":
            kind = r.choice(sorted(self.results))
            d: Any = copy.deepcopy(self.results[kind])
            how = r.choice(["as-is", "drop", "retype", "kind", "wrap"])
            if how == "drop" and isinstance(d, dict) and d:
                for k in r.sample(sorted(d), r.randint(1, min(3, len(d)))):
                    if k != "kind" or r.random() < 0.3:
                        del d[k]
            elif how == "retype" and isinstance(d, dict):
                k = r.choice(sorted(d))
                d[k] = r.choice([None, 1, "x", [], {}, [1, 2], {"a": None}])
            elif how == "kind" and isinstance(d, dict):
                d["kind"] = r.choice(["run", "reproduce", "bogus", 7, None, "sweep", "compare", "bisect"])
            elif how == "wrap":
                d = r.choice([[d], {"result": d}, "text", 3, None, [], {}])
            return self.json_case(r, json.dumps(d).encode(), klass)
        if klass == "encoding":
            base = _dump(self.machine) if r.random() < 0.6 else json.dumps(self.results["sweep"]).encode()
            off = r.randint(8192, max(8193, len(base) - 1)) if len(base) > 8193 else r.randint(0, len(base))
            bad = r.choice([b"\xff", b"\xfe\xff", b"\xc3", b"\xed\xa0\x80", b"\x80\x80", b"\x00", b"\xf8\x88\x80\x80"])
            text = base[:off] + bad + base[off:]
            if r.random() < 0.2:
                text = b"\xff\xfe" + base.decode().encode("utf-16-le")
            if base.startswith(b"{"):
                return self.json_case(r, text, klass)
            return self.machine_case(r, text, klass)
        if klass == "address":
            addr = r.choice(["tcp://[::1", "tcp://[::1]:99999", "tcp://h:-1", "tcp://:8786", "[::1]:8786", "tcp://",
                             "tcp://a b:1", "tcp://h:1/x?y", "udp://h:1", "tcp://ﬁ:1", "tcp://h:١", "", " ",
                             "tcp://" + "a" * 300, "tcp://[zz]:1", "tcp://u:p@h:1", "tcp://h:0", "tls://[::1]]:1",
                             "tcp://h:" + "9" * 50, "tcp://%zz:1", "tcp://h:1\x00", "inproc://"])
            # no --max-events: the runs are valid, so only the address check stands between them and Dask
            return Case(klass, [r.choice(["sweep", "compare"]), "lockstress", "-k", "v3.12", "-k", "v4.14",
                                "-p", "iterations=5", "--executor", "dask", "--scheduler", addr, "--no-store"],
                        expect="--scheduler")
        if klass == "duplicate-key":
            text = _dump(self.machine).decode()
            key = r.choice(["name", "freq_ghz", "description", "cost"])
            lines = text.splitlines(keepends=True)
            dup = f"{key}: {r.choice(['x', '1', '[]', '{a: 1}', 'null'])}\n"  # a key the file already has
            tops = [i for i, ln in enumerate(lines) if ln[:1].isalpha()] + [len(lines)]  # top-level key lines
            lines.insert(r.choice(tops), dup)
            c = self.machine_case(r, "".join(lines).encode(), klass)
            c.expect = "duplicate key"
            return c
        if klass == "no-echo":
            text = r.choice([f"root:$6$salt${SECRET}:19000:0:99999:7:::\ndaemon:*:19000:0:99999:7:::\n",
                             f"{SECRET}: 1\n", f"password: {SECRET}\n", f"- {SECRET}\n", f"{SECRET}\n",
                             f"name: x\n{SECRET}: 1\n", f"[{SECRET}: 1]\n", f"{{{SECRET}\n",
                             f"export TOKEN={SECRET}\n", f'{{"kind": "{SECRET}"}}', f'{{"{SECRET}": 1}}'])
            if text.startswith('{"'):
                c = self.json_case(r, text.encode(), klass)
                c.secret = True
                return c
            return self.machine_case(r, text.encode(), klass, secret=True)
        if klass == "non-ascii":
            v = r.choice(["١", "٣", "²", "①", "１", "4\u200b", "٤٢", "\u0664"])
            key = r.choice(["tasks", "iterations", "hold_ns"])
            argv, expect = r.choice([(["run", "lockstress", "-p", f"{key}={v}"], f"-p {key}"),
                                     (["run", "lockstress", "--set", f"stat_interval_ms={v}"], "stat_interval_ms"),
                                     (["run", "lockstress", "--max-events", v], "--max-events"),
                                     (["sweep", "lockstress", "-p", f"tasks=1,{v}", "--no-store"], "-p tasks")])
            return Case(klass, argv, expect=expect)
        if klass == "bisect-options":
            opt = r.choice([["--threshold", "nan"], ["--threshold", "inf"], ["--threshold", "-inf"],
                            ["--threshold", "0"], ["--threshold", "-5"], ["--max-stddev", "nan"],
                            ["--max-spread", "-inf"],
                            ["--max-runs", "0"], ["--max-runs", "-3"], ["-r", "0"], ["--threshold", "1e400"]])
            return Case(klass, ["bisect", "lockstress", "--good", "v3.12", "--bad", "v4.14", "--no-store",
                                "--executor", "serial", "--max-events", "1000", *opt],
                        expect="--runs" if opt[0] == "-r" else opt[0])
        raise ValueError(klass)


def cases(corpus: Corpus, n: int, seed: int) -> Iterator[Case]:
    """``n`` cases, the classes in turn (so every class is covered by any n >= len(CLASSES))."""
    r = random.Random(seed)
    for i in range(n):
        yield corpus.case(r, CLASSES[i % len(CLASSES)])


# -- running -------------------------------------------------------------------------------


def materialize(case: Case, d: Path) -> None:
    """Write the case's files into directory ``d`` (created)."""
    d.mkdir(parents=True, exist_ok=True)
    for name, f in case.files.items():
        p = d / name
        if isinstance(f, bytes):
            p.write_bytes(f)
        elif f[0] == "sparse":
            with open(p, "wb") as fh:
                fh.truncate(f[1])
        elif f[0] == "fifo":
            os.mkfifo(p)
        else:
            p.mkdir()


def _vm_bytes() -> int:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmSize:"):
            return int(line.split()[1]) * 1024
    return 0


def _child(argv: list[str], d: Path, limit: int) -> None:
    """In the forked child: limits, fresh standard streams on files, the CLI; never returns."""
    code = 99
    try:
        os.chdir(d)
        resource.setrlimit(resource.RLIMIT_AS, (limit, limit))
        os.dup2(os.open(os.devnull, os.O_RDONLY), 0)
        for fd, name in ((1, "stdout"), (2, "stderr")):
            os.dup2(os.open(d / name, os.O_WRONLY | os.O_CREAT | os.O_TRUNC), fd)
        sys.stdout = open(1, "w", closefd=False)
        sys.stderr = open(2, "w", closefd=False)
        from mmsim import cli

        code = cli.main(argv)
        sys.stdout.flush()
        sys.stderr.flush()
    except SystemExit as e:
        code = e.code if isinstance(e.code, int) else 98
    except BaseException:
        try:
            traceback.print_exc(file=sys.stderr)
            sys.stderr.flush()
        finally:
            code = 97
    os._exit(code)


def run_forked(argv: list[str], d: Path) -> dict[str, Any]:
    """Fork, run ``argv`` in the child within WALL_SECONDS and MEMORY_BYTES, and report how it ended."""
    limit = _vm_bytes() + MEMORY_BYTES
    sys.stdout.flush()
    sys.stderr.flush()
    t0 = time.monotonic()
    pid = os.fork()
    if pid == 0:
        _child(argv, d, limit)
    rc: int | None = None
    sig: int | None = None
    while True:
        done, status = os.waitpid(pid, os.WNOHANG)
        if done:
            if os.WIFEXITED(status):
                rc = os.WEXITSTATUS(status)
            else:
                sig = os.WTERMSIG(status)
            break
        if time.monotonic() - t0 > WALL_SECONDS:
            os.kill(pid, signal.SIGKILL)
            os.waitpid(pid, 0)
            break
        time.sleep(0.002)
    return {"rc": rc, "signal": sig, "seconds": time.monotonic() - t0}


def serve() -> None:
    """The fork server: a fresh single-threaded process (forking pytest, whose other tests may have left
    threads, could deadlock a child). It imports mmsim once, then per line on stdin ``{"argv", "dir"}``
    forks a child and answers one line of JSON (:func:`run_forked`)."""
    import matplotlib

    matplotlib.use("Agg")
    import importlib

    import matplotlib.pyplot

    for mod in ("mmsim.cli", "mmsim.experiments.bisect", "mmsim.experiments.compare", "mmsim.experiments.sweep",
                "mmsim.report.html", "mmsim.report.lkp", "mmsim.report.plots", "mmsim.report.schema"):
        try:  # imported once here, not per case; an older tree (a baseline run) may lack some
            importlib.import_module(mod)
        except ImportError:
            pass

    for line in sys.stdin:
        req = json.loads(line)
        res = run_forked(req["argv"], Path(req["dir"]))
        sys.stdout.write(json.dumps(res) + "\n")
        sys.stdout.flush()


class Server:
    """The test side of :func:`serve`."""

    def __init__(self, env: dict[str, str]) -> None:
        import subprocess

        here = Path(__file__).parent
        self.proc = subprocess.Popen([sys.executable, "-c", "import hostile_corpus; hostile_corpus.serve()"],
                                     stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, cwd=here,
                                     env={**env, "PYTHONPATH": os.pathsep.join([str(here), env.get("PYTHONPATH", "")])})

    def run(self, case: Case, d: Path) -> Outcome:
        materialize(case, d)
        assert self.proc.stdin is not None and self.proc.stdout is not None
        self.proc.stdin.write(json.dumps({"argv": case.argv, "dir": str(d)}) + "\n")
        self.proc.stdin.flush()
        res = json.loads(self.proc.stdout.readline())
        out, err = d / "stdout", d / "stderr"
        return Outcome(res["rc"], out.read_text(errors="replace") if out.exists() else "",
                       err.read_text(errors="replace") if err.exists() else "", res["seconds"], res["signal"])

    def close(self) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.close()
        self.proc.wait(timeout=30)

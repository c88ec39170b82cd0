"""``mmsim kernels``, ``kernels show``, ``kernels diff``, ``policies``, ``workloads`` and ``workloads show``:
the catalogue as tables.

Every table here is made to fit :data:`WIDTH` columns when rendered as plain
text (:func:`mmsim.report.tables.render_table`): a long cell is wrapped onto
continuation rows of its column, the other cells of those rows left empty.
"""

from __future__ import annotations

import textwrap
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from mmsim.report.tables import Doc, Table

#: Plain-text width of every catalogue table (an 80..100-column terminal, a mail, a log).
WIDTH = 100


def fit(t: Table, *cols: int, width: int = WIDTH) -> Table:
    """Wrap columns ``cols`` so that ``render_table(t)`` is at most ``width`` characters wide.

    The other columns keep their width; the room left is shared by ``cols`` in
    proportion to their longest cell (at least 16 characters each).
    """
    widths = [len(h) for h in t.headers]
    for row in t.rows:
        for i, cell in enumerate(row):
            widths[i] = max(widths[i], len(cell))
    # render_table: two leading spaces, two between columns
    room = width - 2 - 2 * (len(widths) - 1) - sum(w for i, w in enumerate(widths) if i not in cols)
    want = sum(widths[c] for c in cols) or 1
    share = {c: min(widths[c], max(16, len(t.headers[c]), room * widths[c] // want)) for c in cols}
    rows: list[list[str]] = []
    for row in t.rows:
        parts = {c: textwrap.wrap(row[c], share[c], break_on_hyphens=False) or [""] for c in cols}
        for j in range(max(len(v) for v in parts.values())):
            rows.append([(parts[i][j] if j < len(parts[i]) else "") if i in cols else (cell if j == 0 else "")
                         for i, cell in enumerate(row)])
    t.rows = rows
    return t


def _changes(changes: Mapping[str, str]) -> str:
    return ", ".join(f"{k}={v}" for k, v in changes.items()) or "(no policy of its own)"


def kernels_doc(kernels: Iterable[Any], patches: Iterable[Any]) -> Doc:
    """``mmsim kernels``: the kernels, the patches and where to read the policies."""
    kt = Table(["kernel", "base", "patches", "description"], align="llrl", title="Kernels:")
    for k in kernels:
        kt.rows.append([k.name, k.base or "-", str(len(k.patches)), k.description])
    pt = Table(["commit", "in", "subject -> policy changes"], align="lll", title="Patches:")
    for p in patches:
        pt.rows.append([p.commit, p.version or "-", p.subject])
        pt.rows.append(["", "", "-> " + _changes(p.changes)])
    hint = ("One kernel's policies: mmsim kernels show KERNEL (a name, BASE+PATCH+... or a YAML file).\n"
            "What two kernels differ by: mmsim kernels diff A B. Every policy: mmsim policies.")
    return [fit(kt, 3), fit(pt, 2), hint]


def policy_source(policies: Mapping[str, str], base: Mapping[str, str], patches: Sequence[str],
                  catalogue: Mapping[str, Any]) -> dict[str, str]:
    """For each policy, the last patch (of ``patches``, in order) that set its value, else ``base``."""
    src = {name: "base" for name in policies}
    for c in patches:
        p = catalogue.get(c)
        for name, value in (p.changes if p else {}).items():
            if policies.get(name) == value:
                src[name] = c[:12]
    for name, value in policies.items():
        if base.get(name) != value and src[name] == "base":
            src[name] = "--set"
    return src


def kernel_doc(name: str, description: str, policies: Mapping[str, str], source: Mapping[str, str],
               patches: Sequence[Any]) -> Doc:
    """``mmsim kernels show K``: its patches, then each policy with the patch that set it."""
    doc: Doc = [f"{name}: {description}" if description else name]
    if patches:
        pt = Table(["commit", "in", "subject"], align="lll", title=f"Patches ({len(patches)}):")
        pt.rows = [[p.commit, p.version or "-", p.subject] for p in patches]
        doc.append(fit(pt, 2))
    t = Table(["policy", "value", "set by"], align="lll", title=f"Policies ({len(policies)}):")
    t.rows = [[k, v, source.get(k, "")] for k, v in policies.items()]
    doc.append(t)
    return doc


def diff_doc(a: str, b: str, pa: Mapping[str, str], pb: Mapping[str, str], only_a: Sequence[Any],
             only_b: Sequence[Any]) -> Doc:
    """``mmsim kernels diff A B``: the policies that differ and the commits that separate them."""
    names = [k for k in dict.fromkeys([*pa, *pb]) if pa.get(k) != pb.get(k)]
    doc: Doc = []
    if names:
        t = Table(["policy", a, b], align="lll", title=f"Policies that differ ({len(names)}):")
        t.rows = [[k, pa.get(k, "-"), pb.get(k, "-")] for k in names]
        doc.append(t)
    else:
        doc.append(f"{a} and {b} have the same policies.")
    for title, ps in ((f"Commits in {b}, not in {a}", only_b), (f"Commits in {a}, not in {b}", only_a)):
        if ps:
            t = Table(["commit", "in", "subject -> policy changes"], align="lll", title=f"{title} ({len(ps)}):")
            for p in ps:
                t.rows.append([p.commit, p.version or "-", p.subject])
                t.rows.append(["", "", "-> " + _changes(p.changes)])
            doc.append(fit(t, 2))
    return doc


def policies_doc(policies: Iterable[Any], defaults: Mapping[str, str]) -> Doc:
    """``mmsim policies``: per policy its type and allowed values or range (with the bound's origin),
    the v3.12 default, what it models and the kernel source; one block each, 100 columns."""
    blocks = []
    for p in policies:
        head = f"{p.name}  [{p.kind}]  default (v3.12): {defaults.get(p.name, '-')}"
        body = [f"values: {p.describe()}", p.help, f"source: {p.source}"]
        lines = [head] + [ln for b in body for ln in textwrap.wrap(b, WIDTH - 4, initial_indent="    ",
                                                                    subsequent_indent="      ",
                                                                    break_on_hyphens=False)]
        blocks.append("\n".join(lines))
    return ["\n".join(blocks),
            "Set one with --set NAME=VALUE (run, compare, sweep, bisect), in a patch YAML's changes: or a\n"
            "kernel YAML's policies:. One kernel's values: mmsim kernels show KERNEL."]


def policies_json(policies: Iterable[Any], defaults: Mapping[str, str]) -> list[dict[str, Any]]:
    out = []
    for p in policies:
        d: dict[str, Any] = {"name": p.name, "type": p.kind, "allowed": p.describe(), "default": defaults.get(p.name),
                             "source": p.source, "help": p.help}
        if p.kind == "choice":
            d["values"] = list(p.allowed)
        else:
            d.update(min=p.lo, max=p.hi, special=list(p.special), bound=p.bound)
        out.append(d)
    return out


def _wrap(text: str, indent: str = "    ") -> list[str]:
    return textwrap.wrap(text, WIDTH, initial_indent=indent, subsequent_indent=indent, break_on_hyphens=False)


def workloads_doc(workloads: Iterable[Any]) -> Doc:
    """``mmsim workloads``: per workload its description and the names of its ``-p`` parameters, 100 columns."""
    blocks = []
    for w in workloads:
        lines = [w.name] + _wrap(w.description)
        if w.params:
            lines += _wrap("-p " + ", ".join(w.params), "    ")
        blocks.append("\n".join(lines))
    return ["\n".join(blocks),
            "One workload's parameters (default, allowed values, help): mmsim workloads show WORKLOAD."]


def param_default(p: Any) -> str:
    """A parameter's default as a user would type it: ``auto`` when that is what the default means."""
    try:
        if p.parse("auto") == p.default:
            return "auto"
    except (ValueError, TypeError):
        pass
    return str(p.default)


def workload_show_doc(w: Any) -> Doc:
    """``mmsim workloads show W``: its description, then each ``-p`` parameter with default, allowed values
    and help, wrapped to 100 columns."""
    doc: Doc = [f"{w.name}: {w.description}" if len(w.name) + len(w.description) + 2 <= WIDTH
                else "\n".join([w.name, *_wrap(w.description, "  ")])]
    if w.params:
        t = Table(["param", "default", "allowed", "help"], align="llll", title=f"Parameters ({len(w.params)}):")
        t.rows = [[name, param_default(p), p.allowed, p.help] for name, p in w.params.items()]
        doc.append(fit(t, 2, 3))
        first, info = next(iter(w.params.items()))
        doc.append(f"Set one with -p NAME=VALUE, e.g.\n  mmsim run {w.name} --machine tiny -p {first}="
                   + param_default(info))
    return doc


def workloads_json(workloads: Iterable[Any]) -> list[dict[str, Any]]:
    return [{"name": w.name, "description": w.description,
             "params": {n: {"default": param_default(p), "allowed": p.allowed, "help": p.help}
                        for n, p in w.params.items()}} for w in workloads]

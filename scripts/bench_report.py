#!/usr/bin/env python3
"""Writes summary.md and the plots for a folder of tessera benchmark results (what scripts/bench
makes: <name>.json from --benchmark_out, <name>.summary.txt from --summary, <name>.stderr.txt),
and optionally compares it with an earlier folder.

  scripts/bench_report.py DIR                      summary.md and *.png in DIR
  scripts/bench_report.py DIR --compare BASE_DIR   also the change of every benchmark in both
  scripts/bench_report.py DIR --noise-floor 5      the smallest change --compare flags, in %
  scripts/bench_report.py DIR --no-plots           summary.md only

Python 3 standard library; matplotlib for the plots (skipped with a note when it is missing).
"""

from __future__ import annotations

import argparse
import json
import math
import re
import signal
import statistics
import sys
import textwrap
from dataclasses import dataclass, field
from pathlib import Path

# --- reading Google Benchmark JSON --------------------------------------------------------------

NS_PER_UNIT = {"ns": 1.0, "us": 1e3, "ms": 1e6, "s": 1e9}

# Keys of a JSON benchmark row that are not user counters.
STANDARD_KEYS = {
    "name", "family_index", "per_family_instance_index", "run_name", "run_type", "repetitions",
    "repetition_index", "threads", "iterations", "real_time", "cpu_time", "time_unit",
    "aggregate_name", "aggregate_unit", "label", "error_occurred", "error_message",
    "big_o", "rms", "complexity_n",
}

# Parts of a run name that say how a benchmark was run rather than what it runs.
RUN_OPTION = re.compile(r"^(min_time|min_warmup_time|repeats|iterations):|^(real_time|manual_time|process_time)$")


def bench_key(run_name: str) -> str:
    """Returns the name bench_support's summary uses: "BM_Gemm_Tessera/256/1" for
    "BM_Gemm_Tessera/256/1/min_time:0.300/repeats:3/real_time"."""
    return "/".join(p for p in run_name.split("/") if not RUN_OPTION.match(p))


def fmt_ns(ns: float | None) -> str:
    """Formats like tessera_bench::format_ns: "12.3 ns", "4.56 us", "7.89 ms"."""
    if ns is None or not math.isfinite(ns):
        return "n/a"
    if ns < 1e3:
        return f"{ns:.1f} ns"
    if ns < 1e6:
        return f"{ns / 1e3:.2f} us"
    if ns < 1e9:
        return f"{ns / 1e6:.2f} ms"
    return f"{ns / 1e9:.2f} s"


def short_time(ns: float) -> str:
    """An axis label for a time in ns: "20 ns", "1.5 µs", "2 ms"."""
    for unit, scale in (("s", 1e9), ("ms", 1e6), ("µs", 1e3)):
        if ns >= scale:
            return f"{ns / scale:g} {unit}"
    return f"{ns:g} ns"


@dataclass
class Entry:
    """Every row a run reported for one benchmark (all its repetitions and aggregates)."""

    key: str
    run_name: str = ""
    iterations: list[dict] = field(default_factory=list)  # one per repetition, when reported
    aggregates: dict[str, dict] = field(default_factory=dict)  # "mean", "median", "stddev", "cv"

    @staticmethod
    def _ns(row: dict) -> float:
        return float(row["real_time"]) * NS_PER_UNIT.get(row.get("time_unit", "ns"), 1.0)

    @property
    def samples_ns(self) -> list[float]:
        return [self._ns(r) for r in self.iterations]

    @property
    def repetitions(self) -> int:
        for row in self.aggregates.values():
            if "repetitions" in row:
                return int(row["repetitions"])
        return len(self.iterations)

    @property
    def median_ns(self) -> float | None:
        """The median real time per iteration over the repetitions, or the single run's."""
        if "median" in self.aggregates:
            return self._ns(self.aggregates["median"])
        samples = self.samples_ns
        return statistics.median(samples) if samples else None

    @property
    def cv(self) -> float | None:
        """The coefficient of variation (stddev / mean) of the real time over the repetitions:
        Google Benchmark's cv aggregate, else stddev / mean from the aggregates or the
        per-repetition rows; None when the run had fewer than two repetitions."""
        row = self.aggregates.get("cv")
        if row is not None and row.get("aggregate_unit", "percentage") == "percentage":
            return float(row["real_time"])  # a fraction, not a time
        if "stddev" in self.aggregates and "mean" in self.aggregates:
            mean = self._ns(self.aggregates["mean"])
            return self._ns(self.aggregates["stddev"]) / mean if mean > 0 else None
        samples = self.samples_ns
        if len(samples) >= 2 and statistics.mean(samples) > 0:
            return statistics.stdev(samples) / statistics.mean(samples)
        return None

    def counter(self, name: str) -> float | None:
        """A user counter: the median aggregate's, else the mean's, else the median over the
        repetitions (or the single run's)."""
        for agg in ("median", "mean"):
            row = self.aggregates.get(agg)
            if row is not None and name in row:
                return float(row[name])
        values = [float(r[name]) for r in self.iterations if name in r]
        return statistics.median(values) if values else None


@dataclass
class BinaryRun:
    name: str
    context: dict = field(default_factory=dict)
    entries: dict[str, Entry] = field(default_factory=dict)
    errors: list[str] = field(default_factory=list)  # benchmarks that reported an error
    summary_text: str = ""
    stderr_text: str = ""


@dataclass
class Results:
    folder: Path
    binaries: dict[str, BinaryRun] = field(default_factory=dict)
    info: dict[str, str] = field(default_factory=dict)  # run-info.txt from scripts/bench
    warnings: list[str] = field(default_factory=list)

    def find_binary(self, key_prefix: str) -> str | None:
        """The binary that ran benchmarks whose names start with `key_prefix`: a benchmark is
        found by its name even if the binary is renamed."""
        for name, b in self.binaries.items():
            if any(k.startswith(key_prefix) for k in b.entries):
                return name
        return None


def load_results(folder: Path) -> Results:
    res = Results(folder)
    info_file = folder / "run-info.txt"
    if info_file.is_file():
        for line in info_file.read_text(errors="replace").splitlines():
            key, sep, value = line.partition(":")
            if sep:
                res.info[key.strip()] = value.strip()

    found = {p.name[: -len(".summary.txt")] for p in folder.glob("*.summary.txt")}
    found |= {p.stem for p in folder.glob("*.json")}
    # The order scripts/bench ran them in, then any others.
    ran = [n for n in res.info.get("order", "").split() if n in found]
    for name in ran + sorted(found - set(ran)):
        b = BinaryRun(name)
        for suffix, attr in ((".summary.txt", "summary_text"), (".stderr.txt", "stderr_text")):
            p = folder / f"{name}{suffix}"
            if p.is_file():
                setattr(b, attr, p.read_text(errors="replace"))
        json_file = folder / f"{name}.json"
        if json_file.is_file():
            try:
                data = json.loads(json_file.read_text(errors="replace"))
            except json.JSONDecodeError as e:
                # A binary that crashed leaves its JSON unfinished.
                res.warnings.append(f"{json_file.name}: not valid JSON ({e}); its benchmarks are left out")
                data = {}
            if not isinstance(data, dict) or ("benchmarks" not in data and data):
                res.warnings.append(f"{json_file.name}: not a Google Benchmark JSON file; ignored")
                continue
            b.context = data.get("context", {}) or {}
            for row in data.get("benchmarks", []) or []:
                run_name = row.get("run_name") or row.get("name", "")
                key = bench_key(run_name)
                if row.get("error_occurred"):
                    b.errors.append(f"{key}: {row.get('error_message', 'error')}")
                    continue
                if "real_time" not in row:
                    continue
                e = b.entries.setdefault(key, Entry(key, run_name))
                if row.get("run_type") == "aggregate":
                    e.aggregates[row.get("aggregate_name", "")] = row
                else:
                    e.iterations.append(row)
        elif b.summary_text or b.stderr_text:
            res.warnings.append(f"{name}: no {name}.json (did it fail?)")
        if b.entries or b.summary_text:
            res.binaries[name] = b
    return res


# --- the contract tables the binaries print in --summary mode ------------------------------------

# summary_table::print (bench/support/bench_support.cpp) prints
#   measure ... | tessera | baseline | ratio | target | verdict
#   -----------+---------+ ...
#   <rows, cells separated by " | ", the measure left-aligned, numbers right-aligned>
#   <blank line>
#   N of M targets met
TABLE_HEADER = re.compile(r"^\s*measure\s*\|\s*tessera\s*\|\s*baseline\s*\|\s*ratio\s*\|\s*target\s*\|\s*verdict\s*$")
TABLE_RULE = re.compile(r"^[-+\s]+$")
TARGETS_MET = re.compile(r"^\s*(\d+)\s+of\s+(\d+)\s+targets met\s*$")
COLUMNS = ("measure", "tessera", "baseline", "ratio", "target", "verdict")


@dataclass
class ContractRow:
    binary: str
    caption: str
    measure: str
    tessera: str
    baseline: str
    ratio: str
    target: str
    verdict: str

    @property
    def has_target(self) -> bool:
        return self.target not in ("-", "")

    @property
    def measured(self) -> str:
        # ns_at_most rows compare tessera's time with the target; the others the ratio.
        return self.tessera if self.target.endswith("ns") else self.ratio


@dataclass
class ContractTable:
    caption: str
    rows: list[ContractRow]
    met: int | None = None  # the binary's own "N of M targets met" line
    checked: int | None = None


def parse_contract_tables(binary: str, text: str) -> list[ContractTable]:
    lines = text.splitlines()
    tables: list[ContractTable] = []
    i = 0
    while i < len(lines):
        if not TABLE_HEADER.match(lines[i]):
            i += 1
            continue
        # The caption is the last non-blank line above the header, when it is prose.
        caption = ""
        for j in range(i - 1, -1, -1):
            if lines[j].strip():
                if " | " not in lines[j] and not TABLE_RULE.match(lines[j]):
                    caption = lines[j].strip()
                break
        i += 1
        if i < len(lines) and TABLE_RULE.match(lines[i]) and lines[i].strip():
            i += 1
        table = ContractTable(caption, [])
        while i < len(lines) and lines[i].strip():
            # The last five cells never contain " | "; a measure could.
            cells = [c.strip() for c in lines[i].rsplit(" | ", 5)]
            if len(cells) == 6:
                table.rows.append(ContractRow(binary, caption, *cells))
            i += 1
        while i < len(lines) and not lines[i].strip():
            i += 1
        if i < len(lines):
            m = TARGETS_MET.match(lines[i])
            if m:
                table.met, table.checked = int(m.group(1)), int(m.group(2))
                i += 1
        tables.append(table)
    return tables


def split_machine_facts(text: str) -> tuple[str, str]:
    """Splits a --summary output into the machine-facts block print_machine_facts writes first
    ("tessera <version> benchmark" up to the first blank line) and the rest."""
    lines = text.splitlines()
    if lines and re.match(r"^tessera \S+ benchmark\s*$", lines[0]):
        end = next((k for k, line in enumerate(lines) if not line.strip()), len(lines))
        return "\n".join(lines[:end]), "\n".join(lines[end:]).strip("\n")
    return "", text.strip("\n")


def stderr_notes(text: str) -> list[str]:
    """What a binary printed to stderr besides its progress dots."""
    notes = []
    for line in text.splitlines():
        s = line.strip().strip(".")
        if s:
            notes.append(line.strip())
    return notes


# --- comparison -----------------------------------------------------------------------------------


@dataclass
class Change:
    binary: str
    key: str
    base_ns: float
    new_ns: float
    base_cv: float | None
    new_cv: float | None
    base_reps: int
    new_reps: int

    @property
    def change(self) -> float:
        return self.new_ns / self.base_ns - 1.0

    def band(self, floor: float) -> float | None:
        if self.base_cv is None or self.new_cv is None:
            return None
        # The cv of a ratio of two independent timings is about the root sum of squares of theirs.
        return max(2.0 * math.hypot(self.base_cv, self.new_cv), floor)

    def verdict(self, floor: float) -> str:
        band = self.band(floor)
        if band is None:
            return "band unknown"
        if abs(self.change) <= band:
            return "within noise"
        return "SLOWER" if self.change > 0 else "faster"


def compare(new: Results, base: Results) -> tuple[list[Change], list[str], list[str]]:
    """Pairs the benchmarks of both runs, in the order the new run ran them."""
    changes, only_new, only_base = [], [], []
    names = list(new.binaries) + [n for n in base.binaries if n not in new.binaries]
    for name in names:
        nb = new.binaries.get(name)
        bb = base.binaries.get(name)
        n_entries = nb.entries if nb else {}
        b_entries = bb.entries if bb else {}
        for key in list(n_entries) + [k for k in b_entries if k not in n_entries]:
            if key not in b_entries:
                only_new.append(f"{name}: {key}")
                continue
            if key not in n_entries:
                only_base.append(f"{name}: {key}")
                continue
            a, b = b_entries[key], n_entries[key]
            a_ns, b_ns = a.median_ns, b.median_ns
            if a_ns is None or b_ns is None or a_ns <= 0:
                continue
            changes.append(Change(name, key, a_ns, b_ns, a.cv, b.cv, a.repetitions, b.repetitions))
    return changes, only_new, only_base


def pct(x: float | None) -> str:
    return "-" if x is None else f"{100 * x:.1f}%"


def compare_report(new: Results, base: Results, floor: float) -> tuple[str, str]:
    """Returns (plain text for the terminal, Markdown for summary.md)."""
    changes, only_new, only_base = compare(new, base)
    how = (
        f"Change of the median real time per iteration (the single run's where a benchmark was not "
        f"repeated) from {base.folder.name} to {new.folder.name}. A change is flagged when "
        f"|change| > band, band = max(2 x sqrt(cv_base^2 + cv_new^2), {100 * floor:g}%), where cv is the "
        f"coefficient of variation (stddev / mean) of the benchmark's repetitions in that run: "
        f"Google Benchmark's cv aggregate, or stddev / mean of the per-repetition rows. The "
        f"{100 * floor:g}% floor (--noise-floor) is there because 3-5 repetitions taken back to back "
        f"understate the drift between runs on a shared machine. Where either run has a single "
        f"repetition there is no measured cv: the band is unknown and the change is not flagged."
    )
    flagged = [c for c in changes if c.verdict(floor) in ("SLOWER", "faster")]
    unknown = [c for c in changes if c.band(floor) is None]
    slower = sum(c.verdict(floor) == "SLOWER" for c in flagged)
    totals = (f"{len(changes)} benchmarks in both runs: {len(flagged)} flagged ({slower} slower, "
              f"{len(flagged) - slower} faster), {len(unknown)} with an unknown band")
    # Baselines (Eigen, raw loops, memcpy) run in the same binaries: when nearly everything moves
    # the same way, the machine changed between the runs, not tessera.
    shift = statistics.median(c.change for c in changes) if len(changes) >= 10 else 0.0
    if abs(shift) > floor:
        totals += (f"\nwarning: the median change over all {len(changes)} benchmarks is {100 * shift:+.1f}%, "
                   f"baselines included: the machine was in a different state in the two runs (load, "
                   f"clock), so single benchmarks say little; compare the ratios in the contract tables")

    header = ("benchmark", "base", "new", "change", "reps", "cv base", "cv new", "band", "verdict")

    def cells(c: Change) -> tuple[str, ...]:
        band = c.band(floor)
        return (c.key, fmt_ns(c.base_ns), fmt_ns(c.new_ns), f"{100 * c.change:+.1f}%",
                f"{c.base_reps}/{c.new_reps}", pct(c.base_cv), pct(c.new_cv),
                "unknown" if band is None else f"±{100 * band:.1f}%", c.verdict(floor))

    rows = [cells(c) for c in changes]
    widths = [max([len(h)] + [len(r[i]) for r in rows]) for i, h in enumerate(header)]
    fmt_line = lambda cs: "  ".join(
        (x.ljust(widths[i]) if i in (0, 8) else x.rjust(widths[i])) for i, x in enumerate(cs)).rstrip()

    text = [f"compare: {new.folder} against {base.folder}", "", *wrap(how, 100)]
    binary = None
    for c, r in zip(changes, rows):
        if c.binary != binary:
            binary = c.binary
            text += ["", binary, fmt_line(header), "  ".join("-" * w for w in widths)]
        text.append(fmt_line(r))
    text += ["", totals]
    if flagged:
        text += ["", "flagged:"]
        text += [f"  {c.verdict(floor):<6} {100 * c.change:+6.1f}% (band ±{100 * c.band(floor):.1f}%)  "
                 f"{c.binary}: {c.key}" for c in flagged]
    if only_new:
        text.append(f"{len(only_new)} benchmarks only in {new.folder.name} (not compared)")
    if only_base:
        text.append(f"{len(only_base)} benchmarks only in {base.folder.name} (not compared)")
    for w in base.warnings:
        text.append(f"warning ({base.folder.name}): {w}")

    md = [f"## Change against `{base.folder.name}`", "", how, "", totals.replace("\nwarning:", ".\n\n**Warning:**") + "."]
    if only_new or only_base:
        md += ["", f"{len(only_new)} benchmarks only in this run, {len(only_base)} only in the base run "
                   f"(not compared)."]
    md.append("")
    table_head = ["| " + " | ".join(("bench",) + header) + " |",
                  "|" + "|".join(["---", "---"] + ["--:"] * 7 + ["---"]) + "|"]

    def md_row(c: Change, r: tuple[str, ...]) -> str:
        verdict = f"**{r[8]}**" if r[8] in ("SLOWER", "faster") else r[8]
        return "| " + " | ".join([c.binary, md_cell(r[0]), *r[1:8], verdict]) + " |"

    if flagged:
        md += ["Flagged:", ""] + table_head
        md += [md_row(c, r) for c, r in zip(changes, rows) if c in flagged] + [""]
    if rows:
        md += ["<details><summary>Every benchmark in both runs</summary>", ""] + table_head
        md += [md_row(c, r) for c, r in zip(changes, rows)] + ["", "</details>", ""]
    return "\n".join(text), "\n".join(md)


def wrap(text: str, width: int) -> list[str]:
    return textwrap.wrap(text, width)


def md_cell(s: str) -> str:
    return s.replace("|", "\\|")


# --- plots ----------------------------------------------------------------------------------------


class Plotter:
    """Draws the four plots; each is skipped with a note when the benchmarks it needs did not
    run (filtered out or failed)."""

    def __init__(self, res: Results, plt, ticker):
        self.res = res
        self.plt = plt
        self.ticker = ticker
        self.written: list[Path] = []
        self.notes: list[str] = []
        ctx = next((b.context for b in res.binaries.values() if b.context), {})
        self.where = f"{ctx.get('host_name', '?')}, {ctx.get('num_cpus', '?')} CPUs, {str(ctx.get('date', ''))[:10]}"

    def skip(self, what: str, why: str) -> None:
        self.notes.append(f"plot {what} skipped: {why}")

    def save(self, fig, name: str) -> None:
        path = self.res.folder / name
        fig.savefig(path, dpi=150, bbox_inches="tight")
        self.plt.close(fig)
        self.written.append(path)

    def style(self, ax, xlabel: str, ylabel: str) -> None:
        ax.set_xlabel(xlabel)
        ax.set_ylabel(ylabel)
        ax.grid(True, which="major", alpha=0.35)
        ax.grid(True, which="minor", alpha=0.12)

    def thread_axis(self, ax, counts: list[int]) -> None:
        counts = sorted(set(counts))
        if counts and counts[-1] >= 8:
            ax.set_xscale("log", base=2)
        ax.set_xticks(counts)
        ax.set_xticklabels([str(c) for c in counts])
        ax.minorticks_off() if ax.get_xscale() == "linear" else None
        lo, hi = counts[0], counts[-1]
        if ax.get_xscale() == "log":
            ax.set_xlim(lo / 1.4, hi * 1.4)
        else:
            pad = max(0.4, 0.12 * (hi - lo))
            ax.set_xlim(lo - pad, hi + pad)

    def log_y(self, ax, fmt) -> None:
        """A log y axis labelled at 1-2-5 steps (1 steps past three decades) with `fmt(value)`:
        "20 ns" reads faster than 2 x 10^1."""
        ax.set_yscale("log")
        lo, hi = ax.get_ylim()
        span = hi / max(lo, 1e-300)
        subs = tuple(float(k) for k in range(1, 10)) if span <= 5 else (1.0, 2.0, 5.0) if span <= 1e3 else (1.0,)
        ax.yaxis.set_major_locator(self.ticker.LogLocator(base=10, subs=subs))
        ax.yaxis.set_major_formatter(self.ticker.FuncFormatter(lambda v, _: fmt(v)))
        ax.yaxis.set_minor_locator(self.ticker.LogLocator(base=10, subs=tuple(range(1, 10))))
        ax.yaxis.set_minor_formatter(self.ticker.NullFormatter())

    def series(self, binary: str, prefix: str) -> dict[tuple[str, ...], Entry]:
        """Every benchmark `prefix/<args>` of `binary`, keyed by its argument parts."""
        b = self.res.binaries.get(binary)
        out = {}
        if b is None:
            return out
        for key, e in b.entries.items():
            if key == prefix:
                out[()] = e
            elif key.startswith(prefix + "/"):
                out[tuple(key[len(prefix) + 1:].split("/"))] = e
        return out

    # a) empty-session cost vs thread count
    def session_entry(self) -> None:
        what = "a (session entry cost vs threads, session_entry.png)"
        binary = self.res.find_binary("BM_EmptySession_")
        if binary is None:
            return self.skip(what, "needs BM_EmptySession_* from session_entry_bench (not run or filtered out)")
        arena = self.series(binary, "BM_EmptySession_Arena")
        inline = self.series(binary, "BM_EmptySession_Inline")
        raw = self.series(binary, "BM_RawArenaExecute")
        enqueue = self.series(binary, "BM_ArenaEnqueueWait")
        condvar = self.series(binary, "BM_InstallHandoff_Condvar")
        direct = self.series(binary, "BM_DirectCall")

        def points(s):
            pts = sorted((int(k[0]), e.median_ns) for k, e in s.items() if k and e.median_ns)
            return [p[0] for p in pts], [p[1] for p in pts]

        fig, ax = self.plt.subplots(figsize=(8, 5.2))
        counts = [1]
        drawn = 0
        # Values are written beside the points: on a small machine there are only one or two.
        for s, label, style, side in (
            (arena, "tessera session, multi-thread backend", dict(color="C0", marker="o", lw=2), 1),
            (raw, "raw task_arena::execute (same arena shape)", dict(color="C2", marker="s", lw=1.5), -1),
            (enqueue, "install-style: task_arena::enqueue + wait", dict(color="C3", marker="^", lw=1.5), 1),
        ):
            xs, ys = points(s)
            if xs:
                ax.plot(xs, ys, label=label, **style)
                for x, y in zip(xs, ys):
                    ax.annotate(fmt_ns(y), (x, y), textcoords="offset points", xytext=(9 * side, -3),
                                fontsize=8, color=style["color"], ha="left" if side > 0 else "right")
                counts += xs
                drawn += 1
        one = inline.get(())
        if one and one.median_ns:
            ax.plot([1], [one.median_ns], label="tessera session, one-thread backend (inline)",
                    color="C1", marker="D", ls="none", ms=7)
            ax.annotate(fmt_ns(one.median_ns), (1, one.median_ns), textcoords="offset points",
                        xytext=(9, -3), fontsize=8, color="C1")
            drawn += 1
        # The handoffs to one worker thread and the direct call have no thread count: lines across.
        for s, label, style in (
            (condvar, "install-style: condvar handoff to one worker", dict(color="C3", ls="--", lw=1.5)),
            (direct, "direct call, no session (floor)", dict(color="0.5", ls=":", lw=1.2)),
        ):
            e = s.get(())
            if e and e.median_ns:
                ax.axhline(e.median_ns, label=f"{label}: {fmt_ns(e.median_ns)}", **style)
                drawn += 1
        if drawn == 0:
            self.plt.close(fig)
            return self.skip(what, "no empty-session benchmark results")
        self.log_y(ax, short_time)
        self.thread_axis(ax, counts)
        self.style(ax, "backend threads", "time per entry (log scale; median of repetitions)")
        ax.set_title(f"Cost of entering the pool once: empty session vs baselines\n({self.where})", fontsize=11)
        ax.legend(fontsize=8, loc="upper center", bbox_to_anchor=(0.5, -0.13), ncol=2, frameon=False)
        self.save(fig, "session_entry.png")

    # b) per-op cost vs chain depth at width 8 and 4096
    def dispatch_grid(self) -> None:
        what = "b (per-op cost vs chain depth, dispatch_grid.png)"
        binary = self.res.find_binary("BM_Chain_")
        if binary is None:
            return self.skip(what, "needs BM_Chain_* from dispatch_grid_bench (not run or filtered out)")
        variants = (
            ("BM_Chain_Session_Out", "tessera, one session (out-param)", dict(color="C0", marker="o", lw=2)),
            ("BM_Chain_SessionPerOp", "tessera, session per op", dict(color="C1", marker="s", lw=1.5)),
            ("BM_Chain_EigenTensorPool", "Eigen Tensor, ThreadPoolDevice", dict(color="C2", marker="^", lw=1.5)),
            ("BM_Chain_RawLoop", "raw loop (floor)", dict(color="0.5", marker=".", ls=":", lw=1.2)),
        )
        grid: dict[str, dict[int, list[tuple[int, float]]]] = {}
        for prefix, _, _ in variants:
            for args, e in self.series(binary, prefix).items():
                kv = dict(a.split(":", 1) for a in args if ":" in a)
                if "depth" not in kv or "width" not in kv:
                    continue
                sec = e.counter("time_per_op")
                if sec is None or not math.isfinite(sec) or sec <= 0:
                    continue
                grid.setdefault(prefix, {}).setdefault(int(kv["width"]), []).append((int(kv["depth"]), sec * 1e9))
        widths = [w for w in (8, 4096) if any(w in g for g in grid.values())]
        if not widths:
            return self.skip(what, "no BM_Chain_* results at width 8 or 4096")
        fig, axes = self.plt.subplots(1, len(widths), figsize=(6.2 * len(widths), 5), squeeze=False)
        for ax, w in zip(axes[0], widths):
            depths = set()
            for prefix, label, style in variants:
                pts = sorted(grid.get(prefix, {}).get(w, []))
                if not pts:
                    continue
                ax.plot([p[0] for p in pts], [p[1] for p in pts], label=label, **style)
                depths |= {p[0] for p in pts}
            ax.set_xscale("log")
            self.log_y(ax, short_time)
            ax.set_xticks(sorted(depths))
            ax.set_xticklabels([str(d) for d in sorted(depths)])
            ax.xaxis.set_minor_formatter(self.ticker.NullFormatter())
            self.style(ax, "chain depth (ops per chain, log scale)", "CPU time per op (log scale)")
            ax.set_title(f"width {w} floats", fontsize=10)
        handles, labels = axes[0][0].get_legend_handles_labels()
        for ax in axes[0][1:]:
            for h, l in zip(*ax.get_legend_handles_labels()):
                if l not in labels:
                    handles.append(h)
                    labels.append(l)
        fig.suptitle(f"Per-op cost of relu/add chains (median of repetitions; {self.where})", fontsize=11)
        fig.tight_layout()
        fig.legend(handles, labels, loc="upper center", bbox_to_anchor=(0.5, 0.0), ncol=len(labels),
                   fontsize=9, frameon=False)
        self.save(fig, "dispatch_grid.png")

    # c) batched matmul GFLOP/s vs n
    def batched_matmul(self) -> None:
        what = "c (batched matmul GFLOP/s vs n, batched_matmul.png)"
        binary = self.res.find_binary("BM_Batched_")
        if binary is None:
            return self.skip(what, "needs BM_Batched_* from batched_matmul_bench (not run or filtered out)")
        # BM_Batched_<what>_<type>/n<n>/<L2|large>[/t<threads>]
        pat = re.compile(r"^BM_Batched_(Tessera|EigenFixed)_(f32|f64)/n(\d+)/(L2|large)(?:/t(\d+))?$")
        data: dict[tuple[str, str, str, int], list[tuple[int, float]]] = {}
        threads_seen = set()
        for key, e in self.res.binaries[binary].entries.items():
            m = pat.match(key)
            if not m:
                continue
            flops = e.counter("FLOP/s")
            if flops is None or flops <= 0 or not math.isfinite(flops):
                continue
            who, typ, n, batch, t = m.group(1), m.group(2), int(m.group(3)), m.group(4), int(m.group(5) or 0)
            if who == "Tessera":
                threads_seen.add(t)
            data.setdefault((typ, batch, who, t), []).append((n, flops / 1e9))
        types = [t for t in ("f32", "f64") if any(k[0] == t for k in data)]
        if not types:
            return self.skip(what, "no Tessera/EigenFixed batched results with a FLOP/s counter")
        many = max(threads_seen, default=1)
        fig, axes = self.plt.subplots(1, len(types), figsize=(6.4 * len(types), 5.2), squeeze=False, sharey=True)
        for ax, typ in zip(axes[0], types):
            ns = set()
            for batch, ls, note in (("L2", "-", "L2-sized batch"), ("large", "--", "large batch")):
                for who, t, label, color, marker in (
                    ("Tessera", 1, "tessera, 1 thread", "C0", "o"),
                    ("Tessera", many, f"tessera, {many} threads", "C1", "s"),
                    ("EigenFixed", 0, "Eigen fixed-size loop", "C2", "^"),
                ):
                    if label.endswith("threads") and many == 1:
                        continue  # a one-core machine: the 1-thread line is all there is
                    pts = sorted(data.get((typ, batch, who, t), []))
                    if not pts:
                        continue
                    ax.plot([p[0] for p in pts], [p[1] for p in pts], ls=ls, color=color, marker=marker,
                            ms=5 if ls == "-" else 4, lw=1.8 if ls == "-" else 1.2,
                            alpha=1.0 if ls == "-" else 0.8, label=f"{label}, {note}")
                    ns |= {p[0] for p in pts}
            ax.set_xscale("log", base=2)
            self.log_y(ax, lambda v: f"{v:g}")
            ax.set_xticks(sorted(ns))
            ax.set_xticklabels([str(n) for n in sorted(ns)])
            ax.xaxis.set_minor_locator(self.ticker.NullLocator())
            self.style(ax, "matrix size n (n x n, log scale)", "GFLOP/s (2n³ per matrix, log scale)")
            ax.set_title({"f32": "float", "f64": "double"}[typ], fontsize=10)
        handles, labels = [], []
        for ax in axes[0]:
            for h, l in zip(*ax.get_legend_handles_labels()):
                if l not in labels:
                    handles.append(h)
                    labels.append(l)
        # A legend column per variant: its L2 line above its large-batch line.
        variants = []
        for k in range(len(labels)):
            v = labels[k].rsplit(", ", 1)[0]
            if v not in variants:
                variants.append(v)
        order = sorted(range(len(labels)), key=lambda k: (variants.index(labels[k].rsplit(", ", 1)[0]),
                                                           "large" in labels[k]))
        rows = 2 if any("large" in l for l in labels) else 1
        handles, labels = [handles[k] for k in order], [labels[k] for k in order]
        fig.suptitle(f"Batched matmul throughput, one batched_matmul call per batch (median of repetitions; "
                     f"{self.where})", fontsize=11)
        fig.tight_layout()
        fig.legend(handles, labels, loc="upper center", bbox_to_anchor=(0.5, 0.0),
                   ncol=max(1, len(labels) // rows), fontsize=9, frameon=False)
        self.save(fig, "batched_matmul.png")

    # d) GEMM scaling vs threads
    def gemm(self) -> None:
        what = "d (GEMM scaling vs threads, gemm_scaling.png)"
        binary = self.res.find_binary("BM_Gemm_Tessera")
        if binary is None:
            return self.skip(what, "needs BM_Gemm_Tessera from matmul_bench (not run or filtered out)")
        tess: dict[int, list[tuple[int, float]]] = {}
        for args, e in self.series(binary, "BM_Gemm_Tessera").items():
            flops = e.counter("FLOP/s")
            if len(args) == 2 and flops:
                tess.setdefault(int(args[0]), []).append((int(args[1]), flops / 1e9))
        eigen = {int(a[0]): e.counter("FLOP/s") / 1e9
                 for a, e in self.series(binary, "BM_Gemm_Eigen1").items() if len(a) == 1 and e.counter("FLOP/s")}
        if not tess:
            return self.skip(what, "no BM_Gemm_Tessera results with a FLOP/s counter")
        counts = sorted({t for pts in tess.values() for t, _ in pts} | {1})
        sizes = sorted(tess)
        fig, (ax, ax2) = self.plt.subplots(1, 2, figsize=(12.4, 5))
        # Left: GFLOP/s against n, a line per thread count and Eigen's single-threaded GEMM.
        for i, t in enumerate(counts):
            pts = sorted((n, dict(tess[n]).get(t)) for n in sizes if dict(tess[n]).get(t))
            if pts:
                ax.plot([p[0] for p in pts], [p[1] for p in pts], color=f"C{i}", marker="o", lw=1.8,
                        label=f"tessera, {t} thread{'s' if t > 1 else ''}")
        if eigen:
            pts = sorted(eigen.items())
            ax.plot([p[0] for p in pts], [p[1] for p in pts], color="0.35", marker="x", ms=8, ls="--", lw=1.2,
                    label="Eigen, 1 thread")
        ax.set_xscale("log", base=2)
        ax.set_xticks(sizes)
        ax.set_xticklabels([str(n) for n in sizes])
        ax.xaxis.set_minor_locator(self.ticker.NullLocator())
        ax.set_ylim(bottom=0, top=ax.get_ylim()[1] * 1.08)
        self.style(ax, "matrix size n (n x n, log scale)", "GFLOP/s (2n³ per product)")
        ax.set_title("throughput", fontsize=10)
        ax.legend(fontsize=8.5, loc="lower right", framealpha=0.9)
        # Right: speedup over tessera's own single-threaded time, a line per n.
        for i, n in enumerate(sizes):
            pts = sorted(tess[n])
            base = dict(pts).get(1)
            if base:
                ax2.plot([p[0] for p in pts], [p[1] / base for p in pts], color=f"C{i + len(counts)}",
                         marker="o", lw=1.8, label=f"n = {n}")
        ax2.plot(counts, counts, color="0.5", ls=":", lw=1.2, label="linear scaling")
        self.thread_axis(ax2, counts)
        ax2.set_ylim(bottom=0, top=max(counts) * 1.12)
        self.style(ax2, "threads", "speedup over tessera at 1 thread")
        ax2.set_title("scaling with threads", fontsize=10)
        ax2.legend(fontsize=8.5, loc="upper left", framealpha=0.9)
        fig.suptitle(f"Square float GEMM, C = A·B (median of repetitions; {self.where})", fontsize=11)
        fig.tight_layout()
        self.save(fig, "gemm_scaling.png")

    def all(self) -> None:
        for draw in (self.session_entry, self.dispatch_grid, self.batched_matmul, self.gemm):
            try:
                draw()
            except Exception as e:  # a plot must not cost the report
                self.notes.append(f"plot {draw.__name__} failed: {type(e).__name__}: {e}")


# --- summary.md -----------------------------------------------------------------------------------

PLOT_TITLES = {
    "session_entry.png": "Empty-session cost vs thread count",
    "dispatch_grid.png": "Per-op cost vs chain depth",
    "batched_matmul.png": "Batched matmul GFLOP/s vs n",
    "gemm_scaling.png": "GEMM throughput and scaling vs threads",
}


def cache_text(caches) -> str:
    parts = []
    for c in caches or []:
        size = int(c.get("size", 0))
        size_s = f"{size >> 20} MiB" if size >= 1 << 20 else f"{size >> 10} KiB"
        share = int(c.get("num_sharing", 0) or 0)
        parts.append(f"L{c.get('level', '?')} {str(c.get('type', '')).lower()} {size_s}"
                     + (f" (x{share} sharing)" if share > 1 else ""))
    return ", ".join(parts) or "not reported"


def write_summary(res: Results, plots: list[Path], plot_notes: list[str], compare_md: str | None) -> Path:
    md: list[str] = [f"# tessera benchmarks: {res.folder.name}", ""]
    info = res.info
    if info:
        line = []
        for k, label in (("mode", "mode"), ("filter", "filter"), ("commit", "commit"), ("started", "started"),
                         ("elapsed", "benchmark time")):
            if info.get(k):
                line.append(f"{label}: `{info[k]}`" if k in ("filter", "commit") else f"{label}: {info[k]}")
        if line:
            md += ["; ".join(line) + ".", ""]

    # Machine facts: Google Benchmark's context plus the text the binaries print.
    ctx = next((b.context for b in res.binaries.values() if b.context), {})
    md += ["## Machine", ""]
    if ctx:
        md += ["| fact | value |", "|---|---|"]
        load = ctx.get("load_avg")
        for label, value in (
            ("host", ctx.get("host_name")),
            ("CPUs (Google Benchmark)", ctx.get("num_cpus")),
            ("MHz per CPU", ctx.get("mhz_per_cpu")),
            ("CPU frequency scaling", {True: "enabled", False: "disabled"}.get(ctx.get("cpu_scaling_enabled"))),
            ("caches", cache_text(ctx.get("caches"))),
            ("load average at start", ", ".join(f"{x:.2f}" for x in load) if load else None),
            ("Google Benchmark library build", ctx.get("library_build_type")),
            ("date", ctx.get("date")),
        ):
            if value is not None:
                md.append(f"| {label} | {md_cell(str(value))} |")
        md.append("")
    facts = next((split_machine_facts(b.summary_text)[0] for b in res.binaries.values()
                  if split_machine_facts(b.summary_text)[0]), "")
    if facts:
        md += ["As the benchmark binaries print it (the first binary's; only the date differs between them):",
               "", "```", facts, "```", ""]
    load = ctx.get("load_avg") or []
    cpus = ctx.get("num_cpus") or 0
    # The benchmarks load the machine themselves once they run; a load at the start of the first
    # one of at least a CPU each is other work (a build that has just finished counts too).
    if load and cpus and load[0] >= cpus:
        md += [f"**The machine was busy when the benchmarks started** (1-minute load average "
               f"{load[0]:.2f} on {cpus} CPUs; a build that has just finished counts too): if other work "
               f"went on, times are inflated and multi-thread results and ratios are the least "
               f"trustworthy. Each binary's section below gives the load at its start.", ""]
    if ctx.get("library_build_type") == "debug":
        md += ["Google Benchmark's library reports a debug build (Debian builds it without NDEBUG); the "
               "timed loop (`for (auto _ : state)`) is inline code from its header, compiled with the "
               "benchmarks' Release flags.", ""]

    # One contract section for all binaries.
    all_tables = {name: parse_contract_tables(name, b.summary_text) for name, b in res.binaries.items()}
    contract = [r for tables in all_tables.values() for t in tables for r in t.rows if r.has_target]
    met = sum(r.verdict == "pass" for r in contract)
    missed = [r for r in contract if r.verdict == "MISS"]
    unmeasured = sum(r.verdict not in ("pass", "MISS") for r in contract)
    md += ["## Contract", ""]
    if contract:
        md.append(f"{met} of {met + len(missed)} targets met"
                  + (f", {len(missed)} missed" if missed else "")
                  + (f"; {unmeasured} not measured in this run (filtered out, or failed)" if unmeasured else "")
                  + ". Targets are DESIGN.md section 4; \"measured\" is the ratio the target applies to (the "
                  "time, for a target in ns).")
        md += ["", "| bench | measure | tessera | baseline | measured | target | verdict |",
               "|---|---|--:|--:|--:|--:|---|"]
        for r in contract:
            verdict = "**MISS**" if r.verdict == "MISS" else r.verdict
            md.append(f"| {r.binary} | {md_cell(r.measure)} | {r.tessera} | {r.baseline} | {r.measured} | "
                      f"{r.target.replace('<=', '≤').replace('>=', '≥')} | {verdict} |")
        md.append("")
    else:
        md += ["No contract table found in the *.summary.txt files (no binary ran, or they were filtered out).", ""]
    for name, tables in all_tables.items():
        for t in tables:
            counted = sum(r.verdict in ("pass", "MISS") for r in t.rows if r.has_target)
            passed = sum(r.verdict == "pass" for r in t.rows if r.has_target)
            if t.checked is not None and (t.checked, t.met) != (counted, passed):
                res.warnings.append(f"{name}: the table says {t.met} of {t.checked} targets met, "
                                    f"the parsed rows {passed} of {counted}")

    if plots or plot_notes:
        md += ["## Plots", ""]
        for p in plots:
            md += [f"### {PLOT_TITLES.get(p.name, p.stem)}", "", f"![{PLOT_TITLES.get(p.name, p.stem)}]({p.name})", ""]
        for n in plot_notes:
            md.append(f"- {n}")
        if plot_notes:
            md.append("")

    if compare_md:
        md += [compare_md, ""]

    md += ["## Per binary", ""]
    for name, b in res.binaries.items():
        md += [f"### {name}", ""]
        details = []
        if info.get(f"elapsed.{name}"):
            details.append(f"ran {info[f'elapsed.{name}']}")
        if info.get(f"exit.{name}", "0") != "0":
            details.append(f"**exited with status {info[f'exit.{name}']}**")
        if b.entries:
            details.append(f"{len(b.entries)} benchmarks in {name}.json")
        if b.context.get("load_avg"):
            details.append(f"1-minute load average at its start {b.context['load_avg'][0]:.2f}")
        if details:
            md += ["; ".join(details) + ".", ""]
        notes = stderr_notes(b.stderr_text)
        if notes:
            md += ["On stderr:", "", "```", *notes, "```", ""]
        if b.errors:
            md += ["Benchmarks that reported an error:", ""] + [f"- {md_cell(e)}" for e in b.errors] + [""]
        body = split_machine_facts(b.summary_text)[1]
        if body:
            md += ["```", body, "```", ""]
        else:
            md += ["(no summary printed)", ""]

    skipped = {k[len("skipped."):]: v for k, v in info.items() if k.startswith("skipped.")}
    for name, why in skipped.items():
        md += [f"### {name}", "", f"Not run: {why}.", ""]

    if res.warnings:
        md += ["## Warnings", ""] + [f"- {w}" for w in res.warnings] + [""]

    out = res.folder / "summary.md"
    out.write_text("\n".join(md).rstrip("\n") + "\n")
    return out


def main(argv: list[str]) -> int:
    ap = argparse.ArgumentParser(
        prog="scripts/bench_report.py",
        description="Writes summary.md and PNG plots for a scripts/bench results folder.")
    ap.add_argument("folder", type=Path, help="results folder: <name>.json, <name>.summary.txt, ...")
    ap.add_argument("--compare", type=Path, metavar="BASE_DIR", help="an earlier results folder to compare with")
    ap.add_argument("--noise-floor", type=float, default=5.0, metavar="PCT",
                    help="the smallest change --compare flags, in percent (default 5)")
    ap.add_argument("--no-plots", action="store_true", help="write summary.md only")
    args = ap.parse_args(argv)

    if not args.folder.is_dir():
        print(f"bench_report: no folder {args.folder}", file=sys.stderr)
        return 2
    res = load_results(args.folder)
    if not res.binaries:
        print(f"bench_report: no results (*.json, *.summary.txt) in {args.folder}", file=sys.stderr)
        return 1

    compare_md = None
    if args.compare is not None:
        if not args.compare.is_dir():
            print(f"bench_report: no folder {args.compare} to compare with", file=sys.stderr)
            return 2
        base = load_results(args.compare)
        text, compare_md = compare_report(res, base, args.noise_floor / 100.0)
        (args.folder / "compare.txt").write_text(text + "\n")
        print(text)
        print()

    plots: list[Path] = []
    plot_notes: list[str] = []
    if not args.no_plots:
        try:
            import matplotlib
            matplotlib.use("Agg")
            import matplotlib.pyplot as plt
            import matplotlib.ticker as ticker
        except ImportError:
            plot_notes.append("plots skipped: python3-matplotlib is not installed (scripts/deps --plots installs it)")
        else:
            for name in PLOT_TITLES:  # a plot skipped this time must not leave an old one behind
                (args.folder / name).unlink(missing_ok=True)
            p = Plotter(res, plt, ticker)
            p.all()
            plots, plot_notes = p.written, p.notes
    for n in plot_notes:
        print(n)

    summary = write_summary(res, plots, plot_notes, compare_md)
    for w in res.warnings:
        print(f"warning: {w}", file=sys.stderr)
    print(f"summary: {summary}")
    for p in plots:
        print(f"plot:    {p}")
    return 0


if __name__ == "__main__":
    signal.signal(signal.SIGPIPE, signal.SIG_DFL)  # | head ends quietly
    sys.exit(main(sys.argv[1:]))

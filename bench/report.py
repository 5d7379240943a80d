"""Turns raw samples into the table, results.json, the chart and
docs/PERFORMANCE.md."""

import json
import math
import os
import shutil
import statistics

from workloads import GROUPS

KEYS = [key for _, keys in GROUPS for key, _ in keys]
BYTES = {"write", "read-cold", "read-warm"}


def summarise(samples):
    """samples: list of seconds -> {median, min, max, n}."""
    if not samples:
        return None
    return {"median": statistics.median(samples), "min": min(samples), "max": max(samples), "n": len(samples)}


def fmt_time(sec):
    if sec is None:
        return "-"
    if sec < 1e-3:
        return f"{sec * 1e6:.0f} µs"
    if sec < 1:
        return f"{sec * 1e3:.3g} ms"
    return f"{sec:.3g} s"


def fmt_ratio(r):
    return "-" if r is None else (f"{r:.2f}×" if r < 10 else f"{r:.1f}×" if r < 100 else f"{r:.0f}×")


def rate(key, median, sizes):
    if not median:
        return ""
    per = {
        "create": sizes.files,
        "stat": sizes.files,
        "list": sizes.files,
        "unlink": sizes.files,
        "ls-lR": sizes.small,
        "cat": sizes.small,
        "randread": sizes.rand,
        "untar": sizes.tree,
        "rm-rf": sizes.tree,
        "ls-lR-expired": sizes.small,
        "find-first": sizes.find_files,
        "find-expired": sizes.find_files,
        "sqlite": sizes.sqlite_rows,
    }
    if key in BYTES:
        return f"{sizes.big_mib / median:,.0f} MiB/s"
    return f"{per[key] / median:,.0f} /s" if key in per else ""


def paired_ratio(samples, base):
    """Median over repetitions of sample / base sample of the same
    repetition. Systems take their turns of a repetition within seconds of
    each other, so a burst of load on this shared machine slows both sides
    of a pair; the plain ratio of medians can pair a slow sample with a fast
    one. None unless both have a sample for every repetition."""
    if not samples or len(samples) != len(base) or not all(base):
        return None
    return statistics.median(x / b for x, b in zip(samples, base, strict=False))


def rows(results, systems, labels, sizes):
    """One row per workload x system: cells as strings, plus the ratios."""
    out = []
    for key in KEYS:
        per = results["workloads"].get(key, {})
        base = {s: (per.get(s) or {}).get("summary") for s in ("native", "passthrough_ll")}
        for name in systems:
            entry = per.get(name)
            if entry is None:
                continue
            s = entry.get("summary")
            if not s:
                out.append([labels[key], name, "failed: " + entry.get("error", "?")[:60], "", "", "", "", ""])
                continue
            ratios = [
                s["median"] / b["median"] if b and b["median"] else None
                for b in (base["native"], base["passthrough_ll"])
            ]
            paired = paired_ratio(entry["samples"], (per.get("passthrough_ll") or {}).get("samples") or [])
            out.append(
                [
                    labels[key],
                    name,
                    fmt_time(s["median"]),
                    f"{fmt_time(s['min'])}–{fmt_time(s['max'])}",
                    fmt_ratio(ratios[0]),
                    fmt_ratio(ratios[1]),
                    fmt_ratio(paired),
                    rate(key, s["median"], sizes),
                ]
            )
    return out


HEADER = ["workload", "system", "median", "min–max", "× native", "× passthrough_ll", "paired × pt_ll", "rate"]


def text_table(table):
    widths = [max(len(r[i]) for r in [HEADER] + table) for i in range(len(HEADER))]
    lines, last = [], None
    for r in [HEADER] + table:
        first = r[0] if r[0] != last else ""
        last = r[0]
        cells = [first] + r[1:]
        lines.append("  ".join(c.ljust(w) for c, w in zip(cells, widths, strict=False)).rstrip())
        if r is HEADER:
            lines.append("  ".join("-" * w for w in widths))
    return "\n".join(lines)


def markdown_table(table):
    lines = ["| " + " | ".join(HEADER) + " |", "|" + "---|" * len(HEADER)]
    last = None
    for r in table:
        first = r[0] if r[0] != last else ""
        last = r[0]
        lines.append("| " + " | ".join([first] + r[1:]) + " |")
    return "\n".join(lines)


def chart(plt, results, systems, labels, path):
    """Bars of median/native per workload, one colour per system, log scale."""
    others = [s for s in systems if s != "native"]
    keys = [k for k in KEYS if (results["workloads"].get(k, {}).get("native") or {}).get("summary")]
    if not others or not keys:
        return False
    fig, ax = plt.subplots(figsize=(max(13, 0.6 * len(keys)), 5.5))
    width = 0.8 / len(others)
    for i, name in enumerate(others):
        xs, ys = [], []
        for j, key in enumerate(keys):
            per = results["workloads"][key]
            s = (per.get(name) or {}).get("summary")
            if s:
                xs.append(j + (i - (len(others) - 1) / 2) * width)
                ys.append(s["median"] / per["native"]["summary"]["median"])
        bars = ax.bar(xs, ys, width, label=results["systems"][name]["label"])
        ax.bar_label(bars, labels=[fmt_ratio(y) for y in ys], fontsize=6, rotation=90, padding=2)
    ax.axhline(1.0, color="black", linewidth=0.8)
    ax.set_yscale("log")
    ax.margins(y=0.15)
    ax.set_xticks(range(len(keys)))
    ax.set_xticklabels([labels[k] for k in keys], rotation=30, ha="right", fontsize=8)
    ax.set_ylabel("time relative to the native directory (log scale, lower is better)")
    m = results["machine"]
    ax.set_title(
        f"ScopeFS benchmark — median of {results['config']['reps']} runs, "
        f"backing on {m['backing']}, {m['nproc']} CPUs, kernel {m['kernel']}",
        fontsize=10,
    )
    ax.legend(fontsize=8)
    ax.grid(axis="y", which="both", alpha=0.3)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return True


def median_ratio(results, key, system, base):
    """SYSTEM's median of workload KEY over BASE's, or None."""
    per = results["workloads"].get(key, {})
    a, b = ((per.get(name) or {}).get("summary") for name in (system, base))
    return a["median"] / b["median"] if a and b and b["median"] else None


# Issue 33's goals for one full run: (what, workload, system, base, limit).
GOALS = [
    ("app's container: cold read", "read-cold", "scopefs-container", "native", 1.2),
    ("app's container: write", "write", "scopefs-container", "native", 1.2),
    ("app's container: SQLite inserts", "sqlite", "scopefs-container", "native", 1.3),
    ("provider folder: cold read", "read-cold", "scopefs", "native", 2.0),
    ("provider folder: write", "write", "scopefs", "native", 2.0),
    ("`git status` again at once", "git-again", "scopefs", "native", 1.5),
    ("`git status` again after 2 s", "git-expired", "scopefs", "native", 1.5),
]
BASE_NAMES = {"native": "native", "passthrough_ll": "passthrough_ll"}


def goals_section(results, labels):
    """The goal table: each goal's ratio in this run, met or not. ScopeFS
    here is the app view of a provider folder (`scopefs`) unless a row
    names the container."""
    lines = ["| goal | ratio in this run | limit | met |", "|---|---|---|---|"]

    def row(what, ratio, limit):
        met = "-" if ratio is None else ("met" if ratio <= limit else "**not met**")
        lines.append(f"| {what} | {fmt_ratio(ratio)} | ≤ {limit:g}× | {met} |")

    for what, key, system, base, limit in GOALS:
        row(f"{what} × {BASE_NAMES[base]}", median_ratio(results, key, system, base), limit)
    to_ptll = {key: median_ratio(results, key, "scopefs", "passthrough_ll") for key in KEYS}
    to_ptll = {key: r for key, r in to_ptll.items() if r is not None}
    if to_ptll:
        over = sorted((k for k, r in to_ptll.items() if r > 1.0), key=lambda k: -to_ptll[k])
        worst = max(to_ptll.values())
        named = "; over: " + ", ".join(f"{labels[k]} {fmt_ratio(to_ptll[k])}" for k in over) if over else ""
        row(f"every workload × passthrough_ll (the worst{named})", worst, 1.0)
        geomean = math.exp(statistics.mean(math.log(r) for r in to_ptll.values()))
        row(f"geometric mean over the {len(to_ptll)} workloads × passthrough_ll", geomean, 0.6)
    return "\n".join(lines)


def fleet_section(results, labels):
    """scopefs-fleet against scopefs, workload by workload: the same FUSE
    path serving a snapshot of the fleet's PostgreSQL store instead of
    SQLite's (issue 34, SPEC S36, S44). Empty unless both ran."""
    lines = ["| workload | scopefs | scopefs-fleet | × scopefs | paired × scopefs |", "|---|---|---|---|---|"]
    ratios, paired_ratios = [], []
    for key in KEYS:
        per = results["workloads"].get(key, {})
        sqlite, fleet = (per.get(name) or {} for name in ("scopefs", "scopefs-fleet"))
        if not sqlite.get("summary") or not fleet.get("summary"):
            continue
        ratio = fleet["summary"]["median"] / sqlite["summary"]["median"]
        ratios.append(ratio)
        paired = paired_ratio(fleet["samples"], sqlite["samples"])
        if paired:
            paired_ratios.append(paired)
        lines.append(
            f"| {labels[key]} | {fmt_time(sqlite['summary']['median'])} | {fmt_time(fleet['summary']['median'])} "
            f"| {fmt_ratio(ratio)} | {fmt_ratio(paired)} |"
        )
    if not ratios:
        return ""

    def geomean(values):
        return math.exp(statistics.mean(math.log(r) for r in values)) if values else None

    lines.append(
        f"| geometric mean over {len(ratios)} workloads | | | {fmt_ratio(geomean(ratios))} "
        f"| {fmt_ratio(geomean(paired_ratios))} |"
    )
    return "\n".join(lines)


def portal_section(results, labels):
    """ScopeFS's portal layout against xdg-document-portal, workload by
    workload (issue 52): the same workloads through a folder document of
    each, the goal being at or under the reference on every one. Empty
    unless both ran."""
    lines = [
        "| workload | xdg-document-portal | scopefs-portal | × reference | paired × reference |",
        "|---|---|---|---|---|",
    ]
    ratios, paired_ratios, failed = {}, [], []
    for key in KEYS:
        per = results["workloads"].get(key, {})
        reference, ours = (per.get(name) or {} for name in ("portal", "scopefs-portal"))
        if not reference.get("summary"):
            continue
        if not ours.get("summary"):
            if ours:
                failed.append(labels[key])
                lines.append(f"| {labels[key]} | {fmt_time(reference['summary']['median'])} | failed | | |")
            continue
        ratio = ours["summary"]["median"] / reference["summary"]["median"]
        ratios[key] = ratio
        paired = paired_ratio(ours["samples"], reference["samples"])
        if paired:
            paired_ratios.append(paired)
        lines.append(
            f"| {labels[key]} | {fmt_time(reference['summary']['median'])} | {fmt_time(ours['summary']['median'])} "
            f"| {fmt_ratio(ratio)} | {fmt_ratio(paired)} |"
        )
    if not ratios:
        return ""
    geomean = math.exp(statistics.mean(math.log(r) for r in ratios.values()))
    paired_mean = math.exp(statistics.mean(math.log(r) for r in paired_ratios)) if paired_ratios else None
    lines.append(
        f"| geometric mean over {len(ratios)} workloads | | | {fmt_ratio(geomean)} | {fmt_ratio(paired_mean)} |"
    )
    over = sorted((k for k, r in ratios.items() if r > 1.0), key=lambda k: -ratios[k])
    lines += [
        "",
        "Goal (issue 52): every workload ≤ 1.0× the reference portal: "
        + ("met" if not over and not failed else "**not met**")
        + ("; over: " + ", ".join(f"{labels[k]} {fmt_ratio(ratios[k])}" for k in over) if over else "")
        + ("; failed: " + ", ".join(failed) if failed else "")
        + ".",
    ]
    return "\n".join(lines)


def write_json(results, path):
    with open(path, "w") as f:
        json.dump(results, f, indent=2, sort_keys=False)
        f.write("\n")


def scopefs_section(results):
    """Markdown (also printed) for the ScopeFS-specific costs."""
    sc = results.get("scopefs_costs") or {}
    lines = []
    rev = sc.get("revocation")
    if rev:
        lines.append(
            f"Revocation latency ({rev.get('completed', 0)} of {rev.get('requested', '?')} "
            f"revokes completed, {rev.get('timeouts', 0)} never denied within 3 s):"
        )
        if rev.get("completed"):
            lines.append("")
            lines.append("| measured | p50 | p99 | min | max |")
            lines.append("|---|---|---|---|---|")
        for key, what in (
            ("after_return_ms", "first EPERM after `scopefs revoke` returned"),
            ("after_start_ms", "first EPERM after `scopefs revoke` started"),
            ("revoke_cli_ms", "`scopefs revoke` run time"),
        ):
            v = rev.get(key)
            if v:
                lines.append(
                    f"| {what} | {v['p50']:.3f} ms | {v['p99']:.3f} ms | {v['min']:.3f} ms | {v['max']:.3f} ms |"
                )
        if rev.get("completed"):
            lines.append(
                "\nNegative: the reader was denied before the CLI returned (the CLI waits "
                "for the daemon's acknowledgement, SPEC S13)."
            )
        if rev.get("error"):
            lines.append(f"\nRevocation test error: {rev['error']}")
        lines.append("")
    mem = sc.get("memory")
    if mem:
        lines.append(
            f"Daemon memory and descriptors while an app process walks {mem.get('files', 0):,} files "
            f"(os.walk + stat{'; took {:.1f} s'.format(mem['walk_seconds']) if 'walk_seconds' in mem else ''}):"
        )
        lines.append("")
        lines.append("| when | VmRSS | open fds | threads |")
        lines.append("|---|---|---|---|")
        for key, what in (
            ("before", "before the walk"),
            ("during_peak", "during (peak)"),
            ("after", "after the walk"),
            ("after_forget", "after drop_caches (kernel forgot)"),
            ("after_unmount", "after unmount"),
        ):
            v = mem.get(key)
            if v is None:
                continue
            if v.get("alive") is False:
                lines.append(f"| {what} | daemon exited | | |")
            else:
                lines.append(f"| {what} | {v['rss_kib'] / 1024:.1f} MiB | {v['fds']:,} | {v['threads']} |")
        if mem.get("error"):
            lines.append(f"\nMemory test error: {mem['error']}")
        lines.append("")
    walk = sc.get("folder_walk")
    if walk:
        peak = walk.get("during_peak", {})
        bound = walk.get("bound", {})
        lines.append(
            f"Walk of {walk.get('folders', 0):,} folders (`find -type d`, opt-in): "
            + (
                f"error: {walk['error']}"
                if walk.get("error")
                else f"{walk.get('listed', 0):,} listed in {walk.get('walk_seconds', 0):.1f} s; "
                f"daemon fds {walk.get('before', {}).get('fds', '?')} → peak {peak.get('fds', '?'):,} "
                f"(folder cache {bound.get('folder_cache', '?')}), RSS peak {peak.get('rss_kib', 0) / 1024:.0f} MiB"
            )
        )
        lines.append("")
    budget = sc.get("node_budget")
    if budget:
        lines += node_budget_lines(budget)
    pol = sc.get("policy_bench")
    if pol:
        lines.append(f"Policy decision microbenchmark (`{os.path.basename(pol['binary'])}`):")
        lines.append("")
        lines.append("```json\n" + json.dumps(pol.get("result", pol), indent=2) + "\n```")
        lines.append("")
    elif sc:
        lines.append("Policy decision microbenchmark: no binary yet (set SCOPEFS_POLICY_BENCH).")
        lines.append("")
    return "\n".join(lines)


def node_budget_lines(budget):
    """The node budget row (issue 52): one walk per `--max-nodes` setting."""
    lines = [
        f"Walk of {budget.get('folders', 0):,} folders (`find -type d`) with the default node budget and "
        "without one (`--max-nodes 0`), each on a fresh mount:",
        "",
        "| --max-nodes | listed | walk | daemon RSS before → peak | nodes peak → after |",
        "|---|---|---|---|---|",
    ]
    for setting, run in budget.get("runs", {}).items():
        if run.get("error"):
            lines.append(f"| {setting} | error: {run['error']} | | | |")
            continue
        peak, after = run.get("during_peak", {}), run.get("after", {})
        lines.append(
            f"| {setting} | {run.get('listed', 0):,} | {run.get('walk_seconds', 0):.1f} s | "
            f"{run.get('before', {}).get('rss_kib', 0) / 1024:.0f} → {peak.get('rss_kib', 0) / 1024:.0f} MiB | "
            f"{peak.get('nodes') or 0:,} → {after.get('nodes') or 0:,} |"
        )
    lines.append("")
    return lines


def steal_line(config, machine):
    """How much CPU other guests of the host took while phases ran: the
    noise floor a reader should weigh the ratios against."""
    seconds, stolen = config.get("phase_seconds"), config.get("phase_steal_seconds")
    if not seconds:
        return "- CPU steal during timed phases: -"
    share = stolen / (seconds * machine["nproc"])
    return (
        f"- CPU steal during timed phases: {stolen:.0f} s of {seconds:.0f} s × {machine['nproc']} CPUs "
        f"({share:.0%}; time the hypervisor ran other guests — the higher, the noisier the ratios)"
    )


def performance_md(results, table, chart_name, labels):
    m, c = results["machine"], results["config"]
    skipped = [
        f"- {v['label']}: skipped — {v['reason']}" for v in results["systems"].values() if v["status"] == "skipped"
    ]
    failed = [f"- {v['label']}: failed — {v['reason']}" for v in results["systems"].values() if v["status"] == "failed"]
    parts = [
        "# Performance",
        "",
        "Generated by `make bench` (`python3 bench/run.py`); see `bench/README.md` for what each",
        "workload measures and how caches are dropped. SPEC S36–S38.",
        "",
        "## Machine",
        "",
        f"- date: {m['date']}",
        f"- CPUs (nproc): {m['nproc']} — {m['cpu']}",
        f"- memory: {m['memory_gib']:.1f} GiB",
        f"- kernel: {m['kernel']}; {m['os']}",
        f"- backing directory: {m['backing']} (`{m['backing_path']}`)",
        f"- libfuse {m['libfuse']}; xdg-desktop-portal {m.get('portal') or '-'}",
        f"- repetitions: {c['reps']} (median, min–max){' — quick smoke run' if c['quick'] else ''}",
        f"- cache drop before cold reads: {c.get('drop_method') or '-'}",
        f"- whole run: {results['total_seconds']:.0f} s",
        steal_line(c, m),
        "",
        "## Results",
        "",
        "Times are wall-clock seconds of the phase measured inside the process that does it;",
        "ratios are medians divided by the native directory's and by libfuse's C",
        "`passthrough_ll` example's median (lower is better).",
        "",
    ]
    parts += ["Systems:", ""] + [
        f"- {v['label']} — "
        + "; ".join(
            f"{k}: {val}" for k, val in v.items() if k not in ("label", "status", "reason") and val not in ("", None)
        )
        for v in results["systems"].values()
        if v["status"] == "ok"
    ]
    parts += skipped + failed + [""]
    parts += [markdown_table(table), ""]
    if chart_name:
        parts += [f"![time relative to native]({chart_name})", ""]
    if not c["quick"]:
        parts += ["## Goals (issue 33)", "", goals_section(results, labels), ""]
    portal = portal_section(results, labels)
    if portal:
        parts += ["## ScopeFS's portal layout against the reference portal (issue 52)", "", portal, ""]
    section = scopefs_section(results)
    if section:
        parts += ["## ScopeFS-specific costs", "", section]
    return "\n".join(parts).rstrip() + "\n"


NOTES_MARKER = "<!-- notes below are kept by make bench -->"


def write_docs(results, table, chart_path, repo, labels):
    docs = os.path.join(repo, "docs")
    name = None
    if chart_path and os.path.exists(chart_path):
        name = "performance-chart.png"
        shutil.copyfile(chart_path, os.path.join(docs, name))
    path = os.path.join(docs, "PERFORMANCE.md")
    # The hand-written part (what each change bought, why) follows a marker
    # line and survives regeneration.
    kept = ""
    if os.path.exists(path):
        with open(path) as f:
            old = f.read()
        if NOTES_MARKER in old:
            kept = old[old.index(NOTES_MARKER) :]
    with open(path, "w") as f:
        f.write(performance_md(results, table, name, labels))
        if kept:
            f.write("\n" + kept)

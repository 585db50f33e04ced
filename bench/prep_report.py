"""The report of bench/prep_bench.py: per-round wall-time ratios against each mode's baseline, versions, and
the markdown table printed for bench/RESULTS.md. Kept apart from the runs so each file stays readable."""

from __future__ import annotations

import platform
import statistics
import subprocess
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent


def ratio(numerator: dict | None, denominator: dict | None, key: str) -> float | None:
    if not numerator or not denominator or key not in numerator or key not in denominator:
        return None
    return numerator[key] / denominator[key]


def paired_ratios(numerator: dict | None, denominator: dict | None, key: str = "walls_s") -> list[float]:
    """Per-round ratios of wall (or CPU, key "cpus_s") time: round i of one mode against round i of the other."""
    if not numerator or not denominator or "wall_s" not in numerator or "wall_s" not in denominator:
        return []
    if len(numerator.get(key, ())) != len(denominator.get(key, ())):
        return []
    return [n / d for n, d in zip(numerator[key], denominator[key])]


def compute_ratios(results: dict) -> list[dict]:
    """Wall-time ratios are the median of the per-round ratios; the memory ratio is of the medians."""
    a, b, c, d, e = (results.get(mode) for mode in "abcde")
    a0, b_malloc, c_malloc, e_malloc = (results.get(mode) for mode in ("a0", "b+", "c+", "e+"))
    c2, c2_malloc, ah = (results.get(mode) for mode in ("c2", "c2+", "ah"))
    rows = [
        # Issue 10's targets, first as installed by default (glibc: no tcmalloc), then with both sides
        # under the malloc train.py preloads when it is installed.
        ("faster than the HF Rust tokenizer alone, c / a0 (glibc)", (c, a0), ">= 2.5", lambda v: v >= 2.5),
        ("faster than the HF Rust tokenizer alone, c+ / a (tcmalloc)", (c_malloc, a), ">= 2.5", lambda v: v >= 2.5),
        ("faster than the run_clm recipe, b / a0 (glibc)", (b, a0), ">= 6", lambda v: v >= 6),
        ("faster than the run_clm recipe, b+ / a (tcmalloc)", (b_malloc, a), ">= 6", lambda v: v >= 6),
        ("time against fastokens alone, a0 / c2 (glibc)", (a0, c2), "<= 1.5", lambda v: v <= 1.5),
        ("time against fastokens alone, a / c2+ (tcmalloc)", (a, c2_malloc), "<= 1.5", lambda v: v <= 1.5),
        # Beside the targets. Same corpus for (d) and (e): throughput(d) / throughput(e) = wall(e) / wall(d).
        ("throughput with the filter against Kiwi alone, d / e", (e, d), "—", None),
        ("throughput with the filter against Kiwi alone under the same malloc, d / e+", (e_malloc, d), "—", None),
        ("rankzero on the HF tokenizer against fastokens, ah / a", (ah, a), "—", None),
        ("rankzero under glibc malloc against (a), a0 / a", (a0, a), "—", None),
        ("the HF Rust tokenizer against fastokens alone, c / c2", (c, c2), "—", None),
        # Issue 19: near dedup, the default, against none: <= 2 (the aim 1.5).
        ("rankzero with near dedup (the default) against --dedup none, a / an", (a, results.get("an")), "<= 2",
         lambda v: v <= 2),
        ("rankzero with exact dedup against --dedup none, ae / an", (results.get("ae"), results.get("an")), "—", None),
        ("rankzero with near dedup against exact, a / ae", (a, results.get("ae")), "—", None),
        ("rankzero against the --against checkout, a / A", (a, results.get("A")), "—", None),
        ("the data already prepared, against the --against checkout, aw / Aw", (results.get("aw"), results.get("Aw")),
         "—", None),
        # Issue 30: the default prepare (near dedup, masking) against the peers, whole process, wall.
        ("faster than the run_clm recipe, b / a (the default prepare)", (b, a), ">= 8", lambda v: v >= 8),
        ("faster than LitData optimize with fastokens, l / a", (results.get("l"), a), ">= 4", lambda v: v >= 4),
        ("faster than datatrove MinHash + tokenizer, dt / a", (results.get("dt"), a), "> 1", lambda v: v > 1),
        ("faster than the run_clm recipe with --dedup none, b / an", (b, results.get("an")), "—", None),
        ("LitData against --dedup none, l / an", (results.get("l"), results.get("an")), "—", None),
        ("LitData as installed (spawn), ls / a", (results.get("ls"), a), "—", None),
        # A lean reference for a prepare that tokenizes with fastokens and drops exact repeats: l / c3 bounds l / a for
        # any prepare no faster than it.
        ("LitData against the fastokens floor, l / c3", (results.get("l"), results.get("c3")), "—", None),
        ("LitData against the fastokens floor under the malloc, l / c3+", (results.get("l"), results.get("c3+")),
         "—", None),
        ("rankzero against the fastokens floor, a / c3", (a, results.get("c3")), "—", None),
        ("the run_clm recipe against the fastokens floor, b / c3", (b, results.get("c3")), "—", None),
    ]
    # CPU time of the process tree, which a loaded machine distorts less than wall time; no targets. Not for
    # datatrove: its pool's workers are children of a fork server that nobody reaps, so getrusage never sees them.
    an, l, against = (results.get(mode) for mode in ("an", "l", "A"))
    rows += [(f"CPU: {name}", pair, "—", None) for name, pair in (
        ("b / a", (b, a)), ("l / a", (l, a)), ("ls / a", (results.get("ls"), a)), ("b / an", (b, an)),
        ("l / an", (l, an)),
        ("a / an", (a, an)), ("a / A", (a, against)))]
    rows += [(f"rankzero under RANKZERO_MALLOC={label[2:]} against (a), {label} / a", (entry, a), "—", None)
             for label, entry in results.items() if label.startswith("a:")]
    out = []
    for name, (numerator, denominator), target, met in rows:
        cpu = name.startswith("CPU: ")
        per_round = paired_ratios(numerator, denominator, "cpus_s" if cpu else "walls_s")
        value = statistics.median(per_round) if per_round else ratio(numerator, denominator, "cpu_s" if cpu else "wall_s")
        if numerator is None or denominator is None:
            continue  # a mode of it was not run (a failed run still shows, as n/a)
        out.append({"name": name, "value": value, "per_round": per_round, "target": target,
                    "met": None if value is None or met is None else bool(met(value))})
    for base in ("a", "ap", "A"):  # the default, with near dedup's compiled pass held off, another checkout
        one = results.get(base)
        scaled = next((entry for label, entry in results.items() if label.startswith(f"{base}@")), None)
        if one is None or scaled is None:
            continue
        value = ratio(scaled, one, "peak_pss_mb")
        out.append({"name": f"peak PSS {scaled['label']} / {base}", "value": value, "per_round": [],
                    "target": "<= 1.2", "met": None if value is None else value <= 1.2})
    return out


def versions() -> dict:
    found = {"python": platform.python_version()}
    for name in ("tokenizers", "datasets", "transformers", "kiwipiepy", "pyarrow"):
        try:
            module = __import__(name)
            found[name] = getattr(module, "__version__", "?")
        except ImportError:
            found[name] = "absent"
    return found


def git_commit() -> str:
    result = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=REPO, capture_output=True, text=True)
    return result.stdout.strip() or "unknown"


def markdown(report: dict) -> str:
    machine, lines = report["machine"], []
    lines.append(f"### Data preparation — {report['date']}")
    lines.append("")
    lines.append(f"- Machine: {machine['cpu']}, {machine['cores']} usable cores "
                 f"({machine['logical_cpus']} logical), {machine['ram_gb']} GiB RAM; commit {report['commit']}")
    lines.append("- Versions: " + ", ".join(f"{k} {v}" for k, v in report["versions"].items()))
    corpus = report["corpus"]
    if "files" in corpus:
        source = f"{', '.join(f'`{name}`' for name in corpus['files'])}"
        kinds = ""
    else:
        source = f"`scripts/make_corpus.py --size_mb {report['size_mb']:g} --seed {report['seed']}`"
        kinds = (f" (korean {corpus['korean']}, english {corpus['english']}, code {corpus['code']}, "
                 f"junk {corpus['junk']})")
    lines.append(f"- Corpus: {source} — {corpus['bytes'] / 2**20:.1f} MiB, {corpus['documents']} documents{kinds}; "
                 f"tokenizer: {report['tokenizer']}")
    lines.append(f"- Whole-process wall time and peak PSS of the process tree (sampled every 50 ms); "
                 f"median of {report['runs']} round(s), each running every mode back to back; "
                 f"workers: {report['num_proc'] or 'each tool default (all cores)'}")
    if report.get("round_loads"):
        lines.append("- 1-minute load average as each round started: "
                     + ", ".join(f"{load:.1f}" for load in report["round_loads"]))
    lines.append("")
    lines.append("| run | what | wall s, median (rounds) | CPU s, median | MiB/s | peak PSS MB | notes |")
    lines.append("|---|---|---:|---:|---:|---:|---|")
    for label, entry in report["results"].items():
        if "failure" in entry:
            lines.append(f"| ({label}) | {entry['what']} | failed | | | | exit {entry['failure']['returncode']} |")
            continue
        notes = ""
        if entry.get("tokens") is not None:
            notes = (f"docs {entry.get('docs_kept')}/{entry.get('docs_in')} kept, {entry['tokens']:,} tokens, "
                     f"{entry.get('sequences')} blocks; malloc {entry.get('malloc')}")
        elif entry.get("summary"):
            notes = entry["summary"]
        size = f" ({entry['corpus_bytes'] / 2**20:.0f} MiB)" if "@" in label else ""
        walls = f"{entry['wall_s']:.1f}"
        if len(entry["walls_s"]) > 1:  # every round's, in order: the ratios below pair them
            walls += f" ({', '.join(f'{wall:.1f}' for wall in entry['walls_s'])})"
        cpu = f"{entry['cpu_s']:.1f}" if "cpu_s" in entry and entry["mode"] != "dt" else "—"  # dt: see above
        lines.append(f"| ({label}) | {entry['what']}{size} | {walls} | {cpu} | {entry['mb_per_s']:.2f} | "
                     f"{entry['peak_pss_mb']:.0f} | {notes} |")
    lines.append("")
    lines.append("| ratio | value | per round | target | met |")
    lines.append("|---|---:|---|---|---|")
    for row in report["ratios"]:
        value = "n/a" if row["value"] is None else f"{row['value']:.2f}"
        rounds = ", ".join(f"{r:.2f}" for r in row["per_round"])
        met = ("—" if row["target"] == "—" else "n/a") if row["met"] is None else ("yes" if row["met"] else "**no**")
        lines.append(f"| {row['name']} | {value} | {rounds} | {row['target']} | {met} |")
    return "\n".join(lines)

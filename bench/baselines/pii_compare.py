"""The planted-value comparison of bench/pii_bench.py against the baselines that run in side venvs: datatrove's
PIIFormatter (e-mail and IP) and Presidio's pattern recognizers (presidio_recognizers.py, beside this file).

Both take the planted documents and, per document, the planted values `[(kind, detector, value)]` and
look-alikes; rankzero's masker runs on the same documents. datatrove rewrites text, so a value counts as masked
when it is gone from the output; Presidio reports spans, so a value counts as found when a reported entity
overlaps it, and a look-alike as flagged when one overlaps it.
"""

from __future__ import annotations

import json
import subprocess
import tempfile
from collections import Counter
from pathlib import Path

from rankzero.data.screen.pii import PiiMasker

PRESIDIO_SCRIPT = Path(__file__).resolve().parent / "presidio_recognizers.py"


def datatrove_baseline(python: str, documents: list[str], planted: list) -> dict:
    script = ("import json,sys\nfrom datatrove.pipeline.formatters import PIIFormatter\nf=PIIFormatter()\n"
              "docs=json.load(open(sys.argv[1]))\njson.dump([f.format(d) for d in docs],open(sys.argv[2],'w'))\n")
    with tempfile.TemporaryDirectory() as tmp:
        source, target = Path(tmp) / "in.json", Path(tmp) / "out.json"
        source.write_text(json.dumps(documents, ensure_ascii=False), encoding="utf-8")
        subprocess.run([python, "-c", script, str(source), str(target)], check=True)
        outputs = json.loads(target.read_text(encoding="utf-8"))
    rankzero = [PiiMasker().mask(text).text for text in documents]
    covered = {"email": "email", "ipv4": "ip_address", "ipv6": "ip_address"}
    scores = {"datatrove": Counter(), "rankzero": Counter(), "total": Counter()}
    looks_changed = Counter()
    for (values, looks), theirs, ours in zip(planted, outputs, rankzero):
        for kind, _, value in values:
            if kind in covered:
                scores["total"][kind] += 1
                scores["datatrove"][kind] += value not in theirs
                scores["rankzero"][kind] += value not in ours
        looks_changed["datatrove"] += sum(look not in theirs for look in looks)
        looks_changed["rankzero"] += sum(look not in ours for look in looks)
    return {name: {kind: f"{scores[name][kind]}/{scores['total'][kind]}" for kind in covered}
            for name in ("datatrove", "rankzero")} | {"look_alikes_changed": dict(looks_changed)}


def presidio_baseline(python: str, documents: list[str], planted: list, real: list[str], kinds: list[str]) -> dict:
    with tempfile.TemporaryDirectory() as tmp:
        paths = [Path(tmp) / name for name in ("in.json", "out.json", "real.json")]
        paths[0].write_text(json.dumps(documents, ensure_ascii=False), encoding="utf-8")
        paths[2].write_text(json.dumps(real, ensure_ascii=False), encoding="utf-8")
        subprocess.run([python, str(PRESIDIO_SCRIPT), *map(str, paths)], check=True)
        result = json.loads(paths[1].read_text(encoding="utf-8"))
    found, total, entities = Counter(), Counter(), {kind: Counter() for kind in kinds}
    flagged, looks_total = Counter(), Counter()
    for document, spans, (values, looks) in zip(documents, result["spans"], planted):
        def hits(piece: str, start: int) -> list[str]:
            end = start + len(piece)
            return [entity for entity, a, b in spans if a < end and start < b]

        for kind, _, value in values:
            total[kind] += 1
            names = hits(value, document.index(value))
            found[kind] += bool(names)
            entities[kind].update(set(names))
        for look in looks:
            looks_total[look] += 1
            flagged[look] += bool(hits(look, document.index(f"참고: {look}.") + len("참고: ")))
    return {"found": f"{sum(found.values())}/{sum(total.values())}",
            "found_by_kind": {kind: f"{found[kind]}/{total[kind]}" for kind in kinds},
            "entities_by_kind": {kind: dict(counter) for kind, counter in entities.items()},
            "look_alikes_flagged": f"{sum(flagged.values())}/{sum(looks_total.values())}",
            "look_alikes_flagged_by_kind": {look: f"{flagged[look]}/{looks_total[look]}" for look in looks_total
                                            if flagged[look]},
            "mb_s_per_core": result["mb_s_per_core"],
            "entities_in_unplanted_real_documents": result["entities_in_real_documents"]}

"""Benchmark scores in the training loop: before the first step (a continued model), at each evaluation, at the end.

    scorer = benchmark_scorer(trainer, args)   # run.py, after RankZeroWeights: None without --benchmarks
    trainer.train(); scorer.at_end()           # every rank, as the scoring is collective

Each scoring (benchmarks.score_suites, every rank) goes to `log_history` as `benchmark/<name>/acc` and
`benchmark/<name>/acc_norm` with `benchmark_seconds` (through `Trainer.log`, hence TensorBoard and every
`--report_to`, and training_curves.png's benchmarks panel), one printed line with its cost, and
`benchmarks.json` in the output dir: per benchmark what score_suites reports of it (items, shots, ...) and the
flags and, per scoring, acc, acc_norm and every item's prediction with its choices' log-likelihoods (the audit). The
run's summary reads the history: first and last scores side by side, and the share of the run the scoring took.

Training is untouched: every random stream is as it was before (evaluation.kept_rng_state), and the model is back
in training mode; the loss curve with and without --benchmarks is the same, bit for bit.
"""

from __future__ import annotations

import json
import os
import re
import time
from pathlib import Path

from transformers import TrainerCallback

from rankzero.train.evaluation import kept_rng_state

RESULTS = "benchmarks.json"
ACC = re.compile(r"^benchmark/(.+)/acc$")


class BenchmarkCallback(TrainerCallback):
    def __init__(self, trainer, suites, *, before_first_step: bool, settings: dict):
        self.trainer = trainer
        self.settings = settings  # the flags that chose the items and prompts, for benchmarks.json
        self.suites = tuple(suites)
        self.before_first_step = before_first_step
        self.path = Path(trainer.args.output_dir) / RESULTS
        self.evaluations: list[dict] = []  # {"step", "seconds", "scores"}, as benchmarks.json keeps them
        self.started = time.perf_counter()

    def on_train_begin(self, args, state, control, **kwargs):
        self.started = time.perf_counter()
        if state.global_step > 0:  # a resume: the scores of the steps before it are kept
            self.evaluations = [entry for entry in self._recorded() if entry["step"] <= state.global_step]
        elif self.before_first_step:
            self.score()

    def on_evaluate(self, args, state, control, **kwargs):
        self.score()

    def at_end(self) -> None:
        """The finished model's scores, unless the evaluation at the last step has just given them."""
        self.score()

    def score(self) -> None:
        trainer = self.trainer
        step = trainer.state.global_step
        if self.evaluations and self.evaluations[-1]["step"] == step:
            return
        from rankzero.train.benchmarks import score_suites

        began = time.perf_counter()
        with kept_rng_state(), trainer.autocast_smart_context_manager():
            scores = score_suites(trainer.model, trainer.processing_class, self.suites,
                                  batch_size=trainer.args.per_device_eval_batch_size)
        seconds = time.perf_counter() - began
        self.evaluations.append({"step": step, "seconds": round(seconds, 3), "scores": scores})
        logs = {}
        for name, score in scores.items():
            logs[f"benchmark/{name}/acc"] = round(score["acc"], 6)
            logs[f"benchmark/{name}/acc_norm"] = round(score["acc_norm"], 6)
        trainer.log({**logs, "benchmark_seconds": round(seconds, 3)})
        if trainer.is_world_process_zero():
            print(self._line(step, scores, seconds), flush=True)
            self._write()

    def _line(self, step: int, scores: dict, seconds: float) -> str:
        parts = [f"{name} acc {score['acc']:.4f} acc_norm {score['acc_norm']:.4f} ({score['items']} items)"
                 for name, score in scores.items()]
        spent = sum(entry["seconds"] for entry in self.evaluations)
        elapsed = time.perf_counter() - self.started
        share = f", {100 * spent / elapsed:.1f}% of the run so far" if step > 0 and elapsed > 0 else ""
        return f"benchmarks at step {step}: " + ", ".join(parts) + f" | {seconds:.2f} s{share}"

    def _recorded(self) -> list[dict]:
        try:
            recorded = json.loads(self.path.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            return []
        benchmarks = recorded.get("benchmarks", {})
        return [{"step": entry["step"], "seconds": entry["seconds"],
                 "scores": {name: {**{k: v for k, v in bench.items() if k != "evaluations"},
                                   **bench["evaluations"][index]} for name, bench in benchmarks.items()}}
                for index, entry in enumerate(recorded.get("steps", []))]

    def _write(self) -> None:
        """benchmarks.json, whole at every scoring (written aside and renamed: a reader never sees half of it): per
        benchmark what score_suites says of it (items, shots, ...) and the flags, then acc, acc_norm and every item's
        prediction at each scoring."""
        benchmarks = {}
        for name, first in self.evaluations[-1]["scores"].items():
            benchmarks[name] = {
                **{key: value for key, value in first.items() if key not in ("acc", "acc_norm", "predictions")},
                "settings": self.settings,
                "evaluations": [{"step": entry["step"], **{key: entry["scores"][name][key]
                                                           for key in ("acc", "acc_norm", "predictions")}}
                                for entry in self.evaluations if name in entry["scores"]]}
        record = {"steps": [{"step": entry["step"], "seconds": entry["seconds"]} for entry in self.evaluations],
                  "benchmarks": benchmarks}
        tmp = self.path.with_name(f".{self.path.name}.{os.getpid()}.tmp")
        tmp.write_text(json.dumps(record, ensure_ascii=False) + "\n", encoding="utf-8")
        os.replace(tmp, self.path)


def benchmark_scorer(trainer, args) -> BenchmarkCallback | None:
    """The --benchmarks scoring added to `trainer` (after RankZeroWeights: scored with the weights in place); None
    without --benchmarks. `args`: the run's Args."""
    if not args.suites:
        return None
    config = args.benchmarks
    settings = {"benchmark_shots": config.benchmark_shots, "benchmark_max_items": config.benchmark_max_items}
    scorer = BenchmarkCallback(trainer, args.suites, before_first_step=bool(args.model.pretrained_model),
                               settings=settings)
    trainer.add_callback(scorer)
    return scorer


def benchmark_summary(history: list[dict], wall_s: float) -> list[str]:
    """The summary's lines: each benchmark's first and last scores (acc / acc_norm), and what the scoring cost."""
    scored = [entry for entry in history if "benchmark_seconds" in entry]
    if not scored:
        return []
    first, last = scored[0], scored[-1]
    names = [ACC.match(key).group(1) for key in last if ACC.match(key)]

    def pair(entry: dict, name: str) -> str:
        return f"{entry[f'benchmark/{name}/acc']:.4f} / {entry[f'benchmark/{name}/acc_norm']:.4f}"

    lines = []
    for name in names:
        if first is last or f"benchmark/{name}/acc" not in first:
            lines.append(f"  benchmark {name}: acc / acc_norm {pair(last, name)} (step {last['step']})")
        else:
            lines.append(f"  benchmark {name}: acc / acc_norm {pair(first, name)} (step {first['step']}) → "
                         f"{pair(last, name)} (step {last['step']})")
    spent = sum(entry["benchmark_seconds"] for entry in scored)
    lines.append(f"  benchmarks: {len(scored)} scorings, {spent:.1f} s ({spent / len(scored):.2f} s each), "
                 f"{100 * spent / max(wall_s, 1e-9):.1f}% of the run")
    return lines

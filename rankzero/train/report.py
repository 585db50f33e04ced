"""What a run shows its user: `training_curves.png` while it trains, a summary when it ends.

    trainer.add_callback(CurvesCallback(output_dir))      # rank 0 redraws the picture at every save and at the end
    print(summary(trainer, output_dir, wall_s, tokens))    # rank 0, once training is over

The picture has a panel for each of training and evaluation loss, learning rate, tokens/s and benchmark
accuracy (--benchmarks, a curve per file) that was logged (none for what was not), against tokens trained
where every training log counts them, else against optimizer steps; a NaN or inf loss is a gap in its line
with a red mark where it was logged. It is read from the Trainer's log history (`trainer_state.json`), drawn
with matplotlib's Agg backend (no display needed) and written atomically, so a user watching the file
never sees half a PNG.
"""

from __future__ import annotations

import math
import os
from pathlib import Path

from transformers import TrainerCallback

from rankzero.train.benchmark_callback import ACC, benchmark_summary

CURVES = "training_curves.png"


def _series(history: list[dict]) -> tuple[str, dict[str, tuple[list, list]]]:
    """(the x axis's label, {curve: (x, values)}) from what was logged: tokens trained where every training log
    has them, else steps. Evaluation logs carry no token count: theirs is read off the training logs by step."""
    training = [entry for entry in history if "loss" in entry and "step" in entry]
    by_tokens = bool(training) and all("tokens_seen" in entry for entry in training)
    steps = [entry["step"] for entry in training]
    xs = [entry["tokens_seen"] for entry in training] if by_tokens else steps

    def x_at(step: int) -> float:
        if not by_tokens:
            return float(step)
        below = [index for index, known in enumerate(steps) if known <= step]
        index = below[-1] if below else 0
        return xs[index] * step / max(steps[index], 1)  # steps of one run carry about the same tokens

    def curve(key: str, entries: list[dict]) -> tuple[list, list]:
        # A NaN or inf loss is a gap in the line (matplotlib does not join across NaN).
        kept = [entry for entry in entries if key in entry]
        return ([x_at(entry["step"]) for entry in kept],
                [entry[key] if math.isfinite(entry[key]) else math.nan for entry in kept])

    evaluations = [entry for entry in history if "eval_loss" in entry and "step" in entry]
    scored = [entry for entry in history if "benchmark_seconds" in entry and "step" in entry]
    names = dict.fromkeys(ACC.match(key).group(1) for entry in scored for key in entry if ACC.match(key))
    series = {"train loss": curve("loss", training), "eval loss": curve("eval_loss", evaluations),
              "learning rate": curve("learning_rate", training), "tokens/s": curve("tokens_per_second", training),
              "loss not finite": ([x_at(entry["step"]) for entry in training if not math.isfinite(entry["loss"])], []),
              **{f"{name} acc": curve(f"benchmark/{name}/acc", scored) for name in names}}
    return ("tokens trained" if by_tokens else "optimizer steps"), series


# (panel title, its curves, y label): a panel is drawn when one of its curves was logged
PANELS = (("loss", ("train loss", "eval loss"), "loss (nats per token)"),
          ("learning rate", ("learning rate",), "learning rate"),
          ("tokens/s (all ranks)", ("tokens/s",), "tokens per second"))


def panels(history: list[dict]) -> tuple[str, list[tuple[str, str, list[tuple[str, list, list]]]], list]:
    """(the x axis's label, [(title, y label, [(curve, x, values)])] for what was logged and nothing else,
    where a training loss was NaN or inf)."""
    label, series = _series(history)
    benchmarks = tuple(name for name in series if name.endswith(" acc"))  # one curve a --benchmarks file
    drawn = [(title, ylabel, [(name, *series[name]) for name in names if series[name][0]])
             for title, names, ylabel in (*PANELS, ("benchmarks (--benchmarks)", benchmarks, "accuracy"))]
    return label, [panel for panel in drawn if panel[2]], series["loss not finite"][0]


def draw_curves(history: list[dict], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    label, shown, not_finite = panels(history)
    if not shown:
        return
    figure, axes = plt.subplots(1, len(shown), figsize=(5 * len(shown), 4), constrained_layout=True, squeeze=False)
    for axis, (title, ylabel, curves) in zip(axes[0], shown):
        for name, xs, values in curves:
            axis.plot(xs, values, "o-" if name == "eval loss" or name.endswith(" acc") else "-", label=name)
        if title == "loss":
            for index, at in enumerate(not_finite):
                axis.axvline(at, color="tab:red", alpha=0.4, label="loss NaN or inf" if index == 0 else None)
        if len(curves) > 1 or (title == "loss" and not_finite):
            axis.legend()
        axis.set_title(title)
        axis.set_xlabel(label)
        axis.set_ylabel(ylabel)
        axis.grid(alpha=0.3)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    figure.savefig(tmp, dpi=90, format="png")
    plt.close(figure)
    os.replace(tmp, path)


class CurvesCallback(TrainerCallback):
    """Redraws `training_curves.png` on rank 0 at every save and when training ends."""

    def __init__(self, output_dir: Path):
        self.path = Path(output_dir) / CURVES

    def _draw(self, state) -> None:
        if state.is_world_process_zero and state.log_history:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            draw_curves(state.log_history, self.path)

    def on_save(self, args, state, control, **kwargs):
        self._draw(state)

    def on_train_end(self, args, state, control, **kwargs):
        self._draw(state)


def summary(history: list[dict], *, output_dir: Path, wall_s: float, tokens: int, steps: int, saved: bool,
            tensorboard: bool, tokens_before: int = 0, steps_before: int = 0, diverged: bool = False,
            stopped_at: Path | None = None) -> str:
    """The lines a finished run ends with. `tokens` were trained by this process; a resumed run had trained
    `tokens_before` in `steps_before` steps (its checkpoint's), and the first line counts the whole run.
    `stopped_at`: the checkpoint a preempted run saved (it has no final model to continue from)."""
    def last(key: str):
        return next((entry[key] for entry in reversed(history) if key in entry), None)

    mfus = [entry["mfu"] for entry in history if "mfu" in entry]
    resumed = (f" (resumed at step {steps_before:,}: {steps - steps_before:,} steps, {tokens:,} tokens in this run)"
               if steps_before else "")
    lines = [f"done: {steps:,} steps, {tokens_before + tokens:,} tokens{resumed} in {wall_s / 60:,.1f} min "
             f"({tokens / max(wall_s, 1e-9):,.0f} tokens/s overall, evaluation and saves included"
             + (f"; MFU {100 * sum(mfus) / len(mfus):.1f}% while training" if mfus else "") + ")"]
    trained = next((entry for entry in reversed(history) if "loss" in entry), None)
    losses = [f"last train loss {trained['loss']:.4f} (step {trained.get('step')})"] if trained else []
    if last("eval_loss") is not None:
        bits = f", {last('eval_bits_per_byte'):.4f} bits/byte" if last("eval_bits_per_byte") is not None else ""
        losses.append(f"eval loss {last('eval_loss'):.4f} (perplexity {last('eval_perplexity'):,.2f}{bits})")
    if losses:
        lines.append("  " + ", ".join(losses))
    lines += benchmark_summary(history, wall_s)
    if saved:
        lines.append(f"  model: {output_dir} (AutoModelForCausalLM.from_pretrained loads it)")
    # The Trainer's TensorBoard callback writes under TENSORBOARD_LOGGING_DIR, else output_dir/runs/.
    board = os.environ.get("TENSORBOARD_LOGGING_DIR") or output_dir / "runs"
    lines.append(f"  logs: {output_dir / 'trainer_state.json'}, {output_dir / CURVES}"
                 + (f", TensorBoard: tensorboard --logdir {board}" if tensorboard else ""))
    if not diverged:  # nothing to continue from: the error that follows names the last good checkpoint
        from rankzero.train.checkpoints.sharded import pretrained_weights_problems

        launcher = launcher_path("pretrain_cont.sh")
        resume = f"RESUME=1 {launcher} {output_dir} resumes {'this run' if stopped_at else 'its newest checkpoint'} exactly"
        if stopped_at and pretrained_weights_problems(stopped_at):  # DCP shards: from_pretrained cannot read them
            export = f"{output_dir}-export"
            lines.append(f"  continue: {resume}; a new run from its weights: python "
                         f"{launcher_path('scripts/export_checkpoint.py')} {stopped_at} {export}, then "
                         f"--pretrained_model {export}")
        else:
            lines.append(f"  continue: {launcher} {stopped_at or output_dir} --max_steps N   (a new run from this "
                         f"{'checkpoint' if stopped_at else 'model'}; {resume})")
    return "\n".join(lines)


def launcher_path(name: str) -> str:
    """How to call one of the repository's launchers from here: ./NAME in the repository, else its full path
    (a printed next command works as printed from where the run was started)."""
    root = Path(__file__).resolve().parents[2]
    if not (root / name).is_file():
        return name  # an installed package: the launchers are wherever the user put them
    return f"./{name}" if Path.cwd().resolve() == root else str(root / name)

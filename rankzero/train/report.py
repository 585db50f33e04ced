"""What a run shows its user: `training_curves.png` while it trains, a summary when it ends.

    trainer.add_callback(CurvesCallback(output_dir))      # rank 0 redraws the picture at every save and at the end
    print(summary(trainer, output_dir, wall_s, tokens))    # rank 0, once training is over

The picture has three panels against tokens trained: training loss (and evaluation loss where there is
one; a NaN or inf loss is a gap in its line with a red mark where it was logged), learning rate and tokens/s, read from the Trainer's log history (`trainer_state.json`), drawn
with matplotlib's Agg backend (no display needed) and written atomically, so a user watching the file
never sees half a PNG.
"""

from __future__ import annotations

import math
import os
from pathlib import Path

from transformers import TrainerCallback

CURVES = "training_curves.png"


def _series(history: list[dict]) -> dict[str, tuple[list, list]]:
    """(tokens, values) per curve. Evaluation logs carry no token count: theirs is read off the training logs
    by step."""
    training = [entry for entry in history if "loss" in entry and "tokens_seen" in entry]
    steps = [entry["step"] for entry in training]
    tokens = [entry["tokens_seen"] for entry in training]

    def tokens_at(step: int) -> float:
        if not steps:
            return float(step)
        below = [index for index, known in enumerate(steps) if known <= step]
        index = below[-1] if below else 0
        return tokens[index] * step / max(steps[index], 1)  # steps of one run carry about the same tokens

    # A NaN or inf loss is a gap in the line (matplotlib does not join across NaN), marked where it happened.
    series = {"loss": (tokens, [entry["loss"] if math.isfinite(entry["loss"]) else math.nan for entry in training]),
              "loss not finite": ([t for t, e in zip(tokens, training) if not math.isfinite(e["loss"])], []),
              "learning rate": (tokens, [entry.get("learning_rate", math.nan) for entry in training]),
              "tokens/s": ([t for t, e in zip(tokens, training) if "tokens_per_second" in e],
                           [e["tokens_per_second"] for e in training if "tokens_per_second" in e])}
    evaluations = [entry for entry in history if "eval_loss" in entry]
    series["eval loss"] = ([tokens_at(entry["step"]) for entry in evaluations],
                           [entry["eval_loss"] if math.isfinite(entry["eval_loss"]) else math.nan for entry in evaluations])
    return series


def draw_curves(history: list[dict], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    series = _series(history)
    figure, axes = plt.subplots(1, 3, figsize=(15, 4), constrained_layout=True)
    loss, rate, speed = axes
    loss.plot(*series["loss"], label="train loss", color="tab:blue")
    if series["eval loss"][0]:
        loss.plot(*series["eval loss"], "o-", label="eval loss", color="tab:orange")
    for index, at in enumerate(series["loss not finite"][0]):
        loss.axvline(at, color="tab:red", alpha=0.4, label="loss NaN or inf" if index == 0 else None)
    loss.set_title("loss")
    loss.legend()
    rate.plot(*series["learning rate"], color="tab:green")
    rate.set_title("learning rate")
    speed.plot(*series["tokens/s"], color="tab:red")
    speed.set_title("tokens/s (all ranks)")
    for axis in axes:
        axis.set_xlabel("tokens trained")
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
            tensorboard: bool, tokens_before: int = 0, steps_before: int = 0, diverged: bool = False) -> str:
    """The lines a finished run ends with. `tokens` were trained by this process; a resumed run had trained
    `tokens_before` in `steps_before` steps (its checkpoint's), and the first line counts the whole run."""
    def last(key: str):
        return next((entry[key] for entry in reversed(history) if key in entry), None)

    mfus = [entry["mfu"] for entry in history if "mfu" in entry]
    resumed = (f" (resumed at step {steps_before:,}: {steps - steps_before:,} steps, {tokens:,} tokens in this run)"
               if steps_before else "")
    lines = [f"done: {steps:,} steps, {tokens_before + tokens:,} tokens{resumed} in {wall_s / 60:,.1f} min "
             f"({tokens / max(wall_s, 1e-9):,.0f} tokens/s overall, evaluation and saves included"
             + (f"; MFU {100 * sum(mfus) / len(mfus):.1f}% while training" if mfus else "") + ")"]
    losses = [f"final train loss {last('loss'):.4f}"] if last("loss") is not None else []
    if last("eval_loss") is not None:
        losses.append(f"eval loss {last('eval_loss'):.4f} (perplexity {last('perplexity'):,.2f})")
    if losses:
        lines.append("  " + ", ".join(losses))
    if saved:
        lines.append(f"  model: {output_dir} (AutoModelForCausalLM.from_pretrained loads it)")
    # The Trainer's TensorBoard callback writes under TENSORBOARD_LOGGING_DIR, else output_dir/runs/.
    board = os.environ.get("TENSORBOARD_LOGGING_DIR") or output_dir / "runs"
    lines.append(f"  logs: {output_dir / 'trainer_state.json'}, {output_dir / CURVES}"
                 + (f", TensorBoard: tensorboard --logdir {board}" if tensorboard else ""))
    if not diverged:  # nothing to continue from: the error that follows names the last good checkpoint
        lines.append(f"  continue: ./pretrain_cont.sh {output_dir} --max_steps N   (more steps, from this model; "
                     f"RESUME=1 ./pretrain_cont.sh {output_dir} resumes its newest checkpoint exactly)")
    return "\n".join(lines)

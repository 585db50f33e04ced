"""torch.compile under FSDP2, for real on CPU (inductor's C++ backend, 2 gloo ranks, fp32): each decoder layer is
compiled whole (with --gradient_checkpointing too: the checkpoint inside the compiled layer), then sharded, and
the losses are eager FSDP2's; nothing is compiled again after the second step, also in a model deeper than
dynamo's recompile limit; every layer is gathered and freed each step; SIGTERM and a resume give the
uninterrupted run's losses. The default on a GPU: test_train_units.py."""

from __future__ import annotations

import json
import signal
import sys

import pytest

from helpers import REPO, TINY, free_port, losses, needs_cxx, run
from helpers import train_flags as run_flags

# A rank of train.py that records, after each training step, what torch.compile and FSDP2 did in it.
PROBE_RANK = """
import collections, json, os, sys
sys.path.insert(0, {repo!r})
import torch
import train
from torch.distributed.fsdp import FSDPModule
from torch.distributed.fsdp._fully_shard._fsdp_param_group import FSDPParamGroup
from torch.distributed.tensor import DTensor
from rankzero.train.trainer import RankzeroTrainer

moves = collections.Counter()  # (unit, "_to_unsharded" | "_to_sharded") -> times this step: gathers and frees
for method in ("_to_unsharded", "_to_sharded"):
    def counted(self, _original=getattr(FSDPParamGroup, method), _method=method):
        moves[(self._module_fqn, _method)] += 1
        return _original(self)
    setattr(FSDPParamGroup, method, counted)

step = RankzeroTrainer.training_step
records = []

def recording_step(self, model, inputs, num_items_in_batch=None):
    moves.clear()
    loss = step(self, model, inputs, num_items_in_batch)
    compiled = torch._dynamo.utils.get_compilation_metrics()
    units = {{}}
    for name, module in model.named_modules():
        group = module._get_fsdp_state()._fsdp_param_group if isinstance(module, FSDPModule) else None
        if group is not None:
            units[name] = {{"sharded": group.is_sharded,
                           "dtensors": all(isinstance(p, DTensor) for p in module.parameters()),
                           "gathered": moves[(group._module_fqn, "_to_unsharded")],
                           "freed": moves[(group._module_fqn, "_to_sharded")]}}
    records.append({{"step": self.state.global_step + 1, "compiled": len(compiled),
                    "frames": [[m.co_name, m.graph_op_count or 0] for m in compiled],
                    "recompiles": [m.recompile_reason for m in compiled if m.recompile_reason],
                    "graph_breaks": sorted(torch._dynamo.utils.counters["graph_break"]), "units": units}})
    with open(os.path.join({out!r}, f"steps-{{os.environ['RANK']}}.json"), "w") as handle:
        json.dump(records, handle)
    return loss

RankzeroTrainer.training_step = recording_step
sys.exit(train.main(sys.argv[1:]))
"""

LAUNCH = [sys.executable, "-m", "torch.distributed.run", "--nproc_per_node", 2]


def probed(tmp_path, name: str) -> tuple[list, object]:
    """(the command that starts a probed rank writing into tmp_path/name, that dir)."""
    out = tmp_path / name
    out.mkdir()
    script = tmp_path / f"{name}.py"
    script.write_text(PROBE_RANK.format(repo=str(REPO), out=str(out)))
    return [*LAUNCH, "--master_port", free_port(), script], out


def check_steps(out, layers: int) -> list[dict]:
    """What every compiled run must show, on each rank: the decoder layer compiled with no graph break, nothing
    compiled after the run's second step, and each step every unit gathered and freed again (a decoder layer twice:
    forward, then backward), its parameters DTensor shards at the step's end. Returns rank 0's records."""
    for rank in (0, 1):
        records = json.loads((out / f"steps-{rank}.json").read_text())
        assert len(records) >= 3
        assert records[-1]["graph_breaks"] == [], records[-1]["graph_breaks"]
        # transformers' decoder layers run `forward_with_checkpointing` (a pass-through without checkpointing)
        layer_graphs = [ops for name, ops in records[-1]["frames"] if name == "forward_with_checkpointing"]
        assert layer_graphs and all(ops > 0 for ops in layer_graphs), records[-1]["frames"]
        assert records[-1]["recompiles"] == []
        assert {r["compiled"] for r in records[1:]} == {records[1]["compiled"]} and records[1]["compiled"] > 0
        for record in records:
            units = record["units"]
            decoder = [name for name in units if name.startswith("model.layers.")]
            assert sorted(decoder) == sorted(f"model.layers.{i}" for i in range(layers)), sorted(units)
            for name, unit in units.items():
                assert unit["sharded"] and unit["dtensors"], (record["step"], name, unit)
                expected = 2 if name in decoder else 1
                assert unit["gathered"] == unit["freed"] == expected, (record["step"], name, unit)
    return json.loads((out / "steps-0.json").read_text())


def assert_same_losses(got: dict, expected: dict, steps, tolerance: float) -> None:
    assert set(steps) <= set(got), sorted(got)
    for step in steps:
        assert got[step] == pytest.approx(expected[step], abs=tolerance), (step, got[step], expected[step])


@pytest.mark.slow
@needs_cxx
def test_compiled_fsdp2_is_eager_fsdp2_compiled_once_with_checkpointing_too(tmp_path, train_corpus, tokenizer_dir):
    """The tiny config, 20 steps: compiled = eager within 1e-4, with and without --gradient_checkpointing (which
    before ran every decoder layer eager: accelerate's checkpoint wrapper broke the compiled graph at FSDP2's hooks),
    and with --activation_checkpointing selective."""
    cache = tmp_path / "cache"
    common = dict(fsdp="full_shard", max_steps=20, logging_steps=1, seed=3)
    eager = tmp_path / "eager"
    run([*LAUNCH, "--master_port", free_port(), REPO / "train.py",
         *run_flags(train_corpus, tokenizer_dir, cache, eager, **common)], timeout=600)
    expected = losses(eager)

    command, compiled = probed(tmp_path, "compiled")
    result = run([*command, *run_flags(train_corpus, tokenizer_dir, cache, compiled, torch_compile="true", **common)],
                 timeout=600)
    assert "torch_compile = per layer (regional), then sharded by FSDP2, backend inductor" in result.stdout
    check_steps(compiled, layers=2)
    assert_same_losses(losses(compiled), expected, range(1, 21), 1e-4)

    command, recomputed = probed(tmp_path, "recomputed")
    result = run([*command, *run_flags(train_corpus, tokenizer_dir, cache, recomputed, torch_compile="true",
                                       gradient_checkpointing="true", **common)], timeout=600)
    assert ("torch_compile = per layer (regional), each checkpointed inside, then sharded by FSDP2, backend inductor"
            in result.stdout)
    assert "activations recomputed per unit" in result.stdout
    assert "redundant AllGather" not in result.stdout + result.stderr  # measured above: it gathers no more often
    check_steps(recomputed, layers=2)
    assert_same_losses(losses(recomputed), expected, range(1, 21), 1e-4)

    # The 8B recipe's selective checkpointing: its policy rides on the same checkpoint, inside the compiled layer.
    command, selective = probed(tmp_path, "selective")
    run([*command, *run_flags(train_corpus, tokenizer_dir, cache, selective, torch_compile="true",
                              activation_checkpointing="selective", **common)], timeout=600)
    check_steps(selective, layers=2)
    assert_same_losses(losses(selective), expected, range(1, 21), 1e-4)


@pytest.mark.slow
@needs_cxx
def test_compiled_fsdp2_deeper_than_the_recompile_limit_resumes_exactly(tmp_path, train_corpus, tokenizer_dir):
    """10 decoder layers (dynamo recompiles a frame at most 8 times, then runs it eager: one graph must serve every
    layer), checkpointing on as the 8B recipe has it: compiled = eager within 1e-4; SIGTERM mid-run saves a
    checkpoint, and the resumed run, compiled afresh, gives the uninterrupted compiled run's losses."""
    from test_train_preemption import finish, read_until, start

    config = json.loads(TINY.read_text())
    deeper = tmp_path / "deeper.json"
    deeper.write_text(json.dumps({**config, "num_hidden_layers": 10}))
    cache, steps = tmp_path / "cache", 20
    common = dict(fsdp="full_shard", max_steps=steps, logging_steps=1, seed=3, model_config=deeper,
                  lr_scheduler_type="constant", gradient_checkpointing="true")
    eager = tmp_path / "eager"
    run([*LAUNCH, "--master_port", free_port(), REPO / "train.py",
         *run_flags(train_corpus, tokenizer_dir, cache, eager, **common)], timeout=600)
    command, whole = probed(tmp_path, "whole")
    run([*command, *run_flags(train_corpus, tokenizer_dir, cache, whole, torch_compile="true", **common)], timeout=600)
    check_steps(whole, layers=10)
    uninterrupted = losses(whole)
    assert_same_losses(uninterrupted, losses(eager), range(1, steps + 1), 1e-4)

    command, preempted = probed(tmp_path, "preempted")
    flags = run_flags(train_corpus, tokenizer_dir, cache, preempted, torch_compile="true", **common)
    job = start([*command, *flags])
    printed = read_until(job, f"step 5/{steps}")
    job.send_signal(signal.SIGTERM)
    printed += finish(job, timeout=300)
    checkpoints = [p.name for p in preempted.iterdir() if p.name.startswith("checkpoint-")]
    assert len(checkpoints) == 1, printed[-3000:]
    stopped = int(checkpoints[0].split("-")[1])
    assert 5 <= stopped < steps

    command, _ = probed(tmp_path, "resumed")
    result = run([*command, *run_flags(train_corpus, tokenizer_dir, cache, preempted, torch_compile="true",
                                       resume_from_checkpoint="auto", **common)], timeout=600)
    assert f"step {stopped + 1}/{steps}" in result.stdout and f"step {stopped}/{steps} " not in result.stdout
    resumed = check_steps(tmp_path / "resumed", layers=10)
    assert resumed[0]["step"] == stopped + 1
    assert_same_losses(losses(preempted), uninterrupted, range(1, steps + 1), 1e-6)

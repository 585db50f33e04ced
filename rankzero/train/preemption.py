"""Preemption: on SIGTERM or SIGUSR1 every rank finishes its step, one checkpoint is saved, the run ends.

    preemption = PreemptionCallback()
    trainer = RankzeroTrainer(..., preemption=preemption)
    with preemption.handling_signals():       # main thread, before the DataLoader workers fork
        trainer.train(...)
    if preemption.stopped_at is not None: ... # the step all ranks stopped at (its checkpoint is saved)

Clusters announce the end of a job with a signal and kill it a grace period later: Kubernetes and
Slurm send SIGTERM, Slurm's `--signal=USR1@90` sends SIGUSR1 ahead of time. The handler only sets a
flag (a handler may run between any two bytecodes; doing work there is unsafe). A signal reaches the
ranks at different moments — torchrun forwards it one worker after the other, Slurm signals each task
itself, a rank may be inside a collective when it lands — so no rank may act on its own flag: at the end
of every optimizer step the ranks add up their flags in an all-reduce, and all of them stop at the step
where the sum turns non-zero. The Trainer then saves `checkpoint-<step>` (model, optimizer, scheduler,
RNG states, and the step, from which it finds its place in the data) and leaves its loop normally, so
each rank exits 0.

The all-reduce runs on a gloo (CPU) group of its own: on the NCCL group its result would have to be
copied to the host, a device synchronisation every step. It is started at the end of one step and read
at the end of the next, so its latency (which grows with the number of ranks over TCP) hides behind a
step's compute; the price is that the ranks stop one step after the signal. DataLoader workers forked
after the handler is installed inherit it, so a signal sent to the whole process group (Slurm does)
does not kill them mid-epoch.

A launcher that dies without a word (torchrun killed with SIGKILL, its node agent lost) leaves its workers as
orphans that would train on to the end, holding the output dir's lock, with nobody to report to. So under
torchrun a thread watches the rank's parent, the launcher's agent: once the process is reparented (os.getppid
changes; polling works on every Unix, where Linux's PR_SET_PDEATHSIG fires on the exit of the parent's *thread*
that spawned it), it says so in one line and raises the same flag as a signal: every rank stops at the same step
and saves a checkpoint, and the run ends, freeing the lock.
"""

from __future__ import annotations

import contextlib
import os
import signal
import sys
import threading

import torch
from transformers import TrainerCallback

SIGNALS = (signal.SIGTERM, signal.SIGUSR1)
LAUNCHER_POLL_S = 1.0  # how often a rank looks for its launcher: a stop costs a step or two at most, and this little


class PreemptionCallback(TrainerCallback):
    def __init__(self):
        self.received: str | None = None  # name of the first signal this process got
        self.stopped_at: int | None = None  # global step every rank stopped at
        self._group = None
        self._flag = self._pending = None  # the all-reduce in flight since the last step

    def _handle(self, signum, frame) -> None:
        self.received = self.received or signal.Signals(signum).name

    @contextlib.contextmanager
    def handling_signals(self):
        previous = {sig: signal.signal(sig, self._handle) for sig in SIGNALS}
        done = threading.Event()
        if "TORCHELASTIC_RUN_ID" in os.environ:  # torchrun's workers; a shell's child may outlive its shell (nohup)
            threading.Thread(target=self._watch_launcher, args=(os.getppid(), done), daemon=True,
                             name="rankzero-launcher-watch").start()
        try:
            yield self
        finally:
            done.set()
            for sig, handler in previous.items():
                signal.signal(sig, handler)

    def _watch_launcher(self, launcher: int, done: threading.Event) -> None:
        while not done.wait(LAUNCHER_POLL_S):
            if os.getppid() != launcher:
                print(f"rankzero: rank {os.environ.get('RANK', '0')}: its launcher (torchrun, pid {launcher}) is gone; "
                      "the ranks stop after the next step and save a checkpoint", file=sys.stderr, flush=True)
                self.received = self.received or f"the loss of the launcher (torchrun, pid {launcher})"
                return

    def on_train_begin(self, args, state, control, **kwargs):
        distributed = torch.distributed
        self._pending = None
        if args.world_size > 1 and distributed.is_available() and distributed.is_initialized():
            # Every rank runs on_train_begin, so the collective new_group call is matched on all of them.
            self._group = distributed.new_group(backend="gloo")

    def on_step_end(self, args, state, control, **kwargs):
        if self.stopped_at is None and self.all_ranks_know():
            self.stopped_at = state.global_step
            control.should_save = True
            control.should_training_stop = True

    def on_train_end(self, args, state, control, **kwargs):
        if self._pending is not None:  # started on every rank, so it completes; nothing may be left in flight
            self._pending.wait()
            self._pending = None

    def all_ranks_know(self) -> bool:
        """True on every rank at the same step, once some rank had a signal before the previous step ended."""
        local = int(self.received is not None)
        if self._group is None:
            return bool(local)
        known = False
        if self._pending is not None:
            self._pending.wait()
            known = bool(self._flag.item())
        self._flag = torch.tensor([local], dtype=torch.int32)
        self._pending = torch.distributed.all_reduce(self._flag, group=self._group, async_op=True)
        return known

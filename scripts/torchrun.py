"""torchrun as pretrain.sh runs it: the same arguments and launch, but a rank's user error ends it quietly.

    python scripts/torchrun.py --nnodes 1 --nproc_per_node 2 ... train.py --dataset ...

A rank that exits by itself has said why (rankzero/errors.py: exit 2 for the arguments, 1 for other user
errors and crashes, with their traceback); torchrun would follow that with its own error log and a
~30-line ChildFailedError traceback, and exit 1. Here the launch ends with the rank's exit code: after
nothing more for exit 2 (the one-line error is the whole story), after one line naming the rank for
others. A rank killed by a signal (the OOM killer, say) has said nothing: torchrun's report stays.

A signal to the launcher itself (a preemption: SIGTERM, SIGUSR1 from Slurm, SIGINT) is forwarded to the ranks,
which save a checkpoint and say so (rankzero/train/preemption.py); torchrun would then end in a traceback of
its own SignalException and exit 1. Here it ends with one line and 128 + the signal's number (143 for SIGTERM),
as a process ended by that signal reports itself: a preempted job is not a finished one (Kubernetes restarts
it, a shell's `$?` says which signal).

Run as a file, not `-m rankzero…`: it needs nothing but torch, so it works from any interpreter that
can run train.py.
"""

from __future__ import annotations

import logging
import socket
import sys

USAGE_ERROR = 2  # argparse's status, and rankzero's for a user error (rankzero/errors.py)


class _HideRankExits(logging.Filter):
    """Drops the elastic agent's lines about a rank that exited by itself: "failed (exitcode: N) …", and
    the "Sending process … closing signal" lines before it (the other ranks being stopped). Those come
    first, so they are held until the agent says why it stops: dropped for an exit, else shown then."""

    def __init__(self, logger: logging.Logger):
        super().__init__()
        self.logger = logger
        self.held: list[logging.LogRecord] = []
        self.releasing = False

    def filter(self, record: logging.LogRecord) -> bool:
        if self.releasing:
            return True
        message = str(record.msg)
        if message.startswith("Sending process"):
            self.held.append(record)
            return False
        if message.startswith("failed (exitcode") and record.args and record.args[0] > 0:
            self.held.clear()
            return False
        self.release()
        return True

    def release(self) -> None:
        self.releasing = True
        try:
            for record in self.held:
                self.logger.handle(record)
        finally:
            self.held.clear()
            self.releasing = False


def main(argv: list[str]) -> int:
    from torch.distributed.elastic.multiprocessing.api import SignalException
    from torch.distributed.elastic.multiprocessing.errors import ChildFailedError
    from torch.distributed.run import parse_args, run

    logger = logging.getLogger("torch.distributed.elastic.multiprocessing.api")
    hide = _HideRankExits(logger)
    logger.addFilter(hide)
    try:
        run(parse_args(argv))
    except ChildFailedError as error:
        rank, first = error.get_first_failure()
        if first.exitcode <= 0:
            raise
        if first.exitcode != USAGE_ERROR:
            print(f"torchrun: rank {rank} (local rank {first.local_rank} on {socket.gethostname()}) exited with "
                  f"{first.exitcode}; its output above says why", file=sys.stderr, flush=True)
        return first.exitcode
    except SignalException as error:
        hide.held.clear()  # "Sending process N closing signal": the agent's "Received … death signal" said it
        code = 128 + int(error.sigval)
        print(f"torchrun: stopped by {error.sigval.name}, the ranks were sent it to save and stop (exit {code})",
              file=sys.stderr, flush=True)
        return code
    finally:
        hide.release()  # held for a failure that did not come (a rendezvous error, say): shown after all
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

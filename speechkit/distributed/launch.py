"""The self-spawning launcher and SLURM helpers.

``python train.py --num-workers N -- hp.yaml`` (no ``--worker-id``) reruns the same command N times with
``--worker-id R`` and a free ``MASTER_PORT`` on 127.0.0.1 (one GPU per worker when CUDA is visible, gloo
workers on CPU otherwise), prefixes each line of their output with ``[worker R]``, reports every exit, and on
the first failure stops the others and exits non-zero naming the failed worker. A worker that saved on a
preemption signal exits with ``EXIT_PREEMPTED``; if every worker did, so does the launcher, and rerunning the
command resumes.

Example:
    $ python train.py --num-workers 2 -- hp.yaml --lr 0.1
    [worker 0] epoch 1 ...
    speechkit launcher: worker 1 exited with code 0
"""
from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import threading
import time
from typing import Optional

from speechkit.distributed.env import LAUNCHED_WORKER_ENV
from speechkit.distributed.failfast import EXIT_PEER_FAILED
from speechkit.errors import EXIT_PREEMPTED, DistributedError

#: Seconds the launcher lets the other workers stop by themselves after a failure before terminating them.
GRACE_S = 5.0
_FORWARDED_SIGNALS = ("SIGTERM", "SIGUSR1", "SIGUSR2")


def free_port(host: str = "127.0.0.1") -> int:
    """A TCP port that is free now on ``host``."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind((host, 0))
        return sock.getsockname()[1]


def current_command() -> list:
    """The command line that started this process (interpreter flags and ``-m module`` kept)."""
    orig = getattr(sys, "orig_argv", None)
    if orig:
        return [sys.executable, *orig[1:]]
    return [sys.executable, *sys.argv]


def worker_command(command: list, worker_id: int, device_id: Optional[int] = None) -> list:
    """``command`` with this worker's flags, placed before a ``--`` separator if there is one.

    Example:
        >>> worker_command(["python", "train.py", "--num-workers", "2", "--", "hp.yaml"], 1)
        ['python', 'train.py', '--num-workers', '2', '--worker-id', '1', '--', 'hp.yaml']
    """
    flags = ["--worker-id", str(worker_id)]
    if device_id is not None:
        flags += ["--device-id", str(device_id)]
    if "--" in command:
        split = command.index("--")
        return command[:split] + flags + command[split:]
    return command + flags


def spawn_local_workers(run_opts, command: Optional[list] = None, environ: Optional[dict] = None,
                        out=None, err=None, grace_s: float = GRACE_S) -> int:
    """Start ``run_opts.num_workers`` local workers, wait for them, and return the launcher's exit code.

    Returns:
        0 when all succeed; ``EXIT_PREEMPTED`` when they stopped on a preemption signal; otherwise the failed
        worker's exit code (1 when it was killed by a signal).
    """
    import torch

    count = int(run_opts.num_workers)
    command = list(command or current_command())
    environ = dict(os.environ if environ is None else environ)
    gpus = torch.cuda.device_count() if torch.cuda.is_available() else 0
    use_gpus = gpus > 0 and not (run_opts.device or "").startswith("cpu")
    if use_gpus and count > gpus:
        raise DistributedError(f"--num-workers {count}: only {gpus} GPUs are visible (one worker per GPU); "
                               "use --device cpu for CPU workers")
    for key in ("RANK", "WORLD_SIZE", "LOCAL_RANK", "GROUP_RANK", "SLURM_PROCID", "SLURM_STEP_ID"):
        environ.pop(key, None)  # the workers' place comes from their flags, not from an outer launcher
    environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(free_port()), PYTHONUNBUFFERED="1")
    environ[LAUNCHED_WORKER_ENV] = "1"
    launcher = _Launcher(out or sys.stdout, err or sys.stderr)
    for worker_id in range(count):
        device_id = worker_id if use_gpus else None
        launcher.start(worker_id, worker_command(command, worker_id, device_id), environ)
    with _ForwardingSignals(launcher):
        return launcher.wait(grace_s)


class _Launcher:
    """Children processes, their labelled output, and the failure policy."""

    def __init__(self, out, err):
        self.out, self.err = out, err
        self.procs: dict = {}
        self.pumps: list = []
        self.stopped_by_launcher: set = set()
        self._lock = threading.Lock()

    def start(self, worker_id: int, command: list, environ: dict) -> None:
        proc = subprocess.Popen(command, env=environ, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        self.procs[worker_id] = proc
        for pipe, stream in ((proc.stdout, self.out), (proc.stderr, self.err)):
            pump = threading.Thread(target=self._pump, args=(pipe, stream, f"[worker {worker_id}] "),
                                    daemon=True)
            pump.start()
            self.pumps.append(pump)

    def _pump(self, pipe, stream, label: str) -> None:
        for raw in iter(pipe.readline, b""):
            with self._lock:
                stream.write(label + raw.decode(errors="replace"))
                stream.flush()
        pipe.close()

    def say(self, message: str) -> None:
        with self._lock:
            self.err.write(f"speechkit launcher: {message}\n")
            self.err.flush()

    def signal_all(self, signum: int) -> None:
        for proc in self.procs.values():
            if proc.poll() is None:
                proc.send_signal(signum)

    def wait(self, grace_s: float) -> int:
        codes: dict = {}
        failure_at = None
        terminated = False
        while len(codes) < len(self.procs):
            for worker_id, proc in self.procs.items():
                if worker_id in codes or proc.poll() is None:
                    continue
                codes[worker_id] = proc.returncode
                self.say(f"worker {worker_id} {describe_exit(proc.returncode)}")
                if _is_failure(proc.returncode) and failure_at is None:
                    failure_at = time.monotonic()
            if failure_at is not None and not terminated and time.monotonic() - failure_at > grace_s:
                running = [w for w, p in self.procs.items() if p.poll() is None]
                if running:
                    self.say(f"stopping workers {running} after the failure")
                    self.stopped_by_launcher.update(running)
                    self.signal_all(signal.SIGTERM)
                terminated = True
                kill_at = time.monotonic() + grace_s
            if terminated and time.monotonic() > kill_at:
                self.signal_all(signal.SIGKILL)
            time.sleep(0.05)
        for pump in self.pumps:
            pump.join(timeout=2)
        return self._verdict(codes)

    def _verdict(self, codes: dict) -> int:
        # ``codes`` is in exit order. Name the worker that failed first-hand, not those stopped because of it
        # (by their watchdog, with EXIT_PEER_FAILED, or by this launcher).
        failures = {w: c for w, c in codes.items() if _is_failure(c)}
        if failures:
            first_hand = {w: c for w, c in failures.items()
                          if c != EXIT_PEER_FAILED and w not in self.stopped_by_launcher} or failures
            worker_id = next(iter(first_hand))
            code = first_hand[worker_id]
            self.say(f"FAILED: worker {worker_id} {describe_exit(code)}; every worker was stopped")
            return code if code > 0 else 1
        if any(c == EXIT_PREEMPTED for c in codes.values()):
            self.say(f"workers stopped on a preemption signal (exit {EXIT_PREEMPTED}); rerun to resume")
            return EXIT_PREEMPTED
        return 0


def _is_failure(code: int) -> bool:
    return code not in (0, EXIT_PREEMPTED)


def describe_exit(code: int) -> str:
    """``exited with code 1`` or ``was killed by signal SIGKILL`` (Popen gives -signum for a signal)."""
    if code < 0:
        try:
            name = signal.Signals(-code).name
        except ValueError:
            name = str(-code)
        return f"was killed by signal {name}"
    if code == EXIT_PEER_FAILED:
        return f"exited with code {code} (stopped because another worker failed)"
    return f"exited with code {code}"


class _ForwardingSignals:
    """Forward preemption/termination signals to the workers while they run (the engine saves on them)."""

    def __init__(self, launcher: _Launcher):
        self.launcher = launcher
        self.previous: dict = {}

    def __enter__(self):
        if threading.current_thread() is not threading.main_thread():
            return self
        for name in _FORWARDED_SIGNALS:
            signum = getattr(signal, name, None)
            if signum is not None:
                self.previous[signum] = signal.signal(signum, self._forward)
        return self

    def _forward(self, signum, frame) -> None:
        self.launcher.say(f"forwarding {signal.Signals(signum).name} to the workers")
        self.launcher.signal_all(signum)

    def __exit__(self, *exc):
        for signum, handler in self.previous.items():
            signal.signal(signum, handler)
        if exc[0] is not None:  # e.g. Ctrl-C in the launcher: do not leave orphans
            self.launcher.signal_all(signal.SIGTERM)
        return False


# ---------------------------------------------------------------------------------------------- SLURM


def slurm_job_id(environ: Optional[dict] = None) -> Optional[str]:
    """The SLURM job id of this process, or ``None`` outside SLURM."""
    environ = os.environ if environ is None else environ
    return environ.get("SLURM_JOB_ID") or None


def slurm_restart_count(environ: Optional[dict] = None) -> int:
    """How many times SLURM requeued this job (``SLURM_RESTART_COUNT``, 0 on the first run)."""
    environ = os.environ if environ is None else environ
    return int(environ.get("SLURM_RESTART_COUNT") or 0)


def requeue_slurm_job(job_id: Optional[str] = None) -> None:
    """Ask SLURM to requeue this job (``scontrol requeue``); it reruns with ``SLURM_RESTART_COUNT`` + 1.

    The job must allow it (``#SBATCH --requeue``). Normally done by the batch script when ``srun`` ends with
    ``EXIT_PREEMPTED`` (see ``tools/slurm/train_requeue.sbatch``).
    """
    job_id = job_id or slurm_job_id()
    if not job_id:
        raise DistributedError("requeue: not inside a SLURM job (SLURM_JOB_ID is not set)")
    result = subprocess.run(["scontrol", "requeue", str(job_id)], capture_output=True, text=True)
    if result.returncode != 0:
        raise DistributedError(f"scontrol requeue {job_id} failed: {result.stderr.strip()}")

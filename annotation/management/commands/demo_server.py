"""Serve the demo with a real job worker: ``runserver`` and ``celery worker`` on Kombu's
filesystem broker, started together and stopped together (``make demo``).

Why a worker at all: with eager Celery a report or metrics job ran inside the request, and
the page sat still for half a minute. With a worker the view only enqueues the job
(``annotation.tasks.enqueue``, as in production) and the page polls its progress.

Why the filesystem broker: it needs no server to install or run; each message is a file
under ``<broker dir>/queue`` (default ``var/broker``), so a job asked for while the worker
is down waits there and runs when it is back.

Why a prefork pool of ``--concurrency`` processes (default 2): Celery's soft and hard time
limits, which fail a job that runs too long, only exist in the prefork pool (``solo`` and
``threads`` ignore them); and two processes let a report run while a metrics job does.
The worker also runs beat (``--beat``), which sweeps stale jobs and releases expired leases.

Why no autoreloader (``--reload`` turns it on): runserver's reloader restarts the server
whenever a loaded module file changes, and ``pip install -e .`` (``make test`` installing its
extras beside a running demo) rewrites the package's install files: the demo was down for
about 30 s while the tests ran. A demo is for trying the platform, not for editing it.

Stopping: Ctrl-C (SIGINT), SIGTERM or SIGHUP stop runserver, then the worker with a cold
shutdown (SIGQUIT; it takes a few seconds): a job it was running is interrupted. A worker
still there after ``STOP_TIMEOUT_S`` is killed with its whole process group, so no worker
outlives the demo.
"""

import contextlib
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from django.conf import settings
from django.core.management.base import BaseCommand, CommandError

#: Seconds a stopped worker or server is given before it is killed.
STOP_TIMEOUT_S = 20
#: Seconds given to the worker to report ``ready`` before the server starts anyway.
READY_TIMEOUT_S = 60


#: Signals that stop the demo (Ctrl-C, kill, a closed terminal).
STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)


def runserver_command(addrport: str, *, reload: bool = False) -> list[str]:
    """The runserver command line: without the autoreloader unless ``reload``."""
    command = [sys.executable, str(settings.BASE_DIR / "manage.py"), "runserver"]
    return [*command, *([] if reload else ["--noreload"]), addrport]


class Stop(Exception):
    """A stop signal arrived."""


def _raise_stop(signum, frame) -> None:
    raise Stop(signal.Signals(signum).name)


class Command(BaseCommand):
    help = (
        "Serve the demo: runserver and a Celery worker on Kombu's filesystem broker "
        "(no server to install), stopped together by Ctrl-C."
    )

    def add_arguments(self, parser) -> None:
        parser.add_argument("addrport", nargs="?", default="127.0.0.1:8000")
        parser.add_argument(
            "--concurrency", type=int, default=2, help="Worker processes (default 2)."
        )
        parser.add_argument(
            "--broker-dir",
            default="",
            help="Folder of the filesystem broker (default: CAPEVAL_BROKER_DIR or var/broker).",
        )
        # No autoreloader by default: it restarted the demo for about 30 s whenever pip
        # rewrote the installed package (`make test` beside a running demo, issue 46).
        parser.add_argument(
            "--reload",
            action="store_true",
            help="Restart runserver when a Python file changes (for development).",
        )
        parser.add_argument(
            "--noreload", action="store_true", help="The default; kept for older scripts."
        )

    def handle(self, *args, **options) -> None:
        if settings.REDIS_URL:
            raise CommandError(
                "REDIS_URL is set: run `celery -A capeval.celery_app worker` and a web server "
                "instead (README, Deployment); demo_server is the embedded default."
            )
        if options["concurrency"] < 1:
            raise CommandError("--concurrency must be at least 1.")
        var_dir = Path(settings.VAR_DIR)
        broker_dir = Path(
            options["broker_dir"] or settings.CAPEVAL_BROKER_DIR or var_dir / "broker"
        ).resolve()
        # The children read their settings again: the broker folder is what makes them
        # publish to (runserver) and consume from (worker) the same queue, not eagerly.
        # platform/ first on the path, as manage.py puts it: `celery -A capeval...` must
        # import this checkout's settings, whatever else the environment has installed.
        path = os.pathsep.join(
            [str(settings.BASE_DIR / "platform"), str(settings.BASE_DIR)]
            + [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p]
        )
        env = {**os.environ, "CAPEVAL_BROKER_DIR": str(broker_dir), "PYTHONPATH": path}
        log_path = var_dir / "worker.log"
        log_path.write_text("")  # the worker appends; "ready" must be this run's
        # SIGINT too: a shell starting this in the background ignores SIGINT, and Python
        # then sends no KeyboardInterrupt.
        previous = {sig: signal.signal(sig, _raise_stop) for sig in STOP_SIGNALS}
        worker = server = None
        try:
            worker = self._start_worker(env, var_dir, log_path, options["concurrency"])
            self.stdout.write(
                f"Job worker started (pid {worker.pid}, {options['concurrency']} processes, "
                f"broker {broker_dir}, log {log_path})."
            )
            self._wait_ready(worker, log_path)
            command = runserver_command(options["addrport"], reload=options["reload"])
            # A session of its own too: runserver's autoreloader runs the server in a child,
            # which a signal to the group stops with it (one to the parent would orphan it).
            server = subprocess.Popen(
                command,
                env=env,
                stdin=subprocess.DEVNULL,
                start_new_session=True,
            )
            while server.poll() is None:
                if worker.poll() is not None:
                    raise CommandError(
                        f"The job worker stopped (exit {worker.returncode}); see {log_path}."
                    )
                time.sleep(0.5)
            raise CommandError(f"runserver stopped (exit {server.returncode}); see above.")
        except Stop:
            pass
        finally:
            # A second Ctrl-C must not cut the stopping short and leave the worker behind;
            # it takes at most twice STOP_TIMEOUT_S.
            for sig in STOP_SIGNALS:
                signal.signal(sig, signal.SIG_IGN)
            if server is not None:
                _stop(server, signal.SIGTERM, group=True)
            if worker is not None:
                self.stdout.write("Stopping the job worker...")
                # To the main process only: it stops its pool and beat itself (signalled
                # too, they left it waiting on them past the timeout).
                _stop(worker, signal.SIGQUIT, group=False)
                self.stdout.write("Job worker stopped.")
            for sig, handler in previous.items():
                signal.signal(sig, handler)

    def _start_worker(
        self, env: dict, var_dir: Path, log_path: Path, concurrency: int
    ) -> subprocess.Popen:
        command = [
            sys.executable,
            "-m",
            "celery",
            "-A",
            "capeval.celery_app",
            "worker",
            "--pool=prefork",
            f"--concurrency={concurrency}",
            "--beat",
            f"--schedule={var_dir / 'celerybeat-schedule'}",
            # Cluster features of a multi-worker deployment; one worker has no peers.
            "--without-gossip",
            "--without-mingle",
            "--without-heartbeat",
            "--loglevel=info",
            f"--logfile={log_path}",
        ]
        # A session of its own: Ctrl-C in the terminal does not reach the worker (it would
        # start a warm shutdown that waits for the running job); this command stops it.
        return subprocess.Popen(
            command,
            cwd=settings.BASE_DIR,
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )

    def _wait_ready(self, worker: subprocess.Popen, log_path: Path) -> None:
        deadline = time.monotonic() + READY_TIMEOUT_S
        while time.monotonic() < deadline:
            if worker.poll() is not None:
                raise CommandError(
                    f"The job worker did not start (exit {worker.returncode}); see {log_path}."
                )
            with contextlib.suppress(FileNotFoundError):
                if " ready." in log_path.read_text(errors="replace"):
                    return
            time.sleep(0.2)
        self.stdout.write(self.style.WARNING(f"The job worker is slow to start; see {log_path}."))


def _stop(process: subprocess.Popen, sig: int, *, group: bool) -> None:
    """Send ``sig`` to the process (or its group); after a while, kill what is left."""
    if process.poll() is None:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(process.pid, sig) if group else process.send_signal(sig)
        with contextlib.suppress(subprocess.TimeoutExpired):
            process.wait(timeout=STOP_TIMEOUT_S)
    # Children (pool processes, the autoreloader's server) may outlive their parent.
    with contextlib.suppress(ProcessLookupError):
        os.killpg(process.pid, signal.SIGKILL)
    process.wait()

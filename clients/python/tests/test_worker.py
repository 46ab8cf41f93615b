"""The Python worker loop against the real service, beyond what the conformance cases check: the
lease extended while a handler runs longer than it, stop() giving up a waiting lease at once, and
SIGTERM stopping the loop between tasks (the task at hand finished and acked, the next one left
for another worker)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import tempfile
import threading
import time
import unittest
from pathlib import Path
from typing import List

from punctual import LeasedTask, Worker

from support import check_environment, client, wait_for

TYPE = "py_worker_job"
IDLE_TYPE = "py_idle_job"
SIGTERM_TYPE = "py_sigterm_job"
FIXTURE = Path(__file__).parent / "fixtures" / "sigterm_worker.py"


class WorkerTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls) -> None:
        check_environment()

    def test_extends_the_lease_while_the_handler_runs_longer_than_it(self) -> None:
        punctual = client()
        made = punctual.create(TYPE, {"do": "slow"}).task
        seen: List[LeasedTask] = []

        def handle(task: LeasedTask) -> None:
            # The 1 s lease would run out in here; a lease request meanwhile must not get the task.
            seen.extend(punctual.lease([TYPE], lease_ms=1000, wait_ms=3000))
            worker.stop()

        worker = Worker(punctual, [TYPE], handle, lease_ms=1000, wait_ms=5000)
        worker.run(handle_signals=False)
        self.assertEqual([], seen)
        task = punctual.get(made.id)
        self.assertEqual(("done", 1), (task.status, task.attempts))

    def test_stop_gives_up_a_waiting_lease_at_once(self) -> None:
        punctual = client()
        worker = Worker(punctual, [IDLE_TYPE], lambda task: None, wait_ms=25_000)
        thread = threading.Thread(target=worker.run, kwargs={"handle_signals": False})
        thread.start()
        wait_for(lambda: punctual.workers()["waitingHere"] >= 1 or None, 10, "the worker's lease request to wait")
        started = time.monotonic()
        worker.stop()
        thread.join(10)
        self.assertFalse(thread.is_alive())
        self.assertLess(time.monotonic() - started, 2.0)

    def test_sigterm_stops_the_loop_between_tasks(self) -> None:
        punctual = client()
        first = punctual.create(SIGTERM_TYPE, {"n": 1}).task
        with tempfile.TemporaryDirectory() as folder:
            ledger = Path(folder) / "ledger"
            release = Path(folder) / "release"
            worker = subprocess.Popen([sys.executable, str(FIXTURE), SIGTERM_TYPE, str(ledger), str(release)], env=os.environ.copy())
            try:
                wait_for(lambda: ledger.exists() and f"started {first.id}" in ledger.read_text() or None, 15, "the worker to start the task")
                second = punctual.create(SIGTERM_TYPE, {"n": 2}).task
                worker.send_signal(signal.SIGTERM)
                release.touch()  # the task at hand may finish now: it is acked, then the loop stops
                self.assertEqual(0, worker.wait(15))
            finally:
                if worker.poll() is None:
                    worker.kill()
            self.assertEqual([f"started {first.id}", f"finished {first.id}"], ledger.read_text().split("\n")[:-1])
        self.assertEqual("done", punctual.get(first.id).status)
        left = punctual.get(second.id)
        self.assertEqual(("pending", 0), (left.status, left.attempts))


if __name__ == "__main__":
    unittest.main()

"""The pull worker's loop: leases one task of the given worker types at a time (waiting for one,
a long poll), runs the handler on it, and settles it: a return acks, an exception nacks with its
message (tried again with the backoff), a PermanentFailure nacks it as permanent (failed for good).

    worker = Worker(punctual, ["reset_membership"], reset_membership)
    worker.run()            # until SIGTERM or SIGINT, or worker.stop() from another thread

What it decides:
- The lease is extended every third of `lease_ms` while the handler runs, from a thread of its
  own (the handler's own calls are never interleaved with it on one connection: each call has its
  own). An extension the service refuses (the lease was lost) is reported to `on_error`.
- stop() (and SIGTERM or SIGINT, while run() holds them in the main thread) stops the loop
  between tasks: the task at hand is finished and settled first, a lease request that is waiting
  is given up at once. The previous signal handlers are put back when run() returns.
- A lease or settle that fails (the service restarting, the network) is reported to `on_error`
  and the loop goes on after a pause: a task whose settle was lost comes back when its lease runs
  out, at least once, with the same idempotency key.
"""

from __future__ import annotations

import signal
import threading
from types import FrameType
from typing import TYPE_CHECKING, Any, Callable, Optional, Sequence

from ._http import Abort
from .errors import PermanentFailure, PunctualError
from .models import LeasedTask

if TYPE_CHECKING:
    from .client import Client

Handler = Callable[[LeasedTask], object]
_STOP_SIGNALS = (signal.SIGTERM, signal.SIGINT)


class Worker:
    def __init__(
        self,
        client: Client,
        types: Sequence[str],
        handler: Handler,
        *,
        lease_ms: int = 30_000,
        wait_ms: int = 25_000,
        on_error: Optional[Callable[[BaseException], None]] = None,
    ) -> None:
        """`lease_ms`: how long each task is leased (extended while the handler runs); `wait_ms`:
        how long one lease request waits for a task (at most 30,000); `on_error`: told of a lease,
        settle or extension that failed."""
        self._client = client
        self._types = list(types)
        self._handler = handler
        self._lease_ms = lease_ms
        self._wait_ms = wait_ms
        self._on_error = on_error
        self._stopped = threading.Event()
        self._waiting: Optional[Abort] = None

    @property
    def stopping(self) -> bool:
        return self._stopped.is_set()

    def stop(self) -> None:
        """Stops the loop between tasks; gives up a waiting lease request at once. Safe from any
        thread and from a signal handler."""
        self._stopped.set()
        waiting = self._waiting
        if waiting is not None:
            waiting.fire()

    def run(self, *, handle_signals: bool = True) -> int:
        """Runs the loop until stop() (or SIGTERM/SIGINT, with `handle_signals` in the main
        thread); answers how many tasks it handled."""
        previous: dict[signal.Signals, Any] = {}
        if handle_signals and threading.current_thread() is threading.main_thread():
            for number in _STOP_SIGNALS:
                previous[number] = signal.signal(number, self._on_signal)
        handled = 0
        try:
            while not self.stopping:
                abort = Abort()
                self._waiting = abort
                try:
                    tasks = self._client.lease(self._types, max=1, lease_ms=self._lease_ms, wait_ms=self._wait_ms, abort=abort)
                except PunctualError as error:
                    if self.stopping:
                        break
                    self._report(error)
                    self._stopped.wait(1.0)
                    continue
                finally:
                    self._waiting = None
                for task in tasks:
                    self._run_one(task)
                    handled += 1
        finally:
            for number, handler in previous.items():
                signal.signal(number, handler)
        return handled

    def _on_signal(self, number: int, frame: Optional[FrameType]) -> None:  # noqa: ARG002 - a signal handler's signature
        self.stop()

    def _run_one(self, task: LeasedTask) -> None:
        done = threading.Event()
        extender = threading.Thread(target=self._extend_until, args=(task, done), name=f"punctual-extend-{task.id}", daemon=True)
        extender.start()
        failure: Optional[BaseException] = None
        try:
            self._handler(task)
        except Exception as error:  # noqa: BLE001 - any failure of the handler nacks its task
            failure = error
        finally:
            done.set()
            extender.join()
        try:
            if failure is None:
                self._client.ack(task)
            else:
                message = str(failure) or type(failure).__name__
                self._client.nack(task, message, permanent=isinstance(failure, PermanentFailure))
        except PunctualError as error:
            # The lease was lost (it ran out: another worker has the task) or the service is away.
            self._report(error)

    def _extend_until(self, task: LeasedTask, done: threading.Event) -> None:
        every = max(0.5, self._lease_ms / 3000)
        while not done.wait(every):
            try:
                self._client.extend(task, self._lease_ms)
            except PunctualError as error:
                self._report(error)

    def _report(self, error: BaseException) -> None:
        if self._on_error is not None:
            self._on_error(error)

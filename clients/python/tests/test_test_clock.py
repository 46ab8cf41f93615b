"""clock(), advance() and set_time() against a punctual on the test clock (PUNCTUAL_TEST_CLOCK_URL),
and the 404 of one without it: a close_order due in 30 minutes runs when the clock passes 30."""

from __future__ import annotations

import unittest
from datetime import datetime, timezone

from punctual import Client
from punctual.errors import BadRequestError, NotFoundError
from support import check_environment, client, env, unique


class TestClockTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls) -> None:
        check_environment()
        cls.clock_client = Client(env("PUNCTUAL_TEST_CLOCK_URL"), env("PUNCTUAL_TOKEN"))

    def test_a_close_due_in_30_minutes_runs_when_the_clock_passes_30(self) -> None:
        punctual = self.clock_client
        sn = unique("SN")
        created = punctual.create("close_order", {"orderSn": sn}, delay_ms=30 * 60_000, key=f"close_order:{sn}")
        moved = punctual.advance(29 * 60_000)
        self.assertTrue(moved["settled"])
        self.assertEqual(punctual.get(created.task.id).status, "pending")
        punctual.advance(60_000)
        # No such order in the shop's table: the handler says so, and the task is done.
        self.assertEqual(punctual.get(created.task.id).status, "done")

    def test_set_time_moves_to_an_instant_and_never_back(self) -> None:
        punctual = self.clock_client
        now = punctual.clock()["nowMs"]
        to = datetime.fromtimestamp((now + 3_600_000) // 1000, tz=timezone.utc)
        self.assertEqual(punctual.set_time(to)["nowMs"], int(to.timestamp()) * 1000)
        with self.assertRaises(BadRequestError):
            punctual.set_time(now)
        self.assertEqual(punctual.clock()["nowMs"], int(to.timestamp()) * 1000)

    def test_a_service_without_the_test_clock_answers_404(self) -> None:
        with self.assertRaises(NotFoundError):
            client().clock()


if __name__ == "__main__":
    unittest.main()

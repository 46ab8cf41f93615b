"""The Python example of docs/clients.md, run as written (the service's URL put in for the
example's) in a process of its own: the close it creates is cancelled, the reset_membership task
waiting for it is worked, and SIGTERM ends it with exit code 0."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import tempfile
import unittest
from pathlib import Path

from support import check_environment, client, env, wait_for

ROOT = Path(__file__).resolve().parents[3]


def example(heading: str, language: str) -> str:
    """The first ```language block after `heading` in docs/clients.md."""
    text = (ROOT / "docs" / "clients.md").read_text(encoding="utf-8")
    after = text[text.index(heading + "\n") :]
    start = after.index(f"```{language}\n") + len(f"```{language}\n")
    return after[start : after.index("\n```", start)] + "\n"


class DocsExampleTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls) -> None:
        check_environment()

    def test_the_python_example_creates_cancels_and_works_until_sigterm(self) -> None:
        punctual = client()
        member = punctual.create("reset_membership", {"memberId": 42}).task
        code = example("### In Python", "python").replace("http://127.0.0.1:3000", env("PUNCTUAL_URL"))
        self.assertLessEqual(len([line for line in code.splitlines() if line.strip()]), 10, "the example is to be short")
        with tempfile.TemporaryDirectory() as folder:
            script = Path(folder) / "example.py"
            script.write_text(code, encoding="utf-8")
            environment = {**os.environ, "PYTHONPATH": str(ROOT / "clients" / "python" / "src")}
            process = subprocess.Popen([sys.executable, str(script)], env=environment, stdout=subprocess.PIPE, text=True)
            try:
                wait_for(lambda: punctual.get(member.id).status == "done" or None, 15, "the example to work the reset_membership task")
                self.assertEqual("cancelled", punctual.get_by_key("close_order:SN123").status)
                process.send_signal(signal.SIGTERM)
                output, _ = process.communicate(timeout=15)
            finally:
                if process.poll() is None:
                    process.kill()
        self.assertEqual(0, process.returncode)
        self.assertIn("reset member {'memberId': 42}", output)


if __name__ == "__main__":
    unittest.main()

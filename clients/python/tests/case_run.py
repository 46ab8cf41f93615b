"""The Python reading of the conformance cases (clients/conformance/cases.json, whose `about`
says what a step, a reference and a matcher are), as the TypeScript, PHP and Go runners read the
same file: steps run through an adapter that calls the Python client, answers are held against
what the case expects.

What it decides: a mismatch fails the case with the step, the path in the answer and both
values; booleans are never numbers (True is not 1); `until` polls every 100 ms up to `within`
(15 s); `received` is read from the receiver here, it is not a client's call.
"""

from __future__ import annotations

import json
import re
import time
import urllib.request
from typing import Any, Callable, Dict, List, Optional
from urllib.parse import quote

POLL_S = 0.1
DEFAULT_WITHIN_MS = 15_000
REFERENCE = re.compile(r"^\$([A-Za-z_]\w*)((?:\.[^.]+)*)$")


class CaseFailed(AssertionError):
    """A step did not answer as the case expects; the message says where and how."""


def _show(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False)


def _type_of(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int):
        return "integer"
    if isinstance(value, float):
        return "number"
    if isinstance(value, str):
        return "string"
    return "array" if isinstance(value, list) else "object"


def _number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


class CaseRun:
    def __init__(
        self,
        case: Dict[str, Any],
        placeholders: Dict[str, str],
        call: Callable[[str, Dict[str, Any]], Any],
        error: Callable[[BaseException], Optional[Dict[str, Any]]],
    ) -> None:
        """`call` answers the client's result as JSON-like values with the API's field names;
        `error` the client's API error as the cases see it, None for anything else."""
        self.case = case
        self._placeholders = placeholders
        self._call = call
        self._error = error
        self._saved: Dict[str, Any] = {}

    def run(self) -> None:
        for index, step in enumerate(self.case["steps"]):
            label = f"{self.case['name']}, step {index + 1} ({step['call']})"
            answer = self._step(step, label)
            if "save" in step:
                self._saved[step["save"]] = answer

    def _step(self, step: Dict[str, Any], label: str) -> Any:
        args = self.resolve(step.get("with", {}))

        def call() -> Any:
            return self._received(args["name"]) if step["call"] == "received" else self._call(step["call"], args)

        if "expectError" in step:
            try:
                answer = call()
            except Exception as thrown:  # noqa: BLE001 - the adapter says which errors are the client's
                view = self._error(thrown)
                if view is None:
                    raise
                self._check(label, step["expectError"], view)
                return view
            raise CaseFailed(f"{label}: expected an error, got {_show(answer)}")
        answer = call()
        if "until" in step:
            until = self.resolve(step["until"])
            within = step.get("within", DEFAULT_WITHIN_MS)
            deadline = time.monotonic() + within / 1000
            while self.mismatches(until, answer):
                if time.monotonic() > deadline:
                    self._check(f"{label}, still after {within} ms", step["until"], answer)
                time.sleep(POLL_S)
                answer = call()
        if "expect" in step:
            self._check(label, step["expect"], answer)
        return answer

    def _check(self, label: str, expected: Any, answer: Any) -> None:
        problems = self.mismatches(self.resolve(expected), answer)
        if problems:
            raise CaseFailed(f"{label}:\n  " + "\n  ".join(problems))

    def resolve(self, value: Any) -> Any:
        """The value with placeholders replaced in its strings and references to saved answers taken."""
        if isinstance(value, str):
            reference = REFERENCE.match(value)
            if reference:
                return self._lookup(reference.group(1), reference.group(2))
            for name, replacement in self._placeholders.items():
                value = value.replace("{" + name + "}", replacement)
            return value
        if isinstance(value, list):
            return [self.resolve(item) for item in value]
        if isinstance(value, dict):
            return {key: self.resolve(item) for key, item in value.items()}
        return value

    def _lookup(self, name: str, path: str) -> Any:
        if name not in self._saved:
            raise CaseFailed(f"the case refers to ${name}, which no earlier step saved")
        value = self._saved[name]
        for segment in path.split(".")[1:]:
            try:
                value = value[int(segment)] if isinstance(value, list) else value[segment]
            except (KeyError, IndexError, ValueError, TypeError):
                raise CaseFailed(f"${name}{path}: the saved answer has no {segment}") from None
        return value

    def mismatches(self, expected: Any, actual: Any, at: str = "") -> List[str]:
        """Where `actual` differs from `expected` (already resolved), one line each."""
        here = at or "the answer"
        if isinstance(expected, dict):
            if any(key.startswith("$") for key in expected):
                return self._operator(expected, actual, here)
            if not isinstance(actual, dict):
                return [f"{here}: expected an object, got {_show(actual)}"]
            problems: List[str] = []
            for key, item in expected.items():
                path = f"{at}.{key}" if at else key
                if key not in actual:
                    problems.append(f"{path}: missing from the answer")
                else:
                    problems.extend(self.mismatches(item, actual[key], path))
            return problems
        if isinstance(expected, list):
            if not isinstance(actual, list):
                return [f"{here}: expected an array, got {_show(actual)}"]
            if len(actual) != len(expected):
                return [f"{here}: expected {len(expected)} items, got {len(actual)}: {_show(actual)}"]
            return [problem for index, item in enumerate(expected) for problem in self.mismatches(item, actual[index], f"{at}.{index}")]
        if _number(expected) and _number(actual):
            same = expected == actual
        else:
            same = type(expected) is type(actual) and expected == actual
        return [] if same else [f"{here}: expected {_show(expected)}, got {_show(actual)}"]

    def _operator(self, expected: Dict[str, Any], actual: Any, here: str) -> List[str]:
        (operator, operand), = expected.items()

        def fail(what: str) -> List[str]:
            return [f"{here}: expected {what}, got {_show(actual)}"]

        if operator == "$type":
            kind = _type_of(actual)
            return [] if kind == operand or (operand == "number" and kind == "integer") else fail(f"a value of type {operand}")
        if operator == "$matches":
            return [] if isinstance(actual, str) and re.search(operand, actual) else fail(f"a string matching /{operand}/")
        if operator == "$contains":
            return [] if isinstance(actual, str) and operand in actual else fail(f"a string containing {_show(operand)}")
        if operator == "$length":
            return [] if isinstance(actual, list) and len(actual) == operand else fail(f"{operand} items")
        if operator == "$not":
            return [] if self.mismatches(operand, actual) else fail(f"anything but {_show(operand)}")
        raise CaseFailed(f"unknown matcher {operator}")

    def _received(self, name: str) -> Any:
        with urllib.request.urlopen(f"{self._placeholders['receiver']}/received/{quote(name, safe='')}", timeout=10) as response:
            return json.loads(response.read().decode("utf-8"))

"""No module over 600 lines and no function over 100 lines in ``annotation/`` or ``rubrics/``
(issue 44): a reader should be able to hold a module, and see a function whole.

Migrations are generated and left out. Lines are the file's lines as an editor counts them;
a function's lines run from its ``def`` (decorators excluded) to its last statement.
"""

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
FOLDERS = ("annotation", "rubrics")
MAX_MODULE_LINES = 600
MAX_FUNCTION_LINES = 100


def python_files():
    for folder in FOLDERS:
        yield from sorted(
            path for path in (ROOT / folder).rglob("*.py") if "migrations" not in path.parts
        )


def long_functions(source: str, limit: int) -> list[tuple[str, int, int]]:
    """``(name, first line, length)`` of every function or method longer than ``limit``."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            length = node.end_lineno - node.lineno + 1
            if length > limit:
                found.append((node.name, node.lineno, length))
    return found


def test_no_module_is_over_600_lines():
    long = {
        str(path.relative_to(ROOT)): count
        for path in python_files()
        if (count := len(path.read_text(encoding="utf-8").splitlines())) > MAX_MODULE_LINES
    }
    assert long == {}


def test_no_function_is_over_100_lines():
    long = {
        f"{path.relative_to(ROOT)}:{line} {name}": length
        for path in python_files()
        for name, line, length in long_functions(
            path.read_text(encoding="utf-8"), MAX_FUNCTION_LINES
        )
    }
    assert long == {}


def test_the_function_check_counts_from_def_to_the_last_statement():
    body = "\n".join(f"    x{n} = {n}" for n in range(100))
    short = "class A:\n    async def short(self):\n        pass\n"
    source = f"@decorated\ndef long():\n{body}\n\n\n{short}"
    # def + 100 statements = 101 lines; the decorator is not counted.
    assert long_functions(source, 100) == [("long", 2, 101)]
    assert long_functions(source, 101) == []

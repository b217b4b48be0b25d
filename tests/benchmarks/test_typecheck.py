"""`python -m benchmarks.typecheck`: what the type check before a run costs."""

import pytest

from benchmarks import typecheck


@pytest.mark.slow
def test_the_command_prints_a_row_per_tool_count(capsys):
    typecheck.main(["--tools", "3", "40", "--runs", "1"])
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].split() == ["tools", "first", "check", "ms", "per", "run", "ms"]
    assert [line.split()[0] for line in lines[1:]] == ["3", "40"]
    assert all(float(x) > 0 for line in lines[1:] for x in line.split()[1:])


def test_the_tools_have_nested_arguments_and_results():
    [(name, _, parameters, result)] = typecheck.tool_schemas(1)
    assert name == "tool_0"
    assert parameters["properties"]["query"]["properties"]["filters"]["type"] == "object"
    assert result["properties"]["items"]["items"]["properties"]["owner"]["type"] == "object"

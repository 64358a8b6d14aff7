"""Unit tests of the plugin itself (no daemon): pytest test_my_tools.py"""

import pytest

from meith_tools import ToolError
from my_tools import MyTools


def test_counts_words_and_lines():
    tool = MyTools()
    assert tool.execute_tool("count_text", {"text": "a b c"}, tool.init({}))["result"] == {"words": 3}
    lines = tool.init({"unit": "lines"})
    assert tool.execute_tool("count_text", {"text": "a\nb"}, lines)["result"] == {"lines": 2}


def test_preview_and_model_text():
    tool = MyTools()
    state = tool.init({})
    assert tool.format_tool_call_preview("count_text", {"text": "abc"}, state) == \
        "count the words of 3 characters"
    assert tool.format_tool_result({"success": True, "result": {"words": 3}}, state) == "3 words"


def test_unknown_tool():
    with pytest.raises(ToolError):
        MyTools().execute_tool("nope", {}, {"unit": "words"})

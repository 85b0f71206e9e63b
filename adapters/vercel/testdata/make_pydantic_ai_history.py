"""Expected AG-UI histories for Vercel UI message histories, as pydantic-ai's
own adapters translate them: `VercelAIAdapter.load_messages` then
`AGUIAdapter.dump_messages` (and the other way for the AG-UI cases).

Run with pydantic-ai-slim[ag-ui]==2.68.0 (ag-ui-protocol 1.0.0) installed:

    python3 -m venv target/pyai-venv
    target/pyai-venv/bin/pip install 'pydantic-ai-slim[ag-ui]==2.68.0'
    target/pyai-venv/bin/python adapters/vercel/testdata/make_pydantic_ai_history.py \
        > adapters/vercel/testdata/pydantic_ai_history.json

pydantic-ai gives every AG-UI message it splits off a fresh uuid4 (and the
UI message's id to the last message of each model message), so ids are
written as `*` here: the tests compare everything else exactly.
"""

import json
import sys
from importlib.metadata import version

from ag_ui.core import Message
from pydantic import TypeAdapter

from pydantic_ai.ui.ag_ui import AGUIAdapter
from pydantic_ai.ui.vercel_ai import VercelAIAdapter
from pydantic_ai.ui.vercel_ai.request_types import UIMessage

CASES = {
    # fault 1: a user message with two text parts
    "user_two_texts": [
        {"id": "u1", "role": "user", "parts": [
            {"type": "text", "text": "first line"},
            {"type": "text", "text": "second line"},
        ]},
    ],
    # fault 2: text, a tool call (with its result), more text, in one step
    "text_call_text_one_step": [
        {"id": "u1", "role": "user", "parts": [{"type": "text", "text": "weather?"}]},
        {"id": "a1", "role": "assistant", "parts": [
            {"type": "step-start"},
            {"type": "text", "text": "Let me look.", "state": "done"},
            {"type": "tool-get_weather", "toolCallId": "tc-1", "state": "output-available",
             "input": {"city": "Paris"}, "output": "sunny"},
            {"type": "text", "text": "It is sunny.", "state": "done"},
        ]},
    ],
    # fault 2 as the ai package streams it: a step per model call
    "text_call_text_two_steps": [
        {"id": "u1", "role": "user", "parts": [{"type": "text", "text": "weather?"}]},
        {"id": "a1", "role": "assistant", "parts": [
            {"type": "step-start"},
            {"type": "text", "text": "Let me look.", "state": "done"},
            {"type": "tool-get_weather", "toolCallId": "tc-1", "state": "output-available",
             "input": {"city": "Paris"}, "output": "sunny"},
            {"type": "step-start"},
            {"type": "text", "text": "It is sunny.", "state": "done"},
        ]},
    ],
    # fault 2 without step-start parts (as pydantic-ai's dump_messages writes)
    "text_call_text_no_steps": [
        {"id": "u1", "role": "user", "parts": [{"type": "text", "text": "weather?"}]},
        {"id": "a1", "role": "assistant", "parts": [
            {"type": "text", "text": "Let me look.", "state": "done"},
            {"type": "tool-get_weather", "toolCallId": "tc-1", "state": "output-available",
             "input": {"city": "Paris"}, "output": "sunny"},
            {"type": "text", "text": "It is sunny.", "state": "done"},
        ]},
    ],
    # fault 3: reasoning parts
    "reasoning": [
        {"id": "u1", "role": "user", "parts": [{"type": "text", "text": "2+2?"}]},
        {"id": "a1", "role": "assistant", "parts": [
            {"type": "step-start"},
            {"type": "reasoning", "text": "Adding two and two.", "state": "done"},
            {"type": "text", "text": "4", "state": "done"},
            {"type": "tool-check", "toolCallId": "tc-1", "state": "output-available",
             "input": {"n": 4}, "output": {"ok": True}},
            {"type": "step-start"},
            {"type": "reasoning", "text": "Checked.", "state": "done"},
            {"type": "text", "text": "Sure: 4.", "state": "done"},
        ]},
    ],
    # two calls in one step, then an error result, then text
    "parallel_calls": [
        {"id": "u1", "role": "user", "parts": [{"type": "text", "text": "both"}]},
        {"id": "a1", "role": "assistant", "parts": [
            {"type": "step-start"},
            {"type": "tool-a", "toolCallId": "tc-1", "state": "output-available", "input": {}, "output": "A"},
            {"type": "tool-b", "toolCallId": "tc-2", "state": "output-error", "input": {"x": 1},
             "errorText": "boom"},
            {"type": "step-start"},
            {"type": "text", "text": "Done.", "state": "done"},
        ]},
    ],
    # a user message with text, a file, then text: one message, parts in order
    "user_text_file_text": [
        {"id": "u1", "role": "user", "parts": [
            {"type": "text", "text": "look at"},
            {"type": "file", "mediaType": "image/png", "url": "data:image/png;base64,AAAA"},
            {"type": "text", "text": "and say"},
        ]},
    ],
    # adjacent texts in one step run together; text, reasoning, text splits
    "assistant_texts_and_reasoning_between": [
        {"id": "u1", "role": "user", "parts": [{"type": "text", "text": "hi"}]},
        {"id": "a1", "role": "assistant", "parts": [
            {"type": "step-start"},
            {"type": "text", "text": "One. ", "state": "done"},
            {"type": "text", "text": "Two.", "state": "done"},
            {"type": "reasoning", "text": "more?", "state": "done"},
            {"type": "text", "text": "Three.", "state": "done"},
        ]},
    ],
}

# AG-UI histories, to Vercel UI messages: `AGUIAdapter.load_messages` then
# `VercelAIAdapter.dump_messages`.
AG_UI_CASES = {
    "reasoning_call_result_text": [
        {"id": "u1", "role": "user", "content": "2+2?"},
        {"id": "r1", "role": "reasoning", "content": "Adding."},
        {"id": "a1", "role": "assistant", "content": "4", "toolCalls": [
            {"id": "tc-1", "type": "function", "function": {"name": "check", "arguments": "{\"n\":4}"}}]},
        {"id": "t1", "role": "tool", "toolCallId": "tc-1", "content": "ok"},
        {"id": "a2", "role": "assistant", "content": "Sure: 4."},
    ],
    "user_parts": [
        {"id": "u1", "role": "user", "content": [
            {"type": "text", "text": "first"}, {"type": "text", "text": "second"}]},
    ],
}


def normalize(messages):
    out = []
    for m in messages:
        d = m.model_dump(by_alias=True, exclude_none=True, mode="json")
        d["id"] = "*"
        out.append(d)
    return out


def main():
    ui = TypeAdapter(list[UIMessage])
    result = {
        "_generator": {
            "pydantic-ai-slim": version("pydantic-ai-slim"),
            "ag-ui-protocol": version("ag-ui-protocol"),
            "script": "adapters/vercel/testdata/make_pydantic_ai_history.py",
        },
        "vercel_to_ag_ui": {},
    }
    for name, messages in CASES.items():
        model = VercelAIAdapter.load_messages(ui.validate_python(messages))
        result["vercel_to_ag_ui"][name] = {
            "vercel": messages,
            "ag_ui": normalize(AGUIAdapter.dump_messages(model)),
        }
    result["ag_ui_to_vercel"] = {}
    ag = TypeAdapter(list[Message])
    for name, messages in AG_UI_CASES.items():
        model = AGUIAdapter.load_messages(ag.validate_python(messages))
        dumped = VercelAIAdapter.dump_messages(model)
        result["ag_ui_to_vercel"][name] = {
            "ag_ui": messages,
            "vercel": [
                {**m.model_dump(by_alias=True, exclude_none=True, mode="json",
                                exclude={"metadata"}), "id": "*"}
                for m in dumped
            ],
        }
    json.dump(result, sys.stdout, indent=1, ensure_ascii=False)
    sys.stdout.write("\n")


if __name__ == "__main__":
    main()

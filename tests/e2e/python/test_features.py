"""Nothing lost between client and provider, proven with the official Python SDKs.

The `openai` and `anthropic` packages (pinned in requirements.txt) talk to the built Worker in
workerd, in front of the mock provider; tests/e2e/python-features.test.mjs starts both (the
routes are those of tests/e2e/features-setup.mjs) and runs this module with GATEWAY_URL,
GATEWAY_KEY, MOCK_URL and MOCK_KEY (the key the gateway sends the mock) in the environment.
Each test asserts on what the mock received (GET /admin/<provider>/received) and on what the
SDK returned.
"""

import base64
import hashlib
import json
import os
import unittest
import urllib.request

import anthropic
import openai
from pydantic import BaseModel

GATEWAY_URL = os.environ["GATEWAY_URL"]
GATEWAY_KEY = os.environ["GATEWAY_KEY"]
MOCK_URL = os.environ["MOCK_URL"]
MOCK_KEY = os.environ["MOCK_KEY"]

PNG = (
    "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNkYPhfDwAChwGA60e6kgAAAABJRU5ErkJggg=="
)
IMAGE_URL = "https://example.com/cat.png"
LONG_SYSTEM = " ".join(f"rule{i}" for i in range(60))
TOOLS_OAI = [
    {
        "type": "function",
        "function": {
            "name": name,
            "description": f"{name} of a city",
            "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]},
        },
    }
    for name in ("get_weather", "get_time")
]
TOOLS_ANT = [
    {"name": t["function"]["name"], "description": t["function"]["description"], "input_schema": t["function"]["parameters"]}
    for t in TOOLS_OAI
]
EXPECTED_CALLS = [("get_weather", {"city": "mock"}), ("get_time", {"city": "mock"})]


class City(BaseModel):
    city: str
    population: int


CITY = City(city="mock", population=1)


def received(provider):
    """The requests the mock provider `provider` received, oldest first."""
    with urllib.request.urlopen(f"{MOCK_URL}/admin/{provider}/received", timeout=10) as res:
        return json.load(res)["received"]


def last(provider):
    got = received(provider)
    if not got:
        raise AssertionError(f"{provider} received nothing")
    return got[-1]


def clear_received():
    for provider in ("oai", "ant", "oai-nousage", "oai-silent", "oai-fut", "ant-fut", "ant-red"):
        req = urllib.request.Request(f"{MOCK_URL}/admin/{provider}/received", method="DELETE")
        with urllib.request.urlopen(req, timeout=10):
            pass


def signature(provider, seq):
    return base64.b64encode(f"mock-signature:{provider}:{seq}".encode()).decode()


def key_digest(value):
    """As the mock records a key header: the first 12 hex digits of its SHA-256."""
    return hashlib.sha256(value.encode()).hexdigest()[:12]


def user(content):
    return [{"role": "user", "content": content}]


class Features(unittest.TestCase):
    maxDiff = None

    @classmethod
    def setUpClass(cls):
        cls.openai = openai.OpenAI(api_key=GATEWAY_KEY, base_url=f"{GATEWAY_URL}/v1", max_retries=0, timeout=20)
        cls.anthropic = anthropic.Anthropic(api_key=GATEWAY_KEY, base_url=GATEWAY_URL, max_retries=0, timeout=20)

    def setUp(self):
        clear_received()

    # ------------------------------------------------------------ structured outputs

    def test_structured_output_openai_parse_pydantic_passthrough(self):
        r = self.openai.chat.completions.parse(model="gpt", messages=user("Paris?"), response_format=City)
        self.assertEqual(r.choices[0].message.parsed, CITY)
        rf = last("oai")["body"]["response_format"]
        self.assertEqual(rf["type"], "json_schema")
        self.assertEqual((rf["json_schema"]["name"], rf["json_schema"]["strict"]), ("City", True))
        self.assertEqual(rf["json_schema"]["schema"]["required"], ["city", "population"])
        self.assertEqual(last("oai")["body"]["model"], "gpt-mock")

    def test_structured_output_openai_parse_pydantic_to_anthropic_forced_tool(self):
        r = self.openai.chat.completions.parse(model="claude", messages=user("Paris?"), response_format=City)
        message = r.choices[0].message
        self.assertEqual(message.parsed, CITY)
        self.assertEqual(json.loads(message.content), CITY.model_dump())
        self.assertFalse(message.tool_calls)
        sent = last("ant")["body"]
        tools = [t for t in sent.get("tools", []) if "input_schema" in t]
        self.assertEqual(len(tools), 1, sent)
        self.assertEqual(set(tools[0]["input_schema"]["properties"]), {"city", "population"})
        self.assertEqual(sent["tool_choice"], {"type": "tool", "name": tools[0]["name"]})

    def test_structured_output_anthropic_parse_pydantic_passthrough(self):
        r = self.anthropic.messages.parse(model="claude", max_tokens=512, messages=user("Paris?"), output_format=City)
        self.assertEqual(r.parsed_output, CITY)
        fmt = last("ant")["body"]["output_config"]["format"]
        self.assertEqual(fmt["type"], "json_schema")
        self.assertEqual(set(fmt["schema"]["properties"]), {"city", "population"})

    def test_structured_output_anthropic_parse_pydantic_to_openai(self):
        r = self.anthropic.messages.parse(model="gpt", max_tokens=512, messages=user("Paris?"), output_format=City)
        self.assertEqual(r.parsed_output, CITY)
        rf = last("oai")["body"]["response_format"]
        self.assertEqual(rf["type"], "json_schema")
        self.assertEqual(set(rf["json_schema"]["schema"]["properties"]), {"city", "population"})

    # ------------------------------------------------------------ images

    OAI_PARTS = [
        {"type": "text", "text": "what is in these images"},
        {"type": "image_url", "image_url": {"url": f"data:image/png;base64,{PNG}"}},
        {"type": "image_url", "image_url": {"url": IMAGE_URL, "detail": "low"}},
    ]
    ANT_BLOCKS = [
        {"type": "text", "text": "what is in these images"},
        {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": PNG}},
        {"type": "image", "source": {"type": "url", "url": IMAGE_URL}},
    ]

    def test_images_openai_passthrough(self):
        self.openai.chat.completions.create(model="gpt", messages=user(self.OAI_PARTS))
        self.assertEqual(last("oai")["body"]["messages"], user(self.OAI_PARTS))

    def test_images_openai_to_anthropic_image_blocks(self):
        r = self.openai.chat.completions.create(model="claude", messages=user(self.OAI_PARTS))
        self.assertIn("what is in these images", r.choices[0].message.content)
        content = last("ant")["body"]["messages"][0]["content"]
        sources = [b["source"] for b in content if b["type"] == "image"]
        self.assertEqual(sources, [b["source"] for b in self.ANT_BLOCKS[1:]])

    def test_images_anthropic_passthrough(self):
        self.anthropic.messages.create(model="claude", max_tokens=64, messages=user(self.ANT_BLOCKS))
        self.assertEqual(last("ant")["body"]["messages"], user(self.ANT_BLOCKS))

    def test_images_anthropic_to_openai_image_url(self):
        self.anthropic.messages.create(model="gpt", max_tokens=64, messages=user(self.ANT_BLOCKS))
        content = last("oai")["body"]["messages"][0]["content"]
        urls = [p["image_url"]["url"] for p in content if p["type"] == "image_url"]
        self.assertEqual(urls, [f"data:image/png;base64,{PNG}", IMAGE_URL])

    # ------------------------------------------------------------ reasoning and thinking

    def test_reasoning_effort_to_anthropic_thinking_and_back_with_signature(self):
        r = self.openai.chat.completions.create(model="claude", messages=user("think it over"), reasoning_effort="high")
        got = last("ant")
        thinking = got["body"].get("thinking") or {}
        self.assertEqual(thinking.get("type"), "enabled", got["body"])
        self.assertGreaterEqual(thinking["budget_tokens"], 1024)
        self.assertGreater(got["body"]["max_tokens"], thinking["budget_tokens"])
        message = r.choices[0].message
        self.assertEqual(message.reasoning_content, "Considering: think it over")
        self.assertEqual(
            message.thinking_blocks,
            [{"type": "thinking", "thinking": "Considering: think it over", "signature": signature("ant", got["seq"])}],
        )
        # The second turn sends the thinking blocks back; Anthropic gets them signed, first.
        messages = [
            *user("think it over"),
            {"role": "assistant", "content": message.content, "thinking_blocks": message.thinking_blocks},
            *user("and then?"),
        ]
        self.openai.chat.completions.create(model="claude", messages=messages, reasoning_effort="high")
        assistant = last("ant")["body"]["messages"][1]
        self.assertEqual(assistant["content"][0], message.thinking_blocks[0])

    def test_reasoning_streamed_from_anthropic_thinking_deltas(self):
        stream = self.openai.chat.completions.create(
            model="claude", stream=True, messages=user("stream thoughts"), reasoning_effort="low"
        )
        reasoning, text, blocks = "", "", []
        for chunk in stream:
            if not chunk.choices:
                continue
            delta = chunk.choices[0].delta
            reasoning += getattr(delta, "reasoning_content", None) or ""
            text += delta.content or ""
            blocks += getattr(delta, "thinking_blocks", None) or []
        self.assertEqual(reasoning, "Considering: stream thoughts")
        self.assertEqual(text, "[ant] echo: stream thoughts")
        self.assertIn(signature("ant", last("ant")["seq"]), [b.get("signature") for b in blocks])

    def test_thinking_anthropic_passthrough_streamed(self):
        thinking = {"type": "enabled", "budget_tokens": 2048}
        kinds = set()
        with self.anthropic.messages.stream(
            model="claude", max_tokens=4096, thinking=thinking, messages=user("ponder this")
        ) as stream:
            for event in stream:
                if event.type == "content_block_delta":
                    kinds.add(event.delta.type)
            final = stream.get_final_message()
        self.assertEqual(last("ant")["body"]["thinking"], thinking)
        self.assertTrue({"thinking_delta", "signature_delta"} <= kinds, kinds)
        self.assertEqual(final.content[0].type, "thinking")
        self.assertEqual(final.content[0].signature, signature("ant", last("ant")["seq"]))

    def test_thinking_anthropic_to_openai_reasoning(self):
        r = self.anthropic.messages.create(
            model="gpt", max_tokens=4096, thinking={"type": "enabled", "budget_tokens": 2048}, messages=user("ponder this")
        )
        self.assertIn(last("oai")["body"].get("reasoning_effort"), {"minimal", "low", "medium", "high"})
        thoughts = [b.thinking for b in r.content if b.type == "thinking"]
        self.assertEqual(thoughts, ["Considering: ponder this"])

    # ------------------------------------------------------------ prompt caching

    def test_prompt_caching_anthropic_passthrough_and_cache_usage(self):
        body = dict(
            model="claude",
            max_tokens=64,
            system=[{"type": "text", "text": LONG_SYSTEM, "cache_control": {"type": "ephemeral"}}],
            messages=user([{"type": "text", "text": "cached question", "cache_control": {"type": "ephemeral", "ttl": "1h"}}]),
        )
        first = self.anthropic.messages.create(**body)
        sent = last("ant")["body"]
        self.assertEqual((sent["system"], sent["messages"]), (body["system"], body["messages"]))
        self.assertGreater(first.usage.cache_creation_input_tokens, 0)
        second = self.anthropic.messages.create(**body)
        self.assertEqual(second.usage.cache_read_input_tokens, first.usage.cache_creation_input_tokens)

    def test_prompt_caching_openai_to_anthropic_cached_tokens(self):
        messages = [
            {"role": "system", "content": [{"type": "text", "text": LONG_SYSTEM, "cache_control": {"type": "ephemeral"}}]},
            *user("cached question"),
        ]
        self.openai.chat.completions.create(model="claude", messages=messages)
        system = last("ant")["body"]["system"]
        self.assertIsInstance(system, list, "the system prompt keeps its blocks")
        self.assertEqual([b.get("cache_control") for b in system], [{"type": "ephemeral"}])
        second = self.openai.chat.completions.create(model="claude", messages=messages)
        cached = second.usage.prompt_tokens_details.cached_tokens
        self.assertGreater(cached, 0)
        self.assertGreaterEqual(second.usage.prompt_tokens, cached)

    def test_prompt_caching_openai_cached_tokens_to_anthropic_usage(self):
        body = dict(model="gpt", max_tokens=64, system=LONG_SYSTEM, messages=user("q"))
        self.anthropic.messages.create(**body)
        self.assertEqual(self.anthropic.messages.create(**body).usage.cache_read_input_tokens, 60)

    # ------------------------------------------------------------ streamed tool calls

    def test_streamed_tool_calls_openai_client_from_anthropic(self):
        stream = self.openai.chat.completions.create(
            model="claude", stream=True, messages=user("weather and time"), tools=TOOLS_OAI, tool_choice="required"
        )
        calls, finish = {}, None
        for chunk in stream:
            if not chunk.choices:
                continue
            for tc in chunk.choices[0].delta.tool_calls or []:
                call = calls.setdefault(tc.index, {"name": "", "arguments": ""})
                call["name"] += (tc.function and tc.function.name) or ""
                call["arguments"] += (tc.function and tc.function.arguments) or ""
            finish = chunk.choices[0].finish_reason or finish
        self.assertEqual([(c["name"], json.loads(c["arguments"])) for _, c in sorted(calls.items())], EXPECTED_CALLS)
        self.assertEqual(finish, "tool_calls")

    def test_streamed_tool_calls_anthropic_client_from_openai(self):
        with self.anthropic.messages.stream(
            model="gpt", max_tokens=256, messages=user("weather and time"), tools=TOOLS_ANT, tool_choice={"type": "any"}
        ) as stream:
            final = stream.get_final_message()
        self.assertEqual(final.stop_reason, "tool_use")
        self.assertEqual([(b.name, b.input) for b in final.content if b.type == "tool_use"], EXPECTED_CALLS)
        self.assertEqual([t["function"]["name"] for t in last("oai")["body"]["tools"]], ["get_weather", "get_time"])

    def test_streamed_tool_calls_anthropic_passthrough(self):
        with self.anthropic.messages.stream(
            model="claude", max_tokens=256, messages=user("weather and time"), tools=TOOLS_ANT, tool_choice={"type": "any"}
        ) as stream:
            final = stream.get_final_message()
        self.assertEqual([(b.name, b.input) for b in final.content if b.type == "tool_use"], EXPECTED_CALLS)
        self.assertEqual(last("ant")["body"]["tools"], TOOLS_ANT)

    # ------------------------------------------------------------ unknown fields

    def test_unknown_future_field_openai_passthrough(self):
        future = {"mode": "x", "weights": [1, 2, 3]}
        r = self.openai.chat.completions.create(
            model="gpt-future",
            messages=user("hi"),
            extra_body={"some_future_param": future},
            extra_headers={"openai-beta": "future=v1"},
        )
        got = last("oai-fut")
        self.assertEqual(got["body"]["some_future_param"], future)
        self.assertEqual(got["headers"]["openai-beta"], "future=v1")
        self.assertEqual(got["keyDigests"], {"authorization": key_digest(f"Bearer {MOCK_KEY}")}, "never the client's key")
        self.assertIsNotNone(r.model_extra.get("mock_future_field"))
        self.assertEqual(r.system_fingerprint, "fp_mock")

    def test_unknown_future_field_anthropic_passthrough(self):
        r = self.anthropic.messages.create(
            model="claude-future",
            max_tokens=64,
            messages=user("hi"),
            extra_body={"some_future_param": {"level": 3}},
            extra_headers={"anthropic-beta": "future-2026-01-01"},
        )
        got = last("ant-fut")
        self.assertEqual(got["body"]["some_future_param"], {"level": 3})
        self.assertEqual(got["headers"]["anthropic-beta"], "future-2026-01-01")
        self.assertEqual(got["keyDigests"], {"x-api-key": key_digest(MOCK_KEY)}, "never the client's key")
        self.assertIsNotNone(r.model_extra.get("mock_future_field"))

    # ------------------------------------------------------------ stream usage

    def test_stream_usage_real_when_the_provider_sent_it(self):
        usages = [
            c.usage
            for c in self.openai.chat.completions.create(
                model="gpt-nousage", stream=True, stream_options={"include_usage": True}, messages=user("count these words")
            )
            if c.usage
        ]
        self.assertTrue(last("oai-nousage")["body"].get("stream_options", {}).get("include_usage"))
        self.assertEqual([u.completion_tokens for u in usages], [5])

    def test_stream_usage_absent_when_the_provider_sent_none(self):
        chunks = list(
            self.openai.chat.completions.create(
                model="gpt-silent", stream=True, stream_options={"include_usage": True}, messages=user("count these words")
            )
        )
        self.assertEqual("".join(c.choices[0].delta.content or "" for c in chunks if c.choices), "[oai-silent] echo: count these words")
        self.assertEqual([c.usage for c in chunks if c.usage], [], "no usage invented")

    # ------------------------------------------------------------ mixed route

    def test_mixed_route_served_by_the_entry_that_can(self):
        raw = self.openai.chat.completions.with_raw_response.create(model="mixed", messages=user("hi"), logprobs=True)
        r = raw.parse()
        self.assertEqual(raw.headers.get("x-served-by"), "oai/gpt-mixed")
        self.assertTrue(r.choices[0].logprobs.content)
        self.assertEqual(received("ant"), [])

    def test_no_entry_can_serve_logprobs_400_naming_the_field(self):
        with self.assertRaises(openai.BadRequestError) as caught:
            self.openai.chat.completions.create(model="claude", messages=user("hi"), logprobs=True)
        self.assertIn("logprobs: not available from anthropic", str(caught.exception))
        self.assertEqual(received("ant"), [])


if __name__ == "__main__":
    unittest.main()

"""The OpenAI Responses API through the gateway, with the official Python SDK.

The `openai` package (pinned in requirements.txt) talks to the built Worker in workerd, in
front of the mock provider; tests/e2e/python-responses.test.mjs starts both (the routes are
those of tests/e2e/responses-setup.mjs) and runs this module with GATEWAY_URL, GATEWAY_KEY and
MOCK_URL in the environment. Each test asserts on what the SDK returned and, where it says
something, on what the mock received (GET /admin/<provider>/received).
"""

import json
import os
import unittest
import urllib.request

import openai
from pydantic import BaseModel

GATEWAY_URL = os.environ["GATEWAY_URL"]
GATEWAY_KEY = os.environ["GATEWAY_KEY"]
MOCK_URL = os.environ["MOCK_URL"]


class City(BaseModel):
    city: str
    population: int


def received(provider):
    """The requests the mock provider `provider` received, oldest first."""
    with urllib.request.urlopen(f"{MOCK_URL}/admin/{provider}/received", timeout=10) as res:
        return json.load(res)["received"]


def forget(provider):
    req = urllib.request.Request(f"{MOCK_URL}/admin/{provider}/received", method="DELETE")
    urllib.request.urlopen(req, timeout=10).close()


class ResponsesApi(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.client = openai.OpenAI(api_key=GATEWAY_KEY, base_url=f"{GATEWAY_URL}/v1", max_retries=0, timeout=20)

    def test_create_translated_to_anthropic(self):
        forget("ant")
        r = self.client.responses.create(model="claude", instructions="Be terse.", input="Paris?")
        self.assertEqual(r.status, "completed")
        self.assertEqual(r.output_text, "[ant] echo: Paris?")
        self.assertGreater(r.usage.output_tokens, 0)
        sent = received("ant")[-1]
        self.assertTrue(sent["path"].endswith("/v1/messages"))
        self.assertEqual(sent["body"]["system"], "Be terse.")

    def test_create_translated_to_chat_completions(self):
        forget("vllm")
        r = self.client.responses.create(model="compat", input="Oslo?")
        self.assertEqual(r.output_text, "[vllm] echo: Oslo?")
        self.assertTrue(received("vllm")[-1]["path"].endswith("/v1/chat/completions"))

    def test_create_passed_through_to_openai(self):
        forget("oai")
        r = self.client.responses.create(model="gpt", input="Bern?", extra_body={"future_field": 1})
        self.assertEqual(r.output_text, "[oai] echo: Bern?")
        self.assertTrue(r.id.startswith("resp_mock_oai_"), r.id)
        sent = received("oai")[-1]
        self.assertTrue(sent["path"].endswith("/v1/responses"))
        self.assertEqual(sent["body"]["future_field"], 1)

    def test_parse_with_a_pydantic_model(self):
        for model in ("claude", "compat", "gpt"):
            r = self.client.responses.parse(model=model, input="Paris?", text_format=City)
            self.assertEqual(r.output_parsed, City(city="mock", population=1), model)

    def test_stream_events_end_completed(self):
        for model, provider in (("claude", "ant"), ("gpt", "oai")):
            types, text = [], ""
            with self.client.responses.stream(model=model, input="Rome?") as stream:
                for ev in stream:
                    types.append(ev.type)
                    if ev.type == "response.output_text.delta":
                        text += ev.delta
                final = stream.get_final_response()
            self.assertEqual(types[0], "response.created")
            self.assertEqual(types[-1], "response.completed")
            self.assertEqual(text, f"[{provider}] echo: Rome?")
            self.assertEqual(final.output_text, text)

    def test_a_streamed_answer_is_the_providers_and_chains(self):
        with self.client.responses.stream(model="gpt", input="Riga?") as stream:
            created = [ev.response.id for ev in stream if ev.type == "response.created"]
            final = stream.get_final_response()
        self.assertTrue(final.id.startswith("resp_mock_oai_"), final.id)
        self.assertEqual(created, [final.id])
        raw = self.client.responses.with_raw_response.create(
            model="stateful", input="and Vilnius?", previous_response_id=final.id
        )
        self.assertEqual(raw.headers["x-served-by"], "oai/gpt-mock")
        self.assertEqual(received("oai")[-1]["body"]["previous_response_id"], final.id)

    def test_failover_on_529(self):
        raw = self.client.responses.with_raw_response.create(model="failover", input="Lima?")
        self.assertEqual(raw.headers["x-served-by"], "oai/gpt-mock")
        self.assertEqual(raw.parse().output_text, "[oai] echo: Lima?")

    def test_a_cut_stream_is_continued(self):
        for model, provider in (("claude-cut", "ant-cut"), ("gpt-cut", "oai-cut")):
            text = ""
            with self.client.responses.stream(model=model, input="Quito?") as stream:
                for ev in stream:
                    if ev.type == "response.output_text.delta":
                        text += ev.delta
                final = stream.get_final_response()
            self.assertEqual(final.status, "completed")
            self.assertEqual(text, f"[{provider}] echo: Quito?")
            self.assertEqual(final.output_text, text, model)

    def test_a_cut_stream_not_continued_raises_never_completes(self):
        types = []
        with self.assertRaises(openai.APIError):
            with self.client.responses.stream(model="claude-dead", input="Bogota?") as stream:
                for ev in stream:
                    types.append(ev.type)
        self.assertIn("response.output_text.delta", types)
        self.assertNotIn("response.completed", types)
        self.assertEqual(types[-1], "response.failed")


if __name__ == "__main__":
    unittest.main()

"""The endpoints besides chat, with the official Python SDKs.

tests/e2e/endpoints.test.mjs starts the mock provider and the built Worker (routes `embed`:
emb-a, always overloaded, then emb-b, one embedding family; `claude`: oai, which counts no
tokens, ant-a, always overloaded, then ant-b; `gpt`: oai) and runs this module with
GATEWAY_URL, GATEWAY_KEY and MOCK_URL in the environment.
"""

import json
import os
import unittest
import urllib.request

import anthropic
import openai

GATEWAY_URL = os.environ["GATEWAY_URL"]
GATEWAY_KEY = os.environ["GATEWAY_KEY"]
MOCK_URL = os.environ["MOCK_URL"]


def received(provider):
    """The requests the mock provider `provider` received, oldest first."""
    with urllib.request.urlopen(f"{MOCK_URL}/admin/{provider}/received", timeout=10) as res:
        return json.load(res)["received"]


def oai():
    return openai.OpenAI(api_key=GATEWAY_KEY, base_url=f"{GATEWAY_URL}/v1", max_retries=0, timeout=20)


def ant():
    return anthropic.Anthropic(api_key=GATEWAY_KEY, base_url=GATEWAY_URL, max_retries=0, timeout=20)


class Embeddings(unittest.TestCase):
    def test_create_fails_over_on_529_within_the_family(self):
        raw = oai().embeddings.with_raw_response.create(model="embed", input=["one two", "three"], dimensions=6)
        self.assertEqual(raw.headers["x-served-by"], "emb-b/small-b")
        res = raw.parse()
        self.assertEqual([len(d.embedding) for d in res.data], [6, 6])
        self.assertEqual((res.usage.prompt_tokens, res.usage.total_tokens), (3, 3))
        sent = received("emb-b")[-1]["body"]
        self.assertEqual(sent["model"], "small-b")
        self.assertEqual(sent["dimensions"], 6)

    def test_base64_is_passed_through(self):
        res = oai().embeddings.create(model="embed", input="one", encoding_format="base64")
        self.assertIsInstance(res.data[0].embedding, str)
        self.assertEqual(received("emb-b")[-1]["body"]["encoding_format"], "base64")

    def test_a_chat_route_is_refused(self):
        with self.assertRaises(openai.BadRequestError) as e:
            oai().embeddings.create(model="gpt", input="a")
        self.assertIn("not an embeddings route", str(e.exception))


class CountTokens(unittest.TestCase):
    def test_count_tokens_fails_over_to_a_provider_that_counts(self):
        raw = ant().messages.with_raw_response.count_tokens(
            model="claude", messages=[{"role": "user", "content": [{"type": "text", "text": "a b c d"}]}]
        )
        self.assertEqual(raw.headers["x-served-by"], "ant-b/claude-b")
        self.assertEqual(raw.parse().input_tokens, 4)
        self.assertEqual(received("ant-b")[-1]["body"]["model"], "claude-b")


class Models(unittest.TestCase):
    def test_openai_list_and_retrieve(self):
        self.assertEqual([m.id for m in oai().models.list()], ["claude", "embed", "gpt"])
        self.assertEqual(oai().models.retrieve("gpt").object, "model")
        with self.assertRaises(openai.NotFoundError):
            oai().models.retrieve("nope")

    def test_anthropic_list_and_retrieve(self):
        models = list(ant().models.list())
        self.assertEqual([m.id for m in models], ["claude", "embed", "gpt"])
        self.assertTrue(all(m.type == "model" for m in models))
        self.assertEqual(ant().models.retrieve("embed").display_name, "embed")


if __name__ == "__main__":
    unittest.main()

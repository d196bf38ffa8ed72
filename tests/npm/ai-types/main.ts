// The AI SDK provider's model is a model to the `ai` package's own types (generateText and
// streamText accept it), with the package's declarations as pkg/ has them.
import { generateText, streamText, type LanguageModel } from "ai";
import { ResilientClient } from "resilient-llm";
import { createResilient } from "resilient-llm/ai-sdk";

const client = new ResilientClient({}, { providers: [{ name: "p", chat: async () => ({ text: "x" }) }] });
const model: LanguageModel = createResilient({ client })("default");

export async function both(): Promise<string> {
  const whole = await generateText({ model, prompt: "hi" });
  const streamed = streamText({ model: createResilient({ client, name: "mine" }).languageModel("fast"), prompt: "hi" });
  return whole.text + (await streamed.text);
}

// Answers of a set quality, for the tests of quality escalation (a route's validators judging
// answers and escalating the rejected ones). A mock provider with the setting
//   "quality": "invalid-json"   answers prose wrapped around an object that is not JSON, the way
//                               a cheap model ignores a format it was asked for;
//   "quality": "json"           answers {"answer": <its usual echo>, "model": <the model asked>}
//                               as JSON text;
//   "quality": "json-no-answer" answers {"text": <its usual echo>, "model": <the model asked>}:
//                               JSON, but not the shape a schema asking for `answer` wants;
// and without it answers as usual. Tool calls are left as they are. Its hook in
// mock-provider.mjs: the setting's check (qualityProblem) and the answer's plan (qualityPlan).

export const QUALITIES = ["invalid-json", "json", "json-no-answer"];

/** Why `value` is no `quality` setting, or null. */
export function qualityProblem(value) {
  return value === undefined || QUALITIES.includes(value) ? null : `one of ${QUALITIES.map((q) => `"${q}"`).join(", ")}`;
}

/** `plan` (mock-answers.mjs planAnswer's) with the text the provider's quality gives. */
export function qualityPlan(provider, ctx, plan) {
  const quality = provider.settings.quality;
  if (!quality || plan.tools.length) return plan;
  const echo = plan.text ?? "";
  const text = quality === "json"
    ? JSON.stringify({ answer: echo, model: ctx.model })
    : quality === "json-no-answer"
      ? JSON.stringify({ text: echo, model: ctx.model })
      : `Sure! Here is the JSON you asked for: {answer: ${echo}}`;
  // Six characters a chunk, as the mock streams any text; each chunk one token.
  const chunks = text.match(/[\s\S]{1,6}/g) ?? [""];
  return { ...plan, text, chunks, outputTokens: chunks.length, truncated: false, finish: "stop" };
}

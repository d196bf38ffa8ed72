// The built package under test: $RESILIENT_LLM_PKG (scripts/test-npm.sh sets it to pkg/), through
// its Node ES module entry.
import path from "node:path";
import { pathToFileURL } from "node:url";

const dir = process.env.RESILIENT_LLM_PKG;
if (!dir) throw new Error("set RESILIENT_LLM_PKG to the package built by scripts/build-npm.sh");
export const pkgDir = path.resolve(dir);
export default await import(pathToFileURL(path.join(pkgDir, "node.mjs")).href);

/** A scripted JS provider: each call takes the next step (the last repeats). */
export function scripted(name, steps) {
  const p = {
    name,
    calls: 0,
    aborted: 0,
    chat(request, signal) {
      const step = steps[Math.min(p.calls, steps.length - 1)];
      p.calls++;
      if (step === "hang") {
        return new Promise((_, reject) => {
          signal.addEventListener("abort", () => {
            p.aborted++;
            reject(signal.reason);
          });
        });
      }
      if (typeof step === "string") return Promise.resolve({ text: step, model: request.model });
      if (step instanceof Error) return Promise.reject(step);
      return Promise.reject(Object.assign(new Error(step.message ?? "failed"), step));
    },
  };
  return p;
}

export const user = (content) => ({ messages: [{ role: "user", content }] });

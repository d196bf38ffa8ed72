// Serves the fresh project on 127.0.0.1 (a free port) and opens page.html in headless Chromium
// through chromedriver's WebDriver API; fails unless the page reports "ok". Bounded in time.
//
//   node browser.mjs APP_DIR   (CHROMEDRIVER, CHROME: the binaries; Debian's by default)
import { spawn } from "node:child_process";
import { readFile } from "node:fs/promises";
import http from "node:http";
import net from "node:net";
import path from "node:path";

const app = path.resolve(process.argv[2] ?? ".");
const CHROMEDRIVER = process.env.CHROMEDRIVER || "/usr/bin/chromedriver";
const CHROME = process.env.CHROME || "/usr/bin/chromium";
const TYPES = { ".html": "text/html", ".mjs": "text/javascript", ".js": "text/javascript", ".wasm": "application/wasm", ".json": "application/json" };

const server = http.createServer(async (req, res) => {
  const url = new URL(req.url, "http://127.0.0.1");
  const file = path.join(app, path.normalize(decodeURIComponent(url.pathname)));
  if (!file.startsWith(app)) return res.writeHead(403).end();
  try {
    const body = await readFile(file);
    res.writeHead(200, { "content-type": TYPES[path.extname(file)] ?? "application/octet-stream" }).end(body);
  } catch {
    res.writeHead(404).end();
  }
});
await new Promise((resolve) => server.listen(0, "127.0.0.1", resolve));
const site = `http://127.0.0.1:${server.address().port}`;

const free = await new Promise((resolve) => {
  const s = net.createServer().listen(0, "127.0.0.1", () => {
    const { port } = s.address();
    s.close(() => resolve(port));
  });
});
const driver = spawn(CHROMEDRIVER, [`--port=${free}`], { stdio: ["ignore", "ignore", "inherit"] });
const wd = `http://127.0.0.1:${free}`;
const call = async (method, route, body) => {
  const r = await fetch(`${wd}${route}`, { method, headers: { "content-type": "application/json" }, body: body && JSON.stringify(body) });
  const json = await r.json();
  if (!r.ok) throw new Error(`${method} ${route}: ${JSON.stringify(json.value)}`);
  return json.value;
};

let session;
let failed = false;
try {
  for (let i = 0; i < 100; i++) {
    try {
      if ((await call("GET", "/status")).ready) break;
    } catch {
      // not listening yet
    }
    await new Promise((r) => setTimeout(r, 100));
  }
  session = (
    await call("POST", "/session", {
      capabilities: {
        alwaysMatch: {
          browserName: "chrome",
          "goog:chromeOptions": { binary: CHROME, args: ["--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage"] },
        },
      },
    })
  ).sessionId;
  await call("POST", `/session/${session}/url`, { url: `${site}/page.html` });
  let result;
  for (let i = 0; i < 150 && result === undefined; i++) {
    result = (await call("POST", `/session/${session}/execute/sync`, { script: "return window.__result;", args: [] })) ?? undefined;
    if (result === undefined) await new Promise((r) => setTimeout(r, 100));
  }
  if (result !== "ok") {
    failed = true;
    console.error(`page.html: ${result ?? "no result within 15 s"}`);
  } else {
    console.log("packed browser page (headless Chromium): ok");
  }
} finally {
  if (session) await call("DELETE", `/session/${session}`).catch(() => {});
  driver.kill();
  server.close();
}
process.exit(failed ? 1 : 0);

#!/usr/bin/env bash
# Counts the non-test lines of src/ (every .rs file), the figure issue 10 sets a ceiling on.
# Test code is left out: every item gated by a plain `#[cfg(test)]` (a `mod tests { … }` block
# from the attribute to its closing brace, found by counting braces outside strings, chars and
# comments; any other gated item the same way), every file such a `#[cfg(test)] mod x;` or a
# `#![cfg(test)]` gates. `#[cfg(any(test, feature = "testing"))]` code ships with the feature
# and is counted. The figure counts every non-test line, blank and comment lines included (of
# the definitions that leave out the gated items and files, the one nearest issue 10's "about
# 18,600" for b05001d); the split into code, comment-only (`//`, `///`, `//!`, `/* */`) and
# blank lines is printed beside it.
#   scripts/loc.sh [--files] [SRC_DIR]     (default src; --files: a line per file too)
set -euo pipefail
cd "$(dirname "$0")/.."
exec node --input-type=module - "$@" <<'EOF'
import { readdirSync, readFileSync, statSync } from "node:fs";
import path from "node:path";

const args = process.argv.slice(2);
const perFile = args.includes("--files");
const src = args.find((a) => a !== "--files") ?? "src";

function rustFiles(dir) {
  return readdirSync(dir).sort().flatMap((name) => {
    const p = path.join(dir, name);
    return statSync(p).isDirectory() ? rustFiles(p) : p.endsWith(".rs") ? [p] : [];
  });
}

/**
 * Scans Rust source: per line, whether it has code and whether it has a comment; and the
 * code-level tokens (identifiers, punctuation) with their line, strings and comments skipped.
 */
function scan(text) {
  const lines = text.split("\n").map(() => ({ code: false, comment: false }));
  const tokens = [];
  let line = 0;
  let i = 0;
  const n = text.length;
  const mark = (kind) => { lines[line][kind] = true; };
  const advance = (to, kind) => {
    for (; i < to && i < n; i++) {
      if (text[i] === "\n") line++;
      else if (kind && !/\s/.test(text[i])) mark(kind);
    }
  };
  while (i < n) {
    const c = text[i];
    const next = text[i + 1];
    if (c === "\n") { line++; i++; continue; }
    if (/\s/.test(c)) { i++; continue; }
    if (c === "/" && next === "/") {
      const end = text.indexOf("\n", i);
      advance(end < 0 ? n : end, "comment");
      continue;
    }
    if (c === "/" && next === "*") {
      let depth = 0;
      let j = i;
      while (j < n) {
        if (text[j] === "/" && text[j + 1] === "*") { depth++; j += 2; }
        else if (text[j] === "*" && text[j + 1] === "/") { depth--; j += 2; if (depth === 0) break; }
        else j++;
      }
      advance(j, "comment");
      continue;
    }
    // Raw strings: r"…", r#"…"#, br#"…"#.
    const raw = /^b?r(#*)"/.exec(text.slice(i, i + 12));
    if (raw && !/[A-Za-z0-9_]/.test(text[i - 1] ?? "")) {
      const close = `"${raw[1]}`;
      const end = text.indexOf(close, i + raw[0].length);
      advance(end < 0 ? n : end + close.length, "code");
      tokens.push({ t: "str", line });
      continue;
    }
    if (c === '"' || (c === "b" && next === '"' && !/[A-Za-z0-9_]/.test(text[i - 1] ?? ""))) {
      let j = i + (c === "b" ? 2 : 1);
      while (j < n && text[j] !== '"') j += text[j] === "\\" ? 2 : 1;
      advance(j + 1, "code");
      tokens.push({ t: "str", line });
      continue;
    }
    if (c === "'") {
      // A char literal ('x', '\n', '\u{1F600}', '{'), else a lifetime or label ('a).
      let end = -1;
      if (next === "\\") {
        end = text.indexOf("'", i + 2 + (text[i + 2] === "'" ? 1 : 0));
      } else {
        const cp = text.codePointAt(i + 1);
        const w = cp > 0xffff ? 2 : 1;
        if (text[i + 1 + w] === "'") end = i + 1 + w;
      }
      if (end > 0) {
        advance(end + 1, "code");
        tokens.push({ t: "char", line });
        continue;
      }
    }
    const word = /^[A-Za-z_][A-Za-z0-9_]*/.exec(text.slice(i, i + 64));
    if (word) {
      tokens.push({ t: word[0], line });
      advance(i + word[0].length, "code");
      continue;
    }
    tokens.push({ t: c, line });
    advance(i + 1, "code");
  }
  return { lines, tokens };
}

/**
 * The line ranges of `#[cfg(test)]` / `#![cfg(test)]`-gated items, and the names of the
 * modules declared gated without a body (`#[cfg(test)] mod x;`).
 */
function testRanges(tokens) {
  const ranges = [];
  const gatedMods = [];
  let wholeFile = false;
  const is = (k, ...want) => want.every((w, d) => tokens[k + d]?.t === w);
  for (let k = 0; k < tokens.length; k++) {
    const inner = is(k, "#", "!", "[", "cfg", "(", "test", ")", "]");
    const outer = is(k, "#", "[", "cfg", "(", "test", ")", "]");
    if (inner) { wholeFile = true; continue; }
    if (!outer) continue;
    const start = tokens[k].line;
    let j = k + 7;
    // Further attributes on the same item.
    while (is(j, "#", "[")) {
      let depth = 0;
      for (j += 1; j < tokens.length; j++) {
        if (tokens[j].t === "[") depth++;
        else if (tokens[j].t === "]" && --depth === 0) { j++; break; }
      }
    }
    // The item: up to its first `;` at depth 0 or its first `{ … }` block.
    let depth = 0;
    let end = j;
    let body = false;
    let modName = null;
    for (let m = j; m < tokens.length; m++) {
      const t = tokens[m].t;
      if (t === "mod" && depth === 0 && !body) modName = tokens[m + 1]?.t ?? null;
      if (t === "(" || t === "[") depth++;
      else if (t === ")" || t === "]") depth--;
      else if (t === ";" && depth === 0) { end = m; break; }
      else if (t === "{" && depth === 0) {
        let braces = 0;
        for (; m < tokens.length; m++) {
          if (tokens[m].t === "{") braces++;
          else if (tokens[m].t === "}" && --braces === 0) break;
        }
        end = m;
        body = true;
        break;
      }
    }
    if (modName && !body) gatedMods.push(modName);
    ranges.push([start, tokens[Math.min(end, tokens.length - 1)].line]);
    k = end;
  }
  return { ranges, gatedMods, wholeFile };
}

const files = rustFiles(src);
const scans = new Map(files.map((f) => {
  const s = scan(readFileSync(f, "utf8"));
  return [f, { ...s, ...testRanges(s.tokens) }];
}));
// Files gated by their parent's `#[cfg(test)] mod x;`.
const gatedFiles = new Set();
for (const [f, s] of scans) {
  const base = path.basename(f);
  const dir = ["mod.rs", "lib.rs", "main.rs"].includes(base) ? path.dirname(f) : f.slice(0, -3);
  for (const name of s.gatedMods) {
    for (const p of [path.join(dir, `${name}.rs`), path.join(dir, name, "mod.rs")]) if (scans.has(p)) gatedFiles.add(p);
  }
  if (s.wholeFile) gatedFiles.add(f);
}
// Everything under a gated module's directory is gated too.
for (const f of files) {
  for (const g of [...gatedFiles]) {
    const dir = g.endsWith("mod.rs") ? path.dirname(g) : g.slice(0, -3);
    if (f.startsWith(`${dir}/`)) gatedFiles.add(f);
  }
}

const total = { lines: 0, test: 0, code: 0, comment: 0, blank: 0 };
const rows = [];
for (const [f, s] of scans) {
  // The split leaves an empty last element after a final newline.
  const count = s.lines.length - (s.lines.length && readFileSync(f, "utf8").endsWith("\n") ? 1 : 0);
  const inTest = new Array(count).fill(gatedFiles.has(f));
  for (const [a, b] of s.ranges) for (let l = a; l <= b && l < count; l++) inTest[l] = true;
  const row = { file: f, lines: count, test: 0, code: 0, comment: 0, blank: 0 };
  for (let l = 0; l < count; l++) {
    if (inTest[l]) row.test++;
    else if (s.lines[l].code) row.code++;
    else if (s.lines[l].comment) row.comment++;
    else row.blank++;
  }
  rows.push(row);
  for (const k of Object.keys(total)) total[k] += row[k];
}
const fmt = (x) => String(x).padStart(7);
if (perFile) {
  console.log("non-test    code comment   blank    test  file");
  for (const r of rows) console.log(`${fmt(r.code + r.comment + r.blank)} ${fmt(r.code)} ${fmt(r.comment)} ${fmt(r.blank)} ${fmt(r.test)}  ${r.file}`);
  console.log("");
}
console.log(`${src}: ${files.length} .rs files, ${total.lines} lines`);
console.log(`  test (#[cfg(test)] items and files): ${total.test}`);
console.log(`  non-test: ${total.code + total.comment + total.blank} = code ${total.code} + comment-only ${total.comment} + blank ${total.blank}`);
console.log(`non-test lines: ${total.code + total.comment + total.blank}`);
EOF

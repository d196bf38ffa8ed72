"""Draws one trace as a waterfall (SVG): the spans an OTLP receiver decoded, as
tests/e2e/python/otlp_receiver.py answers them on GET /spans (a JSON list).

    python3 scripts/trace-picture.py SPANS.json OUT.svg [--title TEXT]

One row per span, parents first, each under its parent: the bar spans its start
to its end on a common time axis, red when its status is an error; its events
are marked on it and named below it. Beside each bar: its name, duration and
the attributes that tell a failover's story.
"""

import argparse
import json
import sys
from xml.sax.saxutils import escape

KINDS = {1: "internal", 2: "server", 3: "client"}
SHOWN = [
    "gen_ai.provider.name",
    "gen_ai.request.model",
    "gen_ai.response.model",
    "server.address",
    "resilient_llm.attempt",
    "resilient_llm.breaker.state",
    "error.type",
    "resilient_llm.outcome",
    "http.response.status_code",
    "gen_ai.usage.output_tokens",
]
ROW = 84
LEFT = 360
WIDTH = 1100
BAR = 18


def short(key):
    """An attribute's key without its namespace (`gen_ai.`, `resilient_llm.`)."""
    for prefix in ("gen_ai.", "resilient_llm.", "http."):
        if key.startswith(prefix):
            return key[len(prefix):]
    return key


def ordered(spans):
    """Parents before children, children by start time."""
    ids = {s["spanId"] for s in spans}
    children = {}
    for s in spans:
        parent = s["parentSpanId"] if s["parentSpanId"] in ids else None
        children.setdefault(parent, []).append(s)
    out = []

    def walk(parent, depth):
        for s in sorted(children.get(parent, []), key=lambda x: x["startNs"]):
            out.append((s, depth))
            walk(s["spanId"], depth + 1)

    walk(None, 0)
    return out


def picture(spans, title):
    rows = ordered(spans)
    if not rows:
        sys.exit("trace-picture: no spans")
    t0 = min(s["startNs"] for s, _ in rows)
    t1 = max(s["endNs"] for s, _ in rows)
    total = max(t1 - t0, 1)
    span_w = WIDTH - LEFT - 40

    def x(ns):
        return LEFT + (ns - t0) / total * span_w

    height = 90 + ROW * len(rows) + 40
    out = [
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{WIDTH}" height="{height}" '
        f'font-family="sans-serif" font-size="12">',
        f'<rect width="{WIDTH}" height="{height}" fill="white"/>',
        f'<text x="16" y="24" font-size="15" font-weight="bold">{escape(title)}</text>',
        f'<text x="16" y="44" fill="#555">trace {escape(rows[0][0]["traceId"])} · '
        f'{len(rows)} spans · {total / 1e6:.1f} ms</text>',
    ]
    # The time axis: five ticks.
    for i in range(6):
        ns = t0 + total * i / 5
        tx = x(ns)
        out.append(f'<line x1="{tx:.1f}" y1="60" x2="{tx:.1f}" y2="{height - 30}" stroke="#eee"/>')
        out.append(f'<text x="{tx:.1f}" y="{height - 14}" text-anchor="middle" fill="#777">'
                   f'{(ns - t0) / 1e6:.1f} ms</text>')
    for i, (s, depth) in enumerate(rows):
        y = 70 + ROW * i
        failed = s["status"]["code"] == 2
        colour = "#d9534f" if failed else ("#4a7bd0" if s["kind"] == 2 else "#5cb85c")
        kind = KINDS.get(s["kind"], "span")
        dur = (s["endNs"] - s["startNs"]) / 1e6
        out.append(f'<text x="{16 + 14 * depth}" y="{y + 13}" font-weight="bold">'
                   f'{escape(s["name"])}</text>')
        attrs = s["attributes"]
        facts = [f"{short(k)}={attrs[k]}" for k in SHOWN if k in attrs]
        line = f"{kind} · {dur:.1f} ms"
        out.append(f'<text x="{16 + 14 * depth}" y="{y + 28}" fill="#555">{escape(line)}</text>')
        for j in range(0, len(facts), 2):
            text = ", ".join(facts[j:j + 2])
            out.append(f'<text x="{16 + 14 * depth}" y="{y + 42 + 12 * (j // 2)}" fill="#777" '
                       f'font-size="10">{escape(text)}</text>')
        bx, bw = x(s["startNs"]), max(x(s["endNs"]) - x(s["startNs"]), 2)
        out.append(f'<rect x="{bx:.1f}" y="{y}" width="{bw:.1f}" height="{BAR}" rx="3" '
                   f'fill="{colour}"/>')
        if failed and s["status"]["message"]:
            out.append(f'<text x="{bx + bw + 6:.1f}" y="{y + 13}" fill="#a33">'
                       f'{escape(s["status"]["message"])}</text>')
        for k, e in enumerate(s["events"]):
            ex = x(e["timeNs"])
            out.append(f'<path d="M{ex:.1f} {y - 3} l5 6 l-5 6 l-5 -6 z" fill="#222"/>')
            details = ", ".join(f"{short(a)}={v}" for a, v in e["attributes"].items())
            label = e["name"] + (f" ({details})" if details else "")
            anchor = "end" if ex > LEFT + span_w / 2 else "start"
            out.append(f'<text x="{ex:.1f}" y="{y + BAR + 13 + 12 * k}" font-size="10" '
                       f'text-anchor="{anchor}" fill="#222">{escape(label)}</text>')
    out.append("</svg>")
    return "\n".join(out) + "\n"


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("spans")
    ap.add_argument("out")
    ap.add_argument("--title", default="A failed-over streamed request, as exported over OTLP")
    args = ap.parse_args()
    with open(args.spans) as f:
        spans = json.load(f)
    with open(args.out, "w") as f:
        f.write(picture(spans, args.title))


if __name__ == "__main__":
    main()

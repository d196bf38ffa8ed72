"""A local OTLP/HTTP trace receiver for the end-to-end suite.

It decodes each export with the official OpenTelemetry protobuf definitions
(the `opentelemetry-proto` package) and keeps the spans; GET /spans answers
them as JSON (ids in lowercase hex, attribute values as Python values).
Listens on 127.0.0.1 at a free port, printed as `PORT <n>` on its first line.
"""

import json
import sys
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from google.protobuf.message import DecodeError
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
    ExportTraceServiceRequest,
    ExportTraceServiceResponse,
)

SPANS = []
MAX_SPANS = 10_000


def value(v):
    kind = v.WhichOneof("value")
    if kind == "array_value":
        return [value(x) for x in v.array_value.values]
    if kind == "kvlist_value":
        return {kv.key: value(kv.value) for kv in v.kvlist_value.values}
    return getattr(v, kind) if kind else None


def attributes(kvs):
    return {kv.key: value(kv.value) for kv in kvs}


def span_json(span, resource, scope):
    return {
        "service": resource.get("service.name"),
        "scope": scope,
        "traceId": span.trace_id.hex(),
        "spanId": span.span_id.hex(),
        "parentSpanId": span.parent_span_id.hex(),
        "name": span.name,
        "kind": span.kind,
        "startNs": span.start_time_unix_nano,
        "endNs": span.end_time_unix_nano,
        "attributes": attributes(span.attributes),
        "events": [
            {"name": e.name, "timeNs": e.time_unix_nano, "attributes": attributes(e.attributes)}
            for e in span.events
        ],
        "status": {"code": span.status.code, "message": span.status.message},
    }


class Handler(BaseHTTPRequestHandler):
    def log_message(self, *args):
        pass

    def answer(self, status, body, content_type):
        self.send_response(status)
        self.send_header("content-type", content_type)
        self.send_header("content-length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def do_POST(self):
        length = min(int(self.headers.get("content-length") or 0), 16 << 20)
        body = self.rfile.read(length)
        if self.path != "/v1/traces" or self.headers.get("content-type") != "application/x-protobuf":
            return self.answer(415, b"want POST /v1/traces as application/x-protobuf", "text/plain")
        req = ExportTraceServiceRequest()
        try:
            req.ParseFromString(body)
        except DecodeError as e:
            return self.answer(400, str(e).encode(), "text/plain")
        for rs in req.resource_spans:
            resource = attributes(rs.resource.attributes)
            for ss in rs.scope_spans:
                for span in ss.spans:
                    if len(SPANS) < MAX_SPANS:
                        SPANS.append(span_json(span, resource, ss.scope.name))
        self.answer(200, ExportTraceServiceResponse().SerializeToString(), "application/x-protobuf")

    def do_GET(self):
        if self.path == "/spans":
            return self.answer(200, json.dumps(SPANS).encode(), "application/json")
        self.answer(404, b"", "text/plain")

    def do_DELETE(self):
        SPANS.clear()
        self.answer(204, b"", "text/plain")


def main():
    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    print(f"PORT {server.server_address[1]}", flush=True)
    server.serve_forever()


if __name__ == "__main__":
    sys.exit(main())

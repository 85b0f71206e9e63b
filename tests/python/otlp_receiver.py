"""A small OTLP/HTTP traces receiver for the gateway's telemetry tests.

It decodes each `POST /v1/traces` body with the official schema package
(`opentelemetry-proto`'s `ExportTraceServiceRequest`), so what the gateway
exports is read as any collector reads it, and serves the spans it got as
JSON at `GET /spans`. It prints its port on the first line of stdout.
"""

import json
import sys
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from google.protobuf.json_format import MessageToDict
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
    ExportTraceServiceRequest,
    ExportTraceServiceResponse,
)

SPANS = []
ERRORS = []
LOCK = threading.Lock()


def value(v):
    kind = v.WhichOneof("value")
    if kind == "array_value":
        return [value(x) for x in v.array_value.values]
    if kind == "kvlist_value":
        return {kv.key: value(kv.value) for kv in v.kvlist_value.values}
    if kind == "bytes_value":
        return v.bytes_value.hex()
    return getattr(v, kind) if kind else None


def decode(body):
    req = ExportTraceServiceRequest()
    req.ParseFromString(body)
    out = []
    for rs in req.resource_spans:
        resource = {a.key: value(a.value) for a in rs.resource.attributes}
        for ss in rs.scope_spans:
            for s in ss.spans:
                out.append(
                    {
                        "resource": resource,
                        "scope": ss.scope.name,
                        "trace_id": s.trace_id.hex(),
                        "span_id": s.span_id.hex(),
                        "parent_span_id": s.parent_span_id.hex(),
                        "trace_state": s.trace_state,
                        "name": s.name,
                        # The enum's own names (SPAN_KIND_SERVER, STATUS_CODE_ERROR).
                        "kind": MessageToDict(s)["kind"] if s.kind else "SPAN_KIND_UNSPECIFIED",
                        "start": s.start_time_unix_nano,
                        "end": s.end_time_unix_nano,
                        "attributes": {a.key: value(a.value) for a in s.attributes},
                        "status": {
                            "code": s.status.DESCRIPTOR.fields_by_name["code"]
                            .enum_type.values_by_number[s.status.code]
                            .name,
                            "message": s.status.message,
                        },
                        "links": [
                            {"trace_id": l.trace_id.hex(), "span_id": l.span_id.hex()}
                            for l in s.links
                        ],
                    }
                )
    return out


class Handler(BaseHTTPRequestHandler):
    def log_message(self, *args):
        pass

    def reply(self, status, ctype, body):
        self.send_response(status)
        self.send_header("content-type", ctype)
        self.send_header("content-length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def do_POST(self):
        body = self.rfile.read(int(self.headers.get("content-length", "0")))
        ctype = self.headers.get("content-type", "")
        if self.path != "/v1/traces" or ctype != "application/x-protobuf":
            with LOCK:
                ERRORS.append(f"POST {self.path} content-type {ctype!r}")
            return self.reply(400, "text/plain", b"not an OTLP/HTTP protobuf export")
        try:
            spans = decode(body)
        except Exception as e:  # a body the schema does not read is the test's failure
            with LOCK:
                ERRORS.append(f"undecodable export: {e}")
            return self.reply(400, "text/plain", b"undecodable")
        with LOCK:
            SPANS.extend(spans)
        self.reply(200, "application/x-protobuf", ExportTraceServiceResponse().SerializeToString())

    def do_GET(self):
        with LOCK:
            doc = {"spans": SPANS, "errors": ERRORS, "token": TOKENS}
        self.reply(200, "application/json", json.dumps(doc).encode())


TOKENS = []


class TokenHandler(Handler):
    def do_POST(self):
        # The collector token, as the gateway sent it (headers_env).
        with LOCK:
            TOKENS.append(self.headers.get("x-collector-token"))
        super().do_POST()


def main():
    server = ThreadingHTTPServer(("127.0.0.1", 0), TokenHandler)
    print(server.server_address[1], flush=True)
    server.serve_forever()


if __name__ == "__main__":
    sys.exit(main())

"""A small OTLP/HTTP receiver for the example's test: it accepts POST /v1/traces
(protobuf, as swift-otel sends it), decodes each ExportTraceServiceRequest with the
opentelemetry-proto package, and writes every span as one JSON line to the file given.

    python3 otlp_receiver.py PORT SPANS_FILE
"""
import gzip
import json
import sys
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
    ExportTraceServiceRequest,
    ExportTraceServiceResponse,
)

PORT = int(sys.argv[1])
SPANS = sys.argv[2]


def value(any_value):
    kind = any_value.WhichOneof("value")
    return getattr(any_value, kind) if kind else None


class Receiver(BaseHTTPRequestHandler):
    def do_POST(self):
        body = self.rfile.read(int(self.headers.get("Content-Length", "0")))
        if self.headers.get("Content-Encoding") == "gzip":
            body = gzip.decompress(body)
        if self.path != "/v1/traces":
            self.send_response(404)
            self.end_headers()
            return
        request = ExportTraceServiceRequest()
        request.ParseFromString(body)
        with open(SPANS, "a", encoding="utf-8") as out:
            for resource_spans in request.resource_spans:
                resource = {a.key: value(a.value) for a in resource_spans.resource.attributes}
                for scope_spans in resource_spans.scope_spans:
                    for span in scope_spans.spans:
                        out.write(json.dumps({
                            "name": span.name,
                            "trace_id": span.trace_id.hex(),
                            "span_id": span.span_id.hex(),
                            "parent_span_id": span.parent_span_id.hex(),
                            "attributes": {a.key: value(a.value) for a in span.attributes},
                            "events": [e.name for e in span.events],
                            "status": span.status.code,
                            "service": resource.get("service.name"),
                        }) + "\n")
        answer = ExportTraceServiceResponse().SerializeToString()
        self.send_response(200)
        self.send_header("Content-Type", "application/x-protobuf")
        self.send_header("Content-Length", str(len(answer)))
        self.end_headers()
        self.wfile.write(answer)

    def log_message(self, *arguments):
        pass


if __name__ == "__main__":
    server = ThreadingHTTPServer(("127.0.0.1", PORT), Receiver)
    print("listening", flush=True)
    server.serve_forever()

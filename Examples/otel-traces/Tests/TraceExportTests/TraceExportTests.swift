import Foundation
import Testing

#if canImport(Glibc)
    import Glibc
#endif

/// The built example, run as a user would, exporting to a real OTLP/HTTP receiver.
@Suite("Overtime's spans over OTLP/HTTP: a run with its grant, an upload with its segments", .timeLimit(.minutes(2)))
struct TraceExportTests {
    /// The example beside this test binary in the build folder.
    static let example = URL(fileURLWithPath: "/proc/self/exe").resolvingSymlinksInPath().deletingLastPathComponent()
        .appendingPathComponent("otel-traces")

    struct ExportedSpan: Decodable {
        let name: String
        let trace_id: String
        let span_id: String
        let parent_span_id: String
        let attributes: [String: Attribute]
        let events: [String]
        let status: Int
        let service: String?
    }

    enum Attribute: Decodable, Equatable {
        case string(String), int(Int), bool(Bool), double(Double)

        init(from decoder: any Decoder) throws {
            let container = try decoder.singleValueContainer()
            if let value = try? container.decode(Bool.self) {
                self = .bool(value)
            } else if let value = try? container.decode(Int.self) {
                self = .int(value)
            } else if let value = try? container.decode(Double.self) {
                self = .double(value)
            } else {
                self = .string(try container.decode(String.self))
            }
        }
    }

    static func freePort() throws -> Int {
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        defer { close(fd) }
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        var length = socklen_t(MemoryLayout<sockaddr_in>.size)
        let bound = withUnsafeMutablePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { pointer in
                bind(fd, pointer, length) == 0 && getsockname(fd, pointer, &length) == 0
            }
        }
        guard bound else { throw POSIXError(.EADDRINUSE) }
        return Int(UInt16(bigEndian: address.sin_port))
    }

    @Test func theReceiverGetsTheRunItsGrantAndTheHandlersSpanAndTheUploadsSegments() throws {
        let folder = FileManager.default.temporaryDirectory.appendingPathComponent("otel-\(UUID().uuidString)").path
        try FileManager.default.createDirectory(atPath: folder, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: folder) }
        let spansFile = folder + "/spans.jsonl"
        let port = try Self.freePort()

        let receiver = Process()
        receiver.executableURL = URL(fileURLWithPath: "/usr/bin/env")
        let script = try #require(Bundle.module.path(forResource: "otlp_receiver", ofType: "py"))
        receiver.arguments = ["python3", script, "\(port)", spansFile]
        let receiverOutput = Pipe()
        receiver.standardOutput = receiverOutput
        try receiver.run()
        defer {
            // SIGKILL: a child of a test thread starts with its signals blocked, SIGTERM too.
            kill(receiver.processIdentifier, SIGKILL)
            receiver.waitUntilExit()
        }
        #expect(
            String(decoding: receiverOutput.fileHandleForReading.availableData, as: UTF8.self).hasPrefix("listening"))

        let example = Process()
        example.executableURL = Self.example
        example.arguments = [folder + "/state"]
        var environment = ProcessInfo.processInfo.environment
        environment["OTEL_EXPORTER_OTLP_ENDPOINT"] = "http://127.0.0.1:\(port)"
        environment["OTEL_EXPORTER_OTLP_PROTOCOL"] = "http/protobuf"
        example.environment = environment
        let output = Pipe()
        example.standardOutput = output
        try example.run()
        let printed = String(decoding: output.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
        example.waitUntilExit()
        #expect(example.terminationStatus == 0, "\(printed)")
        #expect(printed.contains("uploaded: 200 lines"))

        let spans = try String(contentsOfFile: spansFile, encoding: .utf8).split(separator: "\n").map {
            try JSONDecoder().decode(ExportedSpan.self, from: Data($0.utf8))
        }
        #expect(spans.allSatisfy { $0.service == "overtime-otel-traces" })
        func children(of parent: ExportedSpan, named name: String) -> [ExportedSpan] {
            spans.filter { $0.name == name && $0.parent_span_id == parent.span_id && $0.trace_id == parent.trace_id }
        }

        // The run: a trace of its own, its grant and the handler's span under it.
        let run = try #require(spans.first { $0.name == "overtime.scheduled_run" })
        #expect(run.parent_span_id.isEmpty)
        #expect(run.attributes["overtime.run.identifier"] == .string("report"))
        #expect(run.attributes["overtime.run.result"] == .string("succeeded"))
        #expect(run.attributes["overtime.run.attempt"] == .int(1))
        #expect(run.attributes["overtime.run.id"] != nil)
        let runGrant = try #require(children(of: run, named: "overtime.grant").first)
        #expect(runGrant.attributes["overtime.grant.name"] == .string("report"))
        #expect(runGrant.attributes["overtime.grant.outcome"] == .string("completed"))
        #expect(runGrant.attributes["overtime.grant.terminated"] == .bool(false))
        let report = try #require(children(of: run, named: "write the report").first)
        #expect(report.attributes["report.lines"] == .int(3))

        // The upload: its grant, one span per segment under it, every line in them.
        let upload = try #require(
            spans.first { $0.name == "overtime.grant" && $0.attributes["overtime.grant.name"] == .string("log-upload") }
        )
        let segments = children(of: upload, named: "overtime.upload_segment")
        #expect(segments.count >= 2, "\(segments.count) segments")
        #expect(segments.allSatisfy { $0.attributes["overtime.upload.sink"] == .string("directory") })
        #expect(segments.allSatisfy { $0.attributes["overtime.upload.result"] == .string("stored") })
        #expect(segments.allSatisfy { $0.attributes["overtime.upload.attempts"] == .int(1) })
        let lines = segments.reduce(0) { total, span in
            if case .int(let count) = span.attributes["overtime.upload.lines"] { return total + count }
            return total
        }
        #expect(lines == 200)
        let stored =
            (FileManager.default.enumerator(atPath: folder + "/state/collected")?.compactMap { $0 as? String }
            ?? []).filter { $0.hasSuffix(".log") }
        #expect(stored.count == segments.count)
    }
}

// What a scrape asked for and what it gets: the pure part of the HTTP endpoint, decided
// from the bytes received so far.

/// What the endpoint does with the bytes a client has sent so far: wait for more, or
/// answer (and then close: every answer carries `Connection: close`).
enum ScrapeRequest: Equatable {
    /// The request's head has not ended yet.
    case incomplete
    /// The answer to send.
    case answer(ScrapeAnswer)

    /// The most bytes a request's head may take.
    static let maximumHeadBytes = 8192

    /// Decides on `received`, everything the client sent so far.
    static func decide(_ received: [UInt8]) -> ScrapeRequest {
        guard let headEnd = endOfHead(received) else {
            return received.count > maximumHeadBytes ? .answer(.tooLarge) : .incomplete
        }
        guard headEnd <= maximumHeadBytes else { return .answer(.tooLarge) }
        let lineEnd = received[..<headEnd].firstIndex(of: UInt8(ascii: "\n")) ?? headEnd
        var line = received[..<lineEnd]
        if line.last == UInt8(ascii: "\r") { line = line.dropLast() }
        let parts = line.split(separator: UInt8(ascii: " "), omittingEmptySubsequences: false)
        guard parts.count == 3, parts[2].starts(with: Array("HTTP/1.".utf8)), parts[1].first == UInt8(ascii: "/")
        else { return .answer(.badRequest) }
        let method = String(decoding: parts[0], as: UTF8.self)
        let target = parts[1]
        let path = String(decoding: target.prefix { $0 != UInt8(ascii: "?") }, as: UTF8.self)
        guard path == "/metrics" else { return .answer(.notFound) }
        switch method {
        case "GET": return .answer(.metrics(withBody: true))
        case "HEAD": return .answer(.metrics(withBody: false))
        default: return .answer(.methodNotAllowed)
        }
    }

    /// The index just past the blank line that ends the head (`\r\n\r\n` or `\n\n`).
    private static func endOfHead(_ bytes: [UInt8]) -> Int? {
        var index = 0
        let newline = UInt8(ascii: "\n")
        while let found = bytes[index...].firstIndex(of: newline) {
            let next = found + 1
            if next < bytes.count, bytes[next] == newline { return next + 1 }
            if next + 1 < bytes.count, bytes[next] == UInt8(ascii: "\r"), bytes[next + 1] == newline {
                return next + 2
            }
            index = next
        }
        return nil
    }
}

/// An answer of the endpoint.
enum ScrapeAnswer: Equatable {
    /// The exposition (`HEAD`: its headers only).
    case metrics(withBody: Bool)
    case badRequest
    case notFound
    case methodNotAllowed
    case tooLarge
    /// More clients at once than the endpoint serves.
    case busy

    /// The error's counter kind (`overtime_metrics_http_errors_total{kind}`); `nil` for a scrape.
    var errorKind: String? {
        switch self {
        case .metrics: nil
        case .badRequest: "bad_request"
        case .notFound: "not_found"
        case .methodNotAllowed: "method_not_allowed"
        case .tooLarge: "too_large"
        case .busy: "too_many_connections"
        }
    }

    /// The bytes to send: status line, headers and body. `exposition` is called for a scrape
    /// only.
    func bytes(exposition: () -> [UInt8]) -> [UInt8] {
        switch self {
        case .metrics(let withBody):
            let body = exposition()
            return Self.response(
                "200 OK", contentType: "text/plain; version=0.0.4; charset=utf-8", body: body, sendBody: withBody)
        case .badRequest:
            return Self.response("400 Bad Request", body: Array("expected GET /metrics HTTP/1.1\n".utf8))
        case .notFound:
            return Self.response("404 Not Found", body: Array("the metrics are at /metrics\n".utf8))
        case .methodNotAllowed:
            return Self.response(
                "405 Method Not Allowed", extra: "Allow: GET, HEAD\r\n", body: Array("only GET and HEAD\n".utf8))
        case .tooLarge:
            return Self.response(
                "431 Request Header Fields Too Large",
                body: Array("a request's head may take \(ScrapeRequest.maximumHeadBytes) bytes\n".utf8))
        case .busy:
            return Self.response(
                "503 Service Unavailable", extra: "Retry-After: 1\r\n",
                body: Array("too many clients at once; try again\n".utf8))
        }
    }

    private static func response(
        _ status: String, contentType: String = "text/plain; charset=utf-8", extra: String = "", body: [UInt8],
        sendBody: Bool = true
    ) -> [UInt8] {
        var bytes = Array(
            "HTTP/1.1 \(status)\r\nContent-Type: \(contentType)\r\nContent-Length: \(body.count)\r\n\(extra)Connection: close\r\n\r\n"
                .utf8)
        if sendBody { bytes += body }
        return bytes
    }
}

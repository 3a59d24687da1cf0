// What the sinks ask a collector over HTTP and what it answers: plain values, so a sink
// decides what a request means and the transfer only carries it.

/// One HTTP request.
struct HTTPRequest: Sendable {
    /// What is sent after the headers.
    enum Body: Sendable {
        case none
        /// The file at `path`, `bytes` long (a segment, read as it is sent).
        case file(path: String, bytes: Int)
        /// Bytes already in memory (an encoded segment, a small XML document).
        case bytes([UInt8])
    }

    /// `GET`, `HEAD`, `PUT`, `POST` or `DELETE`.
    var method: String
    /// The full URL.
    var url: String
    /// Header lines, `Name: value`.
    var headers: [String] = []
    /// The body.
    var body: Body = .none
    /// The most response-body bytes kept (one more marks "longer than expected"); bodies
    /// are read for comparisons and for collectors' error documents.
    var responseLimit = 64 << 10
}

/// What a collector answered.
struct HTTPResponse: Sendable {
    /// The status code.
    let status: Int
    /// `Retry-After` in seconds, if the collector sent one.
    let retryAfter: Duration?
    /// The answer's headers by lowercased name (the last of a repeated name).
    let headers: [String: String]
    /// The body, up to the request's limit plus one byte.
    let body: [UInt8]
}

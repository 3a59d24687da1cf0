// What an S3 store's error answer means for a segment: its status and the `<Code>` of its
// XML error document decide between "retry later" and "refused for good".

/// The `<Code>` and `<Message>` of an S3 error document (`<Error><Code>…</Code>…</Error>`).
struct S3ErrorResponse: Equatable {
    /// The status code.
    let status: Int
    /// The store's error code (`SignatureDoesNotMatch`, `SlowDown`…), if the body had one.
    let code: String?
    /// The store's explanation, if the body had one.
    let message: String?
    /// How long the store asked to wait (`Retry-After`), if it did.
    let retryAfter: Duration?

    /// Reads the error document in `response`'s body (nothing is required of it).
    init(_ response: HTTPResponse) {
        status = response.status
        let text = String(decoding: response.body, as: UTF8.self)[...]
        code = S3XML.value(of: "Code", in: text)
        message = S3XML.value(of: "Message", in: text)
        retryAfter = response.retryAfter
    }

    /// The failure for the segment: retried for 5xx, 404, 408, 409, 429, 3xx and any code in
    /// `retryableCodes` (a wrong clock among them, named as such); refused for good for every
    /// other 4xx — a wrong secret or key, a denied access, a request the store cannot take.
    func failure(asking method: String, key: String, retryableCodes: Set<String>) -> SinkError {
        let words =
            "\(method) \(key) answered HTTP \(status)" + (code.map { " \($0)" } ?? "")
            + (message.map { ": \($0)" } ?? "")
        if code == "RequestTimeTooSkewed" {
            return .retryable(
                "this machine's clock differs from the store's by more than it accepts; set the clock (\(words))",
                retryAfter: nil)
        }
        let retried = !(400...499).contains(status) || [404, 408, 409, 429].contains(status)
        if retried || code.map(retryableCodes.contains) == true {
            return .retryable(words, retryAfter: retryAfter)
        }
        return .permanent(words)
    }
}

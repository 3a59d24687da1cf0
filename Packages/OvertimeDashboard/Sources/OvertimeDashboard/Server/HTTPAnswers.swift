// The dashboard's HTTP answers: every one with the headers that keep a page from being
// framed, sniffed, cached or made to load anything from elsewhere.

import Foundation
import HTTPTypes
import Hummingbird

enum HTTPAnswers {
    /// Nothing from elsewhere, no inline script or style, no framing, forms only to here.
    static let contentSecurityPolicy =
        "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self'; connect-src 'self'; "
        + "form-action 'self'; frame-ancestors 'none'; base-uri 'none'"

    static func headers(contentType: String) -> HTTPFields {
        var fields = HTTPFields()
        fields[.contentType] = contentType
        fields[.contentSecurityPolicy] = contentSecurityPolicy
        fields[HTTPField.Name("X-Content-Type-Options")!] = "nosniff"
        fields[HTTPField.Name("X-Frame-Options")!] = "DENY"
        fields[HTTPField.Name("Referrer-Policy")!] = "no-referrer"
        fields[.cacheControl] = "no-store"
        return fields
    }

    static func html(_ text: String, status: HTTPResponse.Status = .ok) -> Response {
        Response(
            status: status, headers: headers(contentType: "text/html; charset=utf-8"),
            body: ResponseBody(byteBuffer: ByteBuffer(string: text)))
    }

    static func asset(_ text: String, type: String) -> Response {
        var fields = headers(contentType: type)
        fields[.cacheControl] = "private, max-age=300"
        return Response(status: .ok, headers: fields, body: ResponseBody(byteBuffer: ByteBuffer(string: text)))
    }

    static func redirect(to location: String) -> Response {
        var fields = headers(contentType: "text/plain; charset=utf-8")
        fields[.location] = location
        return Response(status: .seeOther, headers: fields)
    }

    static func plain(_ text: String, status: HTTPResponse.Status) -> Response {
        Response(
            status: status, headers: headers(contentType: "text/plain; charset=utf-8"),
            body: ResponseBody(byteBuffer: ByteBuffer(string: text + "\n")))
    }

    /// The fields of an `application/x-www-form-urlencoded` body (the last of a name wins).
    static func form(_ body: ByteBuffer) -> [String: String] { form(String(buffer: body)) }

    /// The fields of `request`'s query as a form's GET sends them: a space is a `+` there
    /// (a `+` typed is `%2B`), which the server's own reading of the query keeps as `+`.
    static func query(of request: Request) -> [String: String] { form(request.uri.query ?? "") }

    /// The fields of `text`, `application/x-www-form-urlencoded` (the last of a name wins).
    static func form(_ text: String) -> [String: String] {
        var fields: [String: String] = [:]
        for pair in text.split(separator: "&") {
            let parts = pair.split(separator: "=", maxSplits: 1, omittingEmptySubsequences: false)
            func decoded(_ text: Substring) -> String {
                String(text).replacingOccurrences(of: "+", with: " ").removingPercentEncoding ?? ""
            }
            guard let name = parts.first else { continue }
            fields[decoded(name)] = parts.count > 1 ? decoded(parts[1]) : ""
        }
        return fields
    }
}

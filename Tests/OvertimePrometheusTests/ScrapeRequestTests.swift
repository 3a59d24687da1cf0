import Testing

@testable import OvertimePrometheus

/// The endpoint's decisions as transcripts: bytes received so far, what it does.
@Suite("What a scrape asked for, decided from the bytes received")
struct ScrapeRequestTests {
    private func decide(_ text: String) -> ScrapeRequest { ScrapeRequest.decide(Array(text.utf8)) }

    @Test func aHeadComesInPiecesAndIsAnsweredWhenItEnds() {
        let full = "GET /metrics HTTP/1.1\r\nHost: 127.0.0.1:9464\r\nAccept: text/plain\r\n\r\n"
        for cut in 0..<full.utf8.count {
            #expect(ScrapeRequest.decide(Array(full.utf8.prefix(cut))) == .incomplete, "after \(cut) bytes")
        }
        #expect(decide(full) == .answer(.metrics(withBody: true)))
        #expect(decide("GET /metrics HTTP/1.0\n\n") == .answer(.metrics(withBody: true)))  // bare line feeds
        #expect(decide("GET /metrics?name[]=x HTTP/1.1\r\n\r\n") == .answer(.metrics(withBody: true)))
        #expect(decide("HEAD /metrics HTTP/1.1\r\n\r\n") == .answer(.metrics(withBody: false)))
    }

    @Test func everythingElseGetsAClearError() {
        #expect(decide("POST /metrics HTTP/1.1\r\n\r\n") == .answer(.methodNotAllowed))
        #expect(decide("GET / HTTP/1.1\r\n\r\n") == .answer(.notFound))
        #expect(decide("GET /metricsx HTTP/1.1\r\n\r\n") == .answer(.notFound))
        #expect(decide("GET /metrics\r\n\r\n") == .answer(.badRequest))
        #expect(decide("GET /metrics HTTP/2\r\n\r\n") == .answer(.badRequest))
        #expect(decide("GET metrics HTTP/1.1\r\n\r\n") == .answer(.badRequest))
        #expect(decide("\r\n\r\n") == .answer(.badRequest))
        #expect(decide("\u{16}\u{03}\u{01}\u{02}\n\n") == .answer(.badRequest))  // TLS to a plain port
        let long = "GET /metrics HTTP/1.1\r\nX: " + String(repeating: "a", count: 9000)
        #expect(decide(long) == .answer(.tooLarge))
        #expect(decide(long + "\r\n\r\n") == .answer(.tooLarge))
    }

    @Test func answersCarryTheirLengthAndCloseTheConnection() {
        let body = Array("# TYPE x counter\nx 1\n".utf8)
        let answer = String(decoding: ScrapeAnswer.metrics(withBody: true).bytes { body }, as: UTF8.self)
        #expect(answer.hasPrefix("HTTP/1.1 200 OK\r\n"))
        #expect(answer.contains("Content-Type: text/plain; version=0.0.4; charset=utf-8\r\n"))
        #expect(answer.contains("Content-Length: \(body.count)\r\n"))
        #expect(answer.contains("Connection: close\r\n\r\n"))
        #expect(answer.hasSuffix("\r\n\r\n# TYPE x counter\nx 1\n"))
        let head = String(decoding: ScrapeAnswer.metrics(withBody: false).bytes { body }, as: UTF8.self)
        #expect(head.hasSuffix("Content-Length: \(body.count)\r\nConnection: close\r\n\r\n"))
        var called = false
        let busy = ScrapeAnswer.busy.bytes {
            called = true
            return []
        }
        #expect(!called, "an error never renders the exposition")
        #expect(String(decoding: busy, as: UTF8.self).hasPrefix("HTTP/1.1 503 Service Unavailable\r\n"))
        #expect(ScrapeAnswer.metrics(withBody: true).errorKind == nil)
        #expect(ScrapeAnswer.tooLarge.errorKind == "too_large")
    }
}

@Suite("Where the endpoint listens, as an operator types it")
struct MetricsListenAddressTests {
    @Test func addressesAndPortsAsTyped() throws {
        #expect(try MetricsListenAddress(parsing: "9464") == .loopback(port: 9464))
        #expect(try MetricsListenAddress(parsing: "9464").description == "127.0.0.1:9464")
        #expect(try MetricsListenAddress(parsing: "0.0.0.0:80").host == "0.0.0.0")
        #expect(try MetricsListenAddress(parsing: "[::1]:9464").host == "::1")
        #expect(try MetricsListenAddress(parsing: "[::1]:9464").description == "[::1]:9464")
        #expect(try MetricsListenAddress(parsing: "localhost:0") == .loopback(port: 0))
    }

    @Test func badAddressesAreRefusedSayingWhy() {
        let cases: [(String, String)] = [
            ("metrics.example.com:9464", "not an IP address"),
            ("127.0.0.1", "expected ADDR:PORT"),
            ("127.0.0.1:70000", "from 0 to 65535"),
            ("127.0.0.1:", "from 0 to 65535"),
            ("127.0.0.1:-1", "from 0 to 65535"),
            ("::1:9464", "expected ADDR:PORT"),
            ("[::1]9464", "expected [IPv6]:PORT"),
            ("[not-v6]:9464", "not an IP address"),
            ("", "expected ADDR:PORT"),
            ("99999", "from 0 to 65535"),
        ]
        for (text, reason) in cases {
            do {
                _ = try MetricsListenAddress(parsing: text)
                Issue.record("'\(text)' was taken")
            } catch let error as MetricsExportError {
                #expect(error.code == .invalidAddress, "\(text)")
                #expect(error.message.contains(reason), "\(text): \(error.message)")
            } catch {
                Issue.record("\(error)")
            }
        }
    }
}

import Foundation
import Metrics
import Overtime
import OvertimeSupport
import OvertimeTestSupport
import Testing

@testable import OvertimePrometheus

/// The value of the sample `line` (name and labels, as written) in `exposition`.
func sample(_ line: String, in exposition: String) -> Double? {
    exposition.split(separator: "\n").first { $0.hasPrefix(line + " ") }.flatMap {
        Double($0.dropFirst(line.count + 1))
    }
}

@Suite("The metrics endpoint on the runtime's loop, against real clients", .timeLimit(.minutes(2)))
struct MetricsEndpointTests {
    private func runtime(_ exporter: PrometheusExporter) throws -> VirtualRuntime {
        try VirtualRuntime { $0.metricsFactory = exporter.factory }
    }

    @Test func aScrapeGetsTheRuntimesCountsWithHelpAndTheProcesssFigures() async throws {
        let exporter = PrometheusExporter(help: ["app_jobs_total": "Jobs the program did."])
        let virtual = try runtime(exporter)
        defer { virtual.shutDown() }
        let endpoint = try #require(try exporter.serve(on: virtual.runtime, listeningAt: .loopback(port: 0)))
        #expect(endpoint.address.port != 0)
        #expect(endpoint.url == "http://127.0.0.1:\(endpoint.address.port)/metrics")
        for _ in 0..<3 {
            let id = virtual.runtime.beginBackgroundTask(name: "job")
            virtual.runtime.endBackgroundTask(id)
        }
        Counter(label: "app_jobs_total", factory: exporter.factory).increment(by: 7)
        virtual.waitForQueuedRequests()
        let answer = try await onOwnThread {
            let client = try ScrapeClient(port: endpoint.address.port)
            client.send("GET /metrics HTTP/1.1\r\nHost: x\r\nAccept-Encoding: gzip\r\n\r\n")
            return client.readToEnd()
        }
        let (status, headers, body) = ScrapeClient.parts(answer)
        #expect(status == "HTTP/1.1 200 OK")
        #expect(headers.contains("Content-Length: \(body.utf8.count)"))
        #expect(sample("overtime_background_tasks_begun_total", in: body) == 3)
        #expect(sample("overtime_background_tasks_ended_total{reason=\"completed\"}", in: body) == 3)
        #expect(sample("app_jobs_total", in: body) == 7)
        #expect(body.contains("# HELP app_jobs_total Jobs the program did.\n# TYPE app_jobs_total counter\n"))
        // Every family has its help line, right before its type line.
        let lines = body.split(separator: "\n")
        for (index, line) in lines.enumerated() where line.hasPrefix("# TYPE ") {
            let name = line.split(separator: " ")[2]
            #expect(index > 0 && lines[index - 1].hasPrefix("# HELP \(name) "), "\(name) has no help line")
        }
        // The process's own figures, as the client libraries name them. (Other tests in this
        // process open and close descriptors meanwhile: the daemon tests compare exactly.)
        let open = try #require(sample("process_open_fds", in: body))
        #expect(open > 3)
        let resident = try #require(sample("process_resident_memory_bytes", in: body))
        #expect(resident > 1_000_000 && resident < 8_000_000_000)
        let started = try #require(sample("process_start_time_seconds", in: body))
        let now = Date().timeIntervalSince1970
        #expect(started <= now + 1 && started > now - 86_400)
        #expect(try #require(sample("process_cpu_seconds_total", in: body)) > 0)
        #expect(try #require(sample("process_max_fds", in: body)) >= open)
        // The same text over the control socket's command.
        #expect(exporter.exposition().contains("overtime_background_tasks_begun_total 3\n"))
    }

    @Test func errorsAreAnsweredAndCountedAndHeldOrDeafClientsAreCutOffAtTheirDeadline() async throws {
        let exporter = PrometheusExporter()
        let virtual = try runtime(exporter)
        defer { virtual.shutDown() }
        let endpoint = try #require(
            try exporter.serve(
                on: virtual.runtime, listeningAt: .loopback(port: 0), connectionDeadline: .milliseconds(500)))
        let port = endpoint.address.port
        let clock = virtual.clock
        // A large exposition: a client that never reads it cannot hold the daemon's memory.
        for index in 0..<3000 {
            Gauge(label: "app_filler_\(index)", factory: exporter.factory).record(index)
        }
        try await onOwnThread {
            for (request, status) in [
                ("POST /metrics HTTP/1.1\r\n\r\n", "HTTP/1.1 405 Method Not Allowed"),
                ("GET /other HTTP/1.1\r\n\r\n", "HTTP/1.1 404 Not Found"),
                ("hello\r\n\r\n", "HTTP/1.1 400 Bad Request"),
                (
                    "GET /metrics HTTP/1.1\r\nX: " + String(repeating: "y", count: 10_000),
                    "HTTP/1.1 431 Request Header Fields Too Large"
                ),
            ] {
                let client = try ScrapeClient(port: port)
                client.send(request)
                #expect(ScrapeClient.parts(client.readToEnd()).status == status, "\(request.prefix(20))")
            }
            // Half a request, held; a whole one never read: both are closed at the deadline,
            // on the runtime's clock, which stands still until the test moves it.
            let held = try ScrapeClient(port: port)
            held.send("GET /metr")
            let deaf = try ScrapeClient(port: port)
            var small: Int32 = 4096
            setsockopt(deaf.fd, SOL_SOCKET, SO_RCVBUF, &small, socklen_t(MemoryLayout<Int32>.size))
            deaf.send("GET /metrics HTTP/1.1\r\n\r\n")
            // The deaf client's answer has begun: the loop has accepted both, in the order
            // they came, and armed their deadlines (and seen the clients above hang up).
            #expect(deaf.answerWaits(within: .seconds(30)))
            clock.advance(by: .milliseconds(499))
            #expect(!held.answerWaits(within: .milliseconds(100)), "the held client is open before its deadline")
            clock.advance(by: .milliseconds(1))
            #expect(held.answerWaits(within: .seconds(30)), "the held client is closed at its deadline")
            #expect(held.readToEnd() == "", "the held client is closed without an answer")
            // What the deaf client got is cut short: the server closed it before it read.
            let partial = deaf.readToEnd()
            #expect(partial.hasPrefix("HTTP/1.1 200 OK"))
            // A normal scrape still works, and shows each error counted once.
            let client = try ScrapeClient(port: port)
            client.send("GET /metrics HTTP/1.0\r\n\r\n")
            let body = ScrapeClient.parts(client.readToEnd()).body
            #expect(body.contains("app_filler_2999 2999"))
            let errors = "overtime_metrics_http_errors_total"
            #expect(sample("\(errors){kind=\"method_not_allowed\"}", in: body) == 1)
            #expect(sample("\(errors){kind=\"not_found\"}", in: body) == 1)
            #expect(sample("\(errors){kind=\"bad_request\"}", in: body) == 1)
            #expect(sample("\(errors){kind=\"too_large\"}", in: body) == 1)
            #expect(sample("\(errors){kind=\"head_deadline\"}", in: body) == 1, "the held client")
            #expect(sample("\(errors){kind=\"deadline\"}", in: body) == 1, "the deaf client")
        }
    }

    @Test func moreClientsThanItServesAreTurnedAwayAtOnceAndTheirPlacesComeBack() async throws {
        let exporter = PrometheusExporter()
        let virtual = try runtime(exporter)
        defer { virtual.shutDown() }
        let endpoint = try #require(
            try exporter.serve(
                on: virtual.runtime, listeningAt: .loopback(port: 0), connectionDeadline: .seconds(60)))
        try await onOwnThread {
            let port = endpoint.address.port
            // Every place holds a request being answered: the holders asked and never close.
            let holders = try (0..<MetricsHTTPServer.maximumConnections).map { _ in
                let holder = try ScrapeClient(port: port)
                holder.send("GET /metrics HTTP/1.1\r\n\r\n")
                return holder
            }
            // The loop has accepted them all and read their requests once each has an answer
            // waiting (a holder still waiting for its head would give its place up instead).
            for (index, holder) in holders.enumerated() {
                #expect(holder.answerWaits(within: .seconds(30)), "holder \(index) was answered")
            }
            // Turned away at once, not at a deadline: on the runtime's clock, standing still,
            // none passes.
            let turnedAway = try ScrapeClient(port: port)
            #expect(ScrapeClient.parts(turnedAway.readToEnd()).status == "HTTP/1.1 503 Service Unavailable")
            // A holder reads its answer and hangs up; its place serves the next client.
            #expect(ScrapeClient.parts(holders[0].readToEnd()).status == "HTTP/1.1 200 OK")
            holders[0].hangUp()
            // The next client is served once the loop has seen the hang-up; one that comes
            // sooner is turned away too, and counted.
            var turnedAwayAgain = 0
            var answer = ScrapeClient.parts("")
            for _ in 0..<200 {
                let next = try ScrapeClient(port: port)
                next.send("GET /metrics HTTP/1.1\r\n\r\n")
                answer = ScrapeClient.parts(next.readToEnd())
                guard answer.status == "HTTP/1.1 503 Service Unavailable" else { break }
                turnedAwayAgain += 1
                usleep(50_000)
            }
            #expect(answer.status == "HTTP/1.1 200 OK")
            #expect(
                sample("overtime_metrics_http_errors_total{kind=\"too_many_connections\"}", in: answer.body)
                    == Double(1 + turnedAwayAgain))
            withExtendedLifetime(holders) {}
        }
    }

    /// Any local client can open connections and send nothing. Held open, 300 of them do not
    /// lock Prometheus out: each newcomer takes the place of the oldest idle one, and every
    /// scrape meanwhile is answered; the idle ones are closed by their 1 s head deadline.
    @Test func idleConnectionsNeverLockAScrapeOut() async throws {
        let exporter = PrometheusExporter()
        let virtual = try runtime(exporter)
        defer { virtual.shutDown() }
        let endpoint = try #require(try exporter.serve(on: virtual.runtime, listeningAt: .loopback(port: 0)))
        let clock = virtual.clock
        try await onOwnThread {
            let port = endpoint.address.port
            let idle = try (0..<300).map { _ in try ScrapeClient(port: port) }
            var statuses: [String] = []
            for _ in 0..<20 {
                let scrape = try ScrapeClient(port: port)
                scrape.send("GET /metrics HTTP/1.1\r\n\r\n")
                statuses.append(ScrapeClient.parts(scrape.readToEnd()).status)
                usleep(100_000)
            }
            #expect(statuses.allSatisfy { $0 == "HTTP/1.1 200 OK" }, "\(statuses)")
            // The idle ones were let go: evicted, or closed at their head deadline.
            clock.advance(by: MetricsHTTPServer.headDeadline)
            let last = try ScrapeClient(port: port)
            last.send("GET /metrics HTTP/1.1\r\n\r\n")
            let body = ScrapeClient.parts(last.readToEnd()).body
            let evicted = sample("overtime_metrics_http_errors_total{kind=\"idle_evicted\"}", in: body) ?? 0
            let expired = sample("overtime_metrics_http_errors_total{kind=\"head_deadline\"}", in: body) ?? 0
            #expect(evicted + expired >= 300 - Double(MetricsHTTPServer.maximumConnections), "\(evicted), \(expired)")
            #expect(sample("overtime_metrics_http_errors_total{kind=\"too_many_connections\"}", in: body) == nil)
            withExtendedLifetime(idle) {}
        }
    }

    @Test func aTakenPortIsRefusedClearlyAndTheEndpointClosesWithTheRuntime() async throws {
        let exporter = PrometheusExporter()
        let virtual = try runtime(exporter)
        let endpoint = try #require(try exporter.serve(on: virtual.runtime, listeningAt: .loopback(port: 0)))
        // A second instance on the same port: refused, naming the address and why.
        let second = PrometheusExporter()
        let other = try runtime(second)
        defer { other.shutDown() }
        #expect {
            try second.serve(on: other.runtime, listeningAt: endpoint.address)
        } throws: { error in
            guard let error = error as? MetricsExportError else { return false }
            return error.code == .cannotListen && error.message.contains("127.0.0.1:\(endpoint.address.port)")
                && error.message.contains("in use")
        }
        #expect(canConnect(port: Int(endpoint.address.port)))
        virtual.shutDown()
        #expect(try await eventually { !canConnect(port: Int(endpoint.address.port)) })
        #expect {
            try exporter.serve(on: virtual.runtime, listeningAt: .loopback(port: 0))
        } throws: { ($0 as? MetricsExportError)?.code == .runtimeShutDown }
    }
}

// Overtime embedded in an HTTP server: each request starts background work under a grant,
// and SIGTERM first stops the server accepting, then drains the open grants inside the
// budget. Hummingbird and Overtime run as services of one swift-service-lifecycle group.
//
//   swift run hummingbird-server --port 8080 --budget 5
//   curl -X POST 'http://127.0.0.1:8080/jobs/report?seconds=2'   # 202: runs under a grant
//   curl http://127.0.0.1:8080/jobs                               # the open grants
//   kill -TERM <pid>     # stops accepting; report finishes; longer jobs expire at 4 s

import Hummingbird
import Logging
import Overtime
import OvertimeServiceLifecycle
import ServiceLifecycle

#if canImport(Glibc)
    import Glibc
#endif

@main
struct HummingbirdServer {
    static func main() async throws {
        let port = option("--port").flatMap(Int.init) ?? 8080
        var configuration = RuntimeConfiguration()
        configuration.backgroundBudget = .seconds(option("--budget").flatMap(Int.init) ?? 5)
        configuration.expirationLeadTime = .seconds(1)
        // The group owns SIGTERM and SIGINT; the service turns the runtime's own handling off.
        let overtime = try OvertimeService(configuration: configuration)
        let runtime = overtime.runtime
        let logger = Logger(label: "hummingbird-server")

        let router = Router()
        router.post("jobs/:name") { request, context -> HTTPResponse.Status in
            let name = try context.parameters.require("name")
            let seconds = request.uri.queryParameters.get("seconds", as: Int.self) ?? 1
            // The response goes now; the work goes on under a grant of its own, which
            // lasts while the program is in the foreground and gets the budget after.
            Task { await runJob(name, seconds: seconds, on: runtime) }
            return .accepted
        }
        router.get("jobs") { _, _ -> String in
            runtime.openBackgroundTasks.map { "\($0.name)\n" }.joined()
        }
        let server = Application(
            router: router, configuration: .init(address: .hostname("127.0.0.1", port: port)), logger: logger)

        // Graceful shutdown goes through the services in reverse order: the server stops
        // accepting and finishes its requests, then the runtime drains its grants.
        let group = ServiceGroup(
            configuration: .init(
                services: [.init(service: overtime), .init(service: server)],
                gracefulShutdownSignals: [.sigterm, .sigint], logger: logger))
        try await group.run()
        say("stopped: no grant open")
    }

    /// One job: `seconds` of work on the runtime's timer, inside a grant. Expiration
    /// cancels the body; the job stops and says so. It says so inside the grant: once the
    /// last grant ends the drain is over and the process may exit, so a line written after
    /// the end could be lost.
    static func runJob(_ name: String, seconds: Int, on runtime: Runtime) async {
        do {
            try await runtime.withBackgroundTask(name: "job \(name)") {
                do {
                    try await runtime.sleep(for: .seconds(seconds))
                    say("job \(name) finished")
                } catch {
                    say("job \(name) stopped: \(error)")
                    throw error
                }
            }
        } catch BackgroundTaskError.refused(let refusal) {
            say("job \(name) refused: \(refusal)")
        } catch {
            // Said inside the grant.
        }
    }

    /// The value after `name` on the command line.
    static func option(_ name: String) -> String? {
        let arguments = CommandLine.arguments
        guard let index = arguments.firstIndex(of: name), index + 1 < arguments.count else { return nil }
        return arguments[index + 1]
    }

    /// A line on standard output, written at once (a pipe would otherwise hold it).
    static func say(_ line: String) {
        print(line)
        fflush(nil)  // every stream: no reference to the global `stdout`
    }
}

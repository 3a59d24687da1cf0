// overtime-dashboard: the schedule of a daemon in the browser, beside it.
//
//   overtime-dashboard --store /var/lib/app/schedule.db --control-socket /run/app/control.sock \
//       --credentials /etc/overtime/dashboard.credentials
//   overtime-dashboard --store postgres://app@db/app --control-socket /run/app/control.sock …  (a fleet)
//   open http://127.0.0.1:8460/

import ArgumentParser
import Foundation
import Hummingbird
import Logging
import NIOCore
import OvertimeDashboard
import OvertimePostgres
import OvertimeScheduler

@main
struct OvertimeDashboardCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "overtime-dashboard",
        abstract: "Serve an Overtime schedule as web pages: what waits and why, what runs, the history.",
        discussion: """
            Credentials: a file of name:token lines, readable by its owner only (chmod 600); by default
            $CREDENTIALS_DIRECTORY/dashboard (systemd's LoadCredential=dashboard:PATH). Sign in with a token;
            programs may send it as Authorization: Bearer TOKEN. Without --control-socket (or with --read-only)
            the dashboard only reads. A fleet's database is given as a URL (postgres://USER@HOST:PORT/DATABASE,
            a password from PGPASSWORD or the password file); its instances can then be retired, and runs,
            cancels and retries go through the control socket of one of its instances.
            """)

    @Option(
        help:
            "The schedule: a daemon's SQLite store, or a fleet's PostgreSQL database as a postgres:// URL (read beside them; nothing is written)."
    )
    var store: String

    @Option(help: "The daemon's control socket (in a fleet, one instance's): run now, cancel and retry go through it.")
    var controlSocket: String?

    @Option(help: "Listen at ADDR:PORT (a port alone: on loopback).")
    var listen = "127.0.0.1:8460"

    @Option(help: "The credentials file (name:token per line).")
    var credentials: String?

    @Flag(help: "Show the schedule and refuse every action.")
    var readOnly = false

    @Option(help: "Append each action (who, what, the outcome) to this file, one JSON object per line.")
    var actionLog: String?

    @Option(help: "Serve under this path (behind a proxy), e.g. /dashboard.")
    var mountPath = ""

    @Option(
        name: .customLong("allowed-host"),
        help: ArgumentHelp(
            "A host name the dashboard answers to, such as the one a proxy in front passes on (repeatable).",
            discussion: "Addresses and localhost are always answered; a request naming any other host is refused."))
    var allowedHosts: [String] = []

    func validate() throws {
        for name in allowedHosts
        where name.isEmpty || !name.allSatisfy({ $0.isLetter || $0.isNumber || "-._".contains($0) }) {
            throw ValidationError("--allowed-host: a host name (letters, digits, -._; no port), got '\(name)'")
        }
        guard Self.address(listen) != nil else {
            throw ValidationError("--listen: ADDR:PORT or PORT (a port from 0 to 65535), got '\(listen)'")
        }
    }

    static func address(_ text: String) -> (host: String, port: Int)? {
        if let port = Int(text), (0...65535).contains(port) { return ("127.0.0.1", port) }
        guard let colon = text.lastIndex(of: ":"), let port = Int(text[text.index(after: colon)...]),
            (0...65535).contains(port)
        else { return nil }
        var host = String(text[..<colon])
        if host.hasPrefix("["), host.hasSuffix("]") { host = String(host.dropFirst().dropLast()) }
        return host.isEmpty ? nil : (host, port)
    }

    func run() async throws {
        LoggingSystem.bootstrap(StreamLogHandler.standardError)
        let logger = Logger(label: "overtime.dashboard")
        let credentialsPath =
            credentials ?? ProcessInfo.processInfo.environment["CREDENTIALS_DIRECTORY"].map { $0 + "/dashboard" }
        guard let credentialsPath else {
            Self.fail(
                "no credentials: pass --credentials FILE (name:token per line, chmod 600), or run under systemd with LoadCredential=dashboard:FILE"
            )
        }
        var configuration: DashboardConfiguration
        do {
            configuration = DashboardConfiguration(credentials: try DashboardCredentials(contentsOf: credentialsPath))
        } catch {
            Self.fail("\(error)")
        }
        configuration.readOnly = readOnly
        configuration.actionLogPath = actionLog
        configuration.mountPath = mountPath
        configuration.allowedHosts = allowedHosts
        let inspector: any ScheduleInspector
        do {
            if store.hasPrefix("postgres://") || store.hasPrefix("postgresql://") {
                let fleet = try PostgresScheduleConfiguration(url: store)
                configuration.actions = FleetActions(database: fleet, controlSocket: controlSocket)
                inspector = try await ScheduleDatabase.postgres(fleet).inspector()
            } else {
                configuration.actions = controlSocket.map { ControlSocketActions(controlSocket: $0) }
                inspector = try await ScheduleDatabase.sqlite(path: store).inspector()
            }
        } catch {
            Self.fail("\(error)")
        }
        let dashboard: Dashboard
        do {
            dashboard = try Dashboard(inspector: inspector, configuration: configuration, logger: logger)
        } catch {
            Self.fail("\(error)")
        }
        let (host, port) = Self.address(listen)!
        if !["127.0.0.1", "::1", "localhost"].contains(host) {
            logger.warning(
                "listening beyond loopback: put TLS in front (a reverse proxy) so tokens never travel in clear")
        }
        let mount = mountPath
        let app = dashboard.application(host: host, port: port) { port in
            let shown = host.contains(":") ? "[\(host)]" : host
            print("dashboard at http://\(shown):\(port)\(mount)/")
            fflush(nil)
        }
        do {
            try await app.runService()
        } catch let error as IOError where error.errnoCode == EADDRINUSE {
            Self.fail(
                "cannot listen at \(listen): the address is in use (another program, or another dashboard, listens there)",
                status: 69)
        } catch let error as IOError {
            Self.fail("cannot listen at \(listen): \(error)", status: 69)
        }
        inspector.close()
    }

    /// Says why and exits: 64 (`EX_USAGE`) for a bad setup, 69 (`EX_UNAVAILABLE`) when the
    /// address cannot be listened at.
    static func fail(_ message: String, status: Int32 = 64) -> Never {
        FileHandle.standardError.write(Data("overtime-dashboard: \(message)\n".utf8))
        Foundation.exit(status)
    }
}

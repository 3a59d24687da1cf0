// Where the fleet's database is and how long a claim on a run lasts.

import Foundation
@_spi(ScheduleStore) import OvertimeScheduler
import PostgresNIO

/// How a scheduler reaches the PostgreSQL database a fleet shares, and how long its claims
/// on runs last. Built from a URL (`postgres://user:password@host:port/database`), from
/// the usual `PG*` environment variables (``environment(_:)``), or field by field.
///
/// TLS: libpq's `sslmode`, `sslrootcert`, `sslcert` and `sslkey` in the URL's query or the
/// environment, or ``secure(_:)`` with ``PostgresTLSOptions``, or postgres-nio's own
/// setting in ``tls``. With none of them named, the connection is not encrypted (for a
/// database on the same host or a private network).
public struct PostgresScheduleConfiguration: Sendable {
    /// The server's host name or address, or (starting with `/`) the folder of its Unix
    /// socket, as libpq takes it (`/var/run/postgresql`: the socket `.s.PGSQL.<port>` in it).
    public var host: String
    /// The server's port. Default 5432.
    public var port: Int
    /// The role to connect as.
    public var username: String
    /// Its password, if the server asks for one. `nil`: as libpq, `PGPASSWORD`, else the
    /// password file (`PGPASSFILE`, else `~/.pgpass`, read only when no one but its owner
    /// may read it), when connecting.
    public var password: String?
    /// The database; `nil`: the server's default for the role (its name).
    public var database: String?
    /// TLS to the server (postgres-nio's options). Default none.
    public var tls: PostgresConnection.Configuration.TLS = .disable
    /// This instance's name in the fleet: its per-instance requests
    /// (`RequestScope.perInstance`) are kept under it, and it is shown
    /// beside the runs it holds, with its host and process ID. It must stay the same across
    /// restarts (a restarted instance finds its own requests again) and differ between
    /// instances that each run their own. Default: the host name, which fits one instance
    /// per machine; name instances that share a machine (`worker-1`, a systemd instance).
    /// Two processes running at once under one name share its per-instance requests
    /// (claims still keep their runs apart).
    public var instanceName: String
    /// How long a claim on a run lasts before it is renewed (every third of it while the
    /// run lives). A worker that dies holds its runs this long at most; then another
    /// instance takes them as interrupted. Default 30 s.
    public var claimDuration: Duration = .seconds(30)
    /// A run is told to stop (its expiration handler) this long before its claim would
    /// end when it cannot be renewed (the database unreachable), so that no other
    /// instance takes it while it still runs here. Default 5 s; less than the claim.
    public var claimMargin: Duration = .seconds(5)
    /// With no notification, the schedule is read again this often while the database
    /// cannot be reached (notifications are lost with the connection). Default 5 s.
    ///
    /// Also how long calls fail at once, without connecting, after the database took a
    /// connection and never answered it within ``operationTimeout`` (stopped, frozen, or
    /// behind a network that drops its packets): each such attempt would cost a call its whole
    /// deadline, and calls wait for each other's. A refused connection is tried again at each
    /// call.
    public var reconnectInterval: Duration = .seconds(5)

    /// The environment a password not given is looked up in (`PGPASSWORD`, the password
    /// file); `nil`: the process's. For tests.
    var passwordEnvironment: [String: String]?

    /// A call to the database that has had no answer in this time (from its start to
    /// connecting and its first statement's answer, then from each answer to the next) fails,
    /// and its connection is closed, to connect again: a server that crashed or was stopped
    /// can leave a connection that never answers. Each answer starts it again, so that a
    /// large call to a server that answers (a submission of thousands of requests, written a
    /// thousand to a statement) is not cut short by its size. At most half the runtime's
    /// watchdog timeout (a scheduler refuses to open the store otherwise), so that what waits
    /// on the scheduler's calls — a stop, a synchronous call off the loop — is never held by
    /// a silent server longer than the watchdog would let the loop be. Default 5 s.
    public var operationTimeout: Duration = .seconds(5)

    /// A database at `host`.
    public init(host: String, port: Int = 5432, username: String, password: String? = nil, database: String? = nil) {
        self.host = host
        self.port = port
        self.username = username
        self.password = password
        self.database = database
        instanceName = Self.defaultInstanceName()
    }

    /// A database named by a URL: `postgres://user:password@host:port/database` (or
    /// `postgresql://`); the password, port and database may be left out (a password left
    /// out is looked up as libpq does: `PGPASSWORD`, then the password file). The host may
    /// be a socket folder, percent-encoded or as the query's `host` (with `port`). Its query may
    /// name TLS as libpq does: `sslmode` (`disable`, `prefer`, `require`, `verify-ca`,
    /// `verify-full`), `sslrootcert`, `sslcert` and `sslkey` (see ``PostgresTLSOptions``).
    ///
    /// - Throws: ``PostgresScheduleConfigurationError`` naming what is wrong with it,
    ///   without repeating the URL (it may hold a password). A parameter this does not
    ///   understand is an error: a misspelt `sslmode` must not leave the connection in the
    ///   clear.
    public init(url: String) throws(PostgresScheduleConfigurationError) {
        guard let components = URLComponents(string: url), let scheme = components.scheme,
            scheme == "postgres" || scheme == "postgresql"
        else {
            throw PostgresScheduleConfigurationError("the database URL is not a postgres:// URL")
        }
        // `postgres://user@%2Fvar%2Frun%2Fpostgresql/db`: a socket folder, percent-encoded;
        // `postgres://user@/db?host=/var/run/postgresql` below.
        let named = components.percentEncodedHost.flatMap { $0.removingPercentEncoding } ?? ""
        let socketInQuery = components.queryItems?.contains { $0.name == "host" } == true
        guard !named.isEmpty || socketInQuery else {
            throw PostgresScheduleConfigurationError("the database URL names no host")
        }
        let host = named.isEmpty ? "localhost" : named
        guard let user = components.user, !user.isEmpty else {
            throw PostgresScheduleConfigurationError("the database URL names no user")
        }
        let path = components.path.hasPrefix("/") ? String(components.path.dropFirst()) : components.path
        self.init(
            host: host, port: components.port ?? 5432, username: user, password: components.password,
            database: path.isEmpty ? nil : path)
        let query = components.queryItems ?? []
        let understood = ["sslmode", "sslrootcert", "sslcert", "sslkey", "host", "port"]
        if let unknown = query.first(where: { !understood.contains($0.name) }) {
            throw PostgresScheduleConfigurationError(
                "the database URL's parameter '\(unknown.name)' is not understood here (only"
                    + " \(understood.joined(separator: ", ")))")
        }
        if let text = query.last(where: { $0.name == "port" })?.value {
            guard let value = Int(text), (1...65535).contains(value) else {
                throw PostgresScheduleConfigurationError("the database URL's parameter 'port' is not a port")
            }
            port = value
        }
        if let socketFolder = query.last(where: { $0.name == "host" })?.value {
            guard socketFolder.hasPrefix("/") else {
                throw PostgresScheduleConfigurationError(
                    "the database URL's parameter 'host' must be a socket folder (an absolute path)")
            }
            self.host = socketFolder
        }
        let options = try Self.tlsOptions({ name in query.last { $0.name == name }?.value }, naming: { $0 })
        if let options { tls = try options.connectionTLS(home: nil) }
    }

    /// A database named as `psql` finds it: `PGHOST` (default `localhost`; a path is the
    /// folder of the server's Unix socket), `PGPORT`, `PGUSER` (default the login name),
    /// `PGPASSWORD` (else the password file, `PGPASSFILE` or `~/.pgpass`, when connecting)
    /// and `PGDATABASE`; TLS from
    /// `PGSSLMODE`, `PGSSLROOTCERT`, `PGSSLCERT` and `PGSSLKEY` (see ``PostgresTLSOptions``).
    ///
    /// - Throws: ``PostgresScheduleConfigurationError`` for a `PGPORT` that is not a port,
    ///   no user named anywhere, or TLS settings that cannot be used.
    public static func environment(_ variables: [String: String] = ProcessInfo.processInfo.environment)
        throws(PostgresScheduleConfigurationError) -> PostgresScheduleConfiguration
    {
        var port = 5432
        if let text = variables["PGPORT"] {
            guard let value = Int(text), (1...65535).contains(value) else {
                throw PostgresScheduleConfigurationError("PGPORT '\(text)' is not a port")
            }
            port = value
        }
        guard let user = variables["PGUSER"] ?? variables["USER"], !user.isEmpty else {
            throw PostgresScheduleConfigurationError("no PGUSER (nor USER) names the role to connect as")
        }
        var configuration = PostgresScheduleConfiguration(
            host: variables["PGHOST"] ?? "localhost", port: port, username: user, password: variables["PGPASSWORD"],
            database: variables["PGDATABASE"])
        let options = try tlsOptions({ variables["PG" + $0.uppercased()] }, naming: { "PG" + $0.uppercased() })
        if let options { configuration.tls = try options.connectionTLS(home: variables["HOME"]) }
        return configuration
    }

    /// The host name.
    static func defaultInstanceName() -> String { ProcessInfo.processInfo.hostName }

    /// Who holds a run, as ``OvertimeScheduler/PendingRequest/holder`` shows it: `host:pid`,
    /// after the instance name when that is not the host's.
    var holderName: String {
        let host = ProcessInfo.processInfo.hostName
        let process = "\(host):\(ProcessInfo.processInfo.processIdentifier)"
        return instanceName == host ? process : "\(instanceName) (\(process))"
    }

    /// postgres-nio's connection configuration (`warn` hears of a password file not read).
    func connection(warn: (String) -> Void = { _ in }) -> PostgresConnection.Configuration {
        let password = effectivePassword(passwordEnvironment ?? ProcessInfo.processInfo.environment, warn: warn)
        var configuration =
            host.hasPrefix("/")
            ? PostgresConnection.Configuration(
                unixSocketPath: host + "/.s.PGSQL.\(port)", username: username, password: password, database: database)
            : PostgresConnection.Configuration(
                host: host, port: port, username: username, password: password, database: database, tls: tls)
        configuration.options.additionalStartupParameters = [("application_name", applicationName)]
        return configuration
    }

    /// The password libpq would send: the one given, else `PGPASSWORD`, else the password
    /// file's line for this host, port, database and user.
    func effectivePassword(_ variables: [String: String], warn: (String) -> Void) -> String? {
        if let password { return password }
        if let password = variables["PGPASSWORD"] { return password }
        guard let file = PostgresPasswordFile.path(variables) else { return nil }
        return PostgresPasswordFile.password(
            in: file, host: host, port: port, database: database ?? username, user: username, warn: warn)
    }

    /// Where the server is, for messages: `host:port`, or the socket's path.
    var serverName: String { host.hasPrefix("/") ? host + "/.s.PGSQL.\(port)" : "\(host):\(port)" }

    /// How this instance's connections are named on the server (`pg_stat_activity`):
    /// `overtime ` and the instance name, in printable ASCII (`?` for anything else, as
    /// the server would) and cut to the 63 bytes the server keeps.
    var applicationName: String { Self.applicationName(of: instanceName) }

    /// What every instance's application name starts with.
    static let applicationNamePrefix = "overtime "

    /// The application name of the connections of instance `name`.
    static func applicationName(of name: String) -> String {
        let bytes = (applicationNamePrefix + name).unicodeScalars.prefix(63).map {
            $0.isASCII && $0.value >= 32 && $0.value < 127 ? UInt8($0.value) : UInt8(ascii: "?")
        }
        return String(decoding: bytes, as: UTF8.self)
    }
}

/// What is wrong with a PostgreSQL configuration.
public struct PostgresScheduleConfigurationError: Error, Sendable, Hashable, CustomStringConvertible {
    /// One sentence naming the value and what is wrong with it.
    public let message: String

    init(_ message: String) {
        self.message = message
    }

    /// The message.
    public var description: String { message }
}

extension ScheduleDatabase {
    /// The PostgreSQL database `configuration` names, which many instances on many
    /// machines share: each due run starts on one of them, claimed for a while and
    /// renewed while it runs; due times are compared on the database's clock. A scheduler
    /// on it runs up to 32 runs at once unless `SchedulerConfiguration.maximumConcurrentRuns`
    /// says otherwise (a fleet's instances are servers, and each run's claim and record are
    /// round trips that four at a time would leave the instance waiting on).
    public static func postgres(_ configuration: PostgresScheduleConfiguration) -> ScheduleDatabase {
        var database = ScheduleDatabase(
            description: "postgres://\(configuration.username)@\(configuration.serverName)"
                + "/\(configuration.database ?? configuration.username)",
            connecting: { context async throws(ScheduleStoreError) in
                if let watchdog = context.watchdogTimeout, configuration.operationTimeout * 2 > watchdog {
                    throw ScheduleStoreError(
                        "operationTimeout \(configuration.operationTimeout) is more than half the runtime's watchdog"
                            + " timeout (\(watchdog)): set it to \(watchdog / 2) or less")
                }
                return try await PostgresScheduleStore.open(
                    configuration: configuration, wallClock: context.wallClock, logger: context.logger)
            },
            inspect: { () async throws(ScheduleStoreError) in
                try await PostgresScheduleInspector.open(configuration: configuration)
            })
        database.maximumConcurrentRunsByDefault = 32
        return database
    }
}

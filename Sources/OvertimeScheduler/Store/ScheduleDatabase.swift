// Which database a scheduler keeps its schedule in: the one line a program changes to move
// from one machine's SQLite file to a fleet's shared database.

import Logging
import Overtime

/// Where a ``Scheduler`` keeps requests, plans and history. ``sqlite(path:)`` is the
/// embedded default (one process per file); `OvertimePostgres` adds `.postgres(…)`, a
/// database that many instances on many machines share.
///
/// ```swift
/// var configuration = SchedulerConfiguration(storePath: "/var/lib/app/schedule.db")
/// configuration.database = .postgres(try .init(url: "postgres://app@db/app"))  // a fleet
/// ```
public struct ScheduleDatabase: Sendable, CustomStringConvertible {
    let open: Opening
    let inspect: (@Sendable () async throws(ScheduleStoreError) -> any ScheduleInspector)?

    /// Names the database for logs: the file, or the server and database.
    public let description: String

    /// How many runs at once a scheduler on this database starts when its configuration
    /// does not set ``SchedulerConfiguration/maximumConcurrentRuns`` (`nil`: the
    /// configuration's own default, 4), for store implementations: a database that a fleet
    /// of servers shares asks for more.
    @_spi(ScheduleStore) public var maximumConcurrentRunsByDefault: Int?

    /// One SQLite file, created if missing with its folders; one scheduler per file
    /// (`<path>.lock` is held while it is open).
    public static func sqlite(path: String) -> ScheduleDatabase {
        ScheduleDatabase(
            description: path,
            open: { context throws(ScheduleStoreError) in
                try SQLiteScheduleStore(path: path, now: context.now, logger: context.logger)
            },
            inspect: { () async throws(ScheduleStoreError) in try await SQLiteScheduleInspector.open(path: path) })
    }

    /// Opens the schedule for reading beside the scheduler that owns it (see
    /// ``ScheduleInspector``): nothing is created, locked or written. A SQLite file must
    /// exist and be an Overtime schedule store.
    ///
    /// ```swift
    /// let inspector = try await ScheduleDatabase.sqlite(path: "/var/lib/app/schedule.db").inspector()
    /// defer { inspector.close() }
    /// let failed = try await inspector.requests(RequestQuery(selection: .failed), now: SystemClock().wallClockNow)
    /// ```
    public func inspector() async throws(ScheduleStoreError) -> any ScheduleInspector {
        guard let inspect else { throw ScheduleStoreError("\(description): this database cannot be inspected") }
        return try await inspect()
    }

    /// How a store of the database is opened: at once (a local file), or by talking to a
    /// server first (connecting, making the schema), which is awaited.
    enum Opening: Sendable {
        case synchronous(@Sendable (ScheduleStoreContext) throws(ScheduleStoreError) -> any ScheduleStore)
        case asynchronous(@Sendable (ScheduleStoreContext) async throws(ScheduleStoreError) -> any ScheduleStore)
    }

    /// Opens the database's store with `context`, as a scheduler does: for store
    /// implementations and their conformance checks.
    @_spi(ScheduleStore) public func openStore(_ context: ScheduleStoreContext) async throws(ScheduleStoreError)
        -> any ScheduleStore
    {
        switch open {
        case .synchronous(let open): try open(context)
        case .asynchronous(let open): try await open(context)
        }
    }

    /// A database whose store `open` makes at once, and whose schedule `inspect` reads, for
    /// store implementations.
    @_spi(ScheduleStore) public init(
        description: String,
        open: @escaping @Sendable (ScheduleStoreContext) throws(ScheduleStoreError) -> any ScheduleStore,
        inspect: (@Sendable () async throws(ScheduleStoreError) -> any ScheduleInspector)? = nil
    ) {
        self.description = description
        self.open = .synchronous(open)
        self.inspect = inspect
    }

    /// A database whose store `open` makes by talking to a server first (awaited: the
    /// synchronous `Scheduler.init` waits for it on the scheduler's queue, never on the
    /// runtime's loop), and whose schedule `inspect` reads, for store implementations.
    @_spi(ScheduleStore) public init(
        description: String,
        connecting open:
            @escaping @Sendable (ScheduleStoreContext) async throws(ScheduleStoreError) -> any ScheduleStore,
        inspect: (@Sendable () async throws(ScheduleStoreError) -> any ScheduleInspector)? = nil
    ) {
        self.description = description
        self.open = .asynchronous(open)
        self.inspect = inspect
    }
}

/// What a store is opened with.
@_spi(ScheduleStore) public struct ScheduleStoreContext: Sendable {
    /// The wall-clock time on the runtime's clock when the store is opened.
    public let now: WallClockInstant
    /// The runtime's wall clock, read.
    public let wallClock: @Sendable () -> WallClockInstant
    /// Where the scheduler logs.
    public let logger: Logger
    /// The runtime's watchdog timeout (`nil`: no watchdog): a store whose calls can wait
    /// on a server bounds each call well inside it.
    public let watchdogTimeout: Duration?

    /// A context: opened at `now` on the clock `wallClock` reads, logging to `logger`, for
    /// a runtime whose watchdog fires after `watchdogTimeout`.
    public init(
        now: WallClockInstant, wallClock: @escaping @Sendable () -> WallClockInstant, logger: Logger,
        watchdogTimeout: Duration? = nil
    ) {
        self.now = now
        self.wallClock = wallClock
        self.logger = logger
        self.watchdogTimeout = watchdogTimeout
    }
}

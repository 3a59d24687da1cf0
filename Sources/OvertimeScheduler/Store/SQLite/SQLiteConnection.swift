// One connection to a SQLite database through the system's library: statements prepared
// once and kept, values bound and read by position without boxing.

import CSQLite

/// An error SQLite returned, with what was being done.
struct SQLiteError: Error, Sendable, CustomStringConvertible {
    /// SQLite's primary result code (`SQLITE_BUSY`, `SQLITE_NOTADB`, …).
    let code: Int32
    let message: String

    var description: String { message }
}

/// The text of a statement run on the hot path, found again by its identity: hashing a
/// statement's text on every use costs a third of what SQLite spends updating a row.
/// Kept in `static let`s.
final class SQLiteQuery: Sendable {
    let text: String

    init(_ text: String) { self.text = text }
}

/// A connection used by one owner at a time (the store holds it under its lock). Not
/// `Sendable`: SQLite's statements belong to the connection that prepared them.
final class SQLiteConnection {
    private var handle: OpaquePointer?
    private var statements: [String: SQLiteStatement] = [:]
    /// Each query keeps its own entry alive, so its identity is never reused while cached.
    private var queries: [ObjectIdentifier: (query: SQLiteQuery, statement: SQLiteStatement)] = [:]

    /// Opens `path`, creating it unless `readOnly`; a busy database is waited for up to 5 s.
    init(path: String, readOnly: Bool = false) throws(SQLiteError) {
        // Never through a symbolic link: the store is the file named, or nothing.
        let flags =
            (readOnly ? SQLITE_OPEN_READONLY : SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE) | SQLITE_OPEN_NOMUTEX
            | SQLITE_OPEN_NOFOLLOW
        var handle: OpaquePointer?
        let code = sqlite3_open_v2(path, &handle, flags, nil)
        guard code == SQLITE_OK, let handle else {
            let message = handle.map { String(cString: sqlite3_errmsg($0)) } ?? String(cString: sqlite3_errstr(code))
            sqlite3_close_v2(handle)
            throw SQLiteError(code: code & 0xFF, message: "open: \(message)")
        }
        self.handle = handle
        sqlite3_extended_result_codes(handle, 1)
        sqlite3_busy_timeout(handle, 5_000)
    }

    deinit { close() }

    /// Finalizes every statement and closes the connection; later calls fail.
    func close() {
        for statement in statements.values { statement.finalize() }
        statements.removeAll()
        for entry in queries.values { entry.statement.finalize() }
        queries.removeAll()
        sqlite3_close_v2(handle)
        handle = nil
    }

    /// Runs `sql`, one or more statements without parameters.
    func execute(_ sql: String) throws(SQLiteError) {
        guard let handle else { throw SQLiteError(code: SQLITE_MISUSE, message: "the connection is closed") }
        var error: UnsafeMutablePointer<CChar>?
        let code = sqlite3_exec(handle, sql, nil, nil, &error)
        guard code == SQLITE_OK else {
            let message = error.map { String(cString: $0) } ?? String(cString: sqlite3_errstr(code))
            sqlite3_free(error)
            throw SQLiteError(code: code & 0xFF, message: "\(message) (in: \(sql.prefix(80)))")
        }
    }

    /// Rows the last `INSERT`, `UPDATE` or `DELETE` changed.
    var changes: Int { handle.map { Int(sqlite3_changes($0)) } ?? 0 }

    /// The prepared statement for `sql`, prepared on first use and kept; reset, its
    /// bindings cleared.
    func statement(_ sql: String) throws(SQLiteError) -> SQLiteStatement {
        if let statement = statements[sql] {
            statement.reset()
            return statement
        }
        let statement = try prepare(sql)
        statements[sql] = statement
        return statement
    }

    /// The prepared statement for `query`, as ``statement(_:)-(String)`` but found by the
    /// query's identity: for the statements run once or more per scheduled run.
    func statement(_ query: SQLiteQuery) throws(SQLiteError) -> SQLiteStatement {
        if let entry = queries[ObjectIdentifier(query)] {
            entry.statement.reset()
            return entry.statement
        }
        let statement = try prepare(query.text)
        queries[ObjectIdentifier(query)] = (query, statement)
        return statement
    }

    private func prepare(_ sql: String) throws(SQLiteError) -> SQLiteStatement {
        guard let handle else { throw SQLiteError(code: SQLITE_MISUSE, message: "the connection is closed") }
        var pointer: OpaquePointer?
        let code = sqlite3_prepare_v3(handle, sql, -1, UInt32(SQLITE_PREPARE_PERSISTENT), &pointer, nil)
        guard code == SQLITE_OK, let pointer else {
            throw SQLiteError(code: code & 0xFF, message: "\(String(cString: sqlite3_errmsg(handle))) (in: \(sql))")
        }
        return SQLiteStatement(pointer, connection: handle)
    }

    /// Runs `body` in one write transaction (`BEGIN IMMEDIATE`): committed when it returns,
    /// rolled back when it throws. Statements it left stepping are reset first (see
    /// ``endReads()``).
    func transaction<T>(_ body: () throws(SQLiteError) -> T) throws(SQLiteError) -> T {
        try execute("BEGIN IMMEDIATE")
        do {
            let result = try body()
            endReads()
            try execute("COMMIT")
            return result
        } catch {
            endReads()
            try? execute("ROLLBACK")
            throw error
        }
    }

    /// Resets every statement of the connection still stepping (one read for a single row
    /// and left). Such a statement keeps the connection's read of the write-ahead log open
    /// past its transaction, at the place the read began: no checkpoint copies the log
    /// beyond it and the log never starts over, so it grows for as long as the connection
    /// lives — and every page read searches all of it.
    func endReads() {
        guard let handle else { return }
        var statement = sqlite3_next_stmt(handle, nil)
        while let current = statement {
            if sqlite3_stmt_busy(current) != 0 { sqlite3_reset(current) }
            statement = sqlite3_next_stmt(handle, current)
        }
    }

    /// Every row of a statement without parameters, each read by `row`.
    func rows<T>(_ sql: String, _ row: (SQLiteStatement) throws(SQLiteError) -> T) throws(SQLiteError) -> [T] {
        let statement = try statement(sql)
        var rows: [T] = []
        while try statement.step() { rows.append(try row(statement)) }
        return rows
    }

    /// The first column of the first row of `sql`, or `nil` (no row, or NULL).
    func integer(_ sql: String) throws(SQLiteError) -> Int64? {
        let statement = try statement(sql)
        // Reset once read: a statement left stepping would hold its read open (and make
        // a DROP TABLE on this connection fail as locked).
        defer { statement.reset() }
        guard try statement.step(), !statement.isNull(0) else { return nil }
        return statement.int64(0)
    }
}

/// A prepared statement: bind by 1-based position, step, read columns by 0-based position
/// (found by name with ``column(named:)``).
final class SQLiteStatement {
    private let pointer: OpaquePointer
    private let connection: OpaquePointer
    /// The result's columns by name, read once (a prepared statement's columns never change).
    private var columnsByName: [String: Int32]?
    /// What readers made of the statement's columns (rows' layouts), by their type, kept with
    /// the prepared statement so that columns are found by name once, not once a row.
    private var layouts: [ObjectIdentifier: AnyObject] = [:]

    /// The statement's layout of type `Layout`, made by `make` the first time.
    func layout<Layout: AnyObject>(_ make: (SQLiteStatement) throws(SQLiteError) -> Layout) throws(SQLiteError)
        -> Layout
    {
        if let found = layouts[ObjectIdentifier(Layout.self)] as? Layout { return found }
        let made = try make(self)
        layouts[ObjectIdentifier(Layout.self)] = made
        return made
    }

    /// The position of the result's column `name`; an error names a column the statement
    /// did not select (a mistake in the query that reads it).
    func column(_ name: String) throws(SQLiteError) -> Int32 {
        guard let index = column(named: name) else {
            throw SQLiteError(code: SQLITE_ERROR, message: "the statement selected no column '\(name)'")
        }
        return index
    }

    /// The position of the result's column `name` (as the query selected or aliased it).
    func column(named name: String) -> Int32? {
        if columnsByName == nil {
            var names: [String: Int32] = [:]
            for index in 0..<sqlite3_column_count(pointer) {
                if let text = sqlite3_column_name(pointer, index) { names[String(cString: text)] = index }
            }
            columnsByName = names
        }
        return columnsByName?[name]
    }

    fileprivate init(_ pointer: OpaquePointer, connection: OpaquePointer) {
        self.pointer = pointer
        self.connection = connection
    }

    fileprivate func finalize() { sqlite3_finalize(pointer) }

    func reset() {
        sqlite3_reset(pointer)
        sqlite3_clear_bindings(pointer)
    }

    func bind(_ index: Int32, _ value: Int64?) {
        if let value { sqlite3_bind_int64(pointer, index, value) } else { sqlite3_bind_null(pointer, index) }
    }

    func bind(_ index: Int32, _ value: Int?) { bind(index, value.map(Int64.init)) }

    func bind(_ index: Int32, _ value: Bool) { sqlite3_bind_int64(pointer, index, value ? 1 : 0) }

    func bind(_ index: Int32, _ value: Double) { sqlite3_bind_double(pointer, index, value) }

    func bind(_ index: Int32, _ value: String?) {
        guard let value else {
            sqlite3_bind_null(pointer, index)
            return
        }
        var text = value
        text.withUTF8 { bytes in
            _ = bytes.withMemoryRebound(to: CChar.self) { characters in
                sqlite3_bind_text(
                    pointer, index, characters.baseAddress, Int32(characters.count), overtime_sqlite_transient())
            }
        }
    }

    func bind(_ index: Int32, _ value: [UInt8]?) {
        guard let value else {
            sqlite3_bind_null(pointer, index)
            return
        }
        // A zero-length blob, not NULL: the column says "none" with NULL only.
        value.withUnsafeBytes { bytes in
            _ = sqlite3_bind_blob(
                pointer, index, bytes.baseAddress ?? UnsafeRawPointer(bitPattern: 1), Int32(bytes.count),
                overtime_sqlite_transient())
        }
    }

    /// Steps once: `true` while there is a row to read.
    @discardableResult
    func step() throws(SQLiteError) -> Bool {
        switch sqlite3_step(pointer) {
        case SQLITE_ROW: return true
        case SQLITE_DONE: return false
        case let code:
            let message = String(cString: sqlite3_errmsg(connection))
            sqlite3_reset(pointer)
            throw SQLiteError(code: code & 0xFF, message: "\(message) (in: \(String(cString: sqlite3_sql(pointer))))")
        }
    }

    /// Steps to the end (a statement without rows, or whose rows are not wanted).
    func run() throws(SQLiteError) {
        while try step() {}
    }

    func isNull(_ column: Int32) -> Bool { sqlite3_column_type(pointer, column) == SQLITE_NULL }

    func int64(_ column: Int32) -> Int64 { sqlite3_column_int64(pointer, column) }

    /// How many columns a row of it has.
    var columnCount: Int32 { sqlite3_column_count(pointer) }

    func int(_ column: Int32) -> Int { Int(sqlite3_column_int64(pointer, column)) }

    func bool(_ column: Int32) -> Bool { sqlite3_column_int64(pointer, column) != 0 }

    func optionalInt64(_ column: Int32) -> Int64? { isNull(column) ? nil : int64(column) }

    func double(_ column: Int32) -> Double { sqlite3_column_double(pointer, column) }

    func text(_ column: Int32) -> String {
        guard let text = sqlite3_column_text(pointer, column) else { return "" }
        return String(
            decoding: UnsafeBufferPointer(start: text, count: Int(sqlite3_column_bytes(pointer, column))), as: UTF8.self
        )
    }

    func optionalText(_ column: Int32) -> String? { isNull(column) ? nil : text(column) }

    /// A blob column's bytes; `nil` for NULL.
    func optionalBytes(_ column: Int32) -> [UInt8]? {
        if isNull(column) { return nil }
        let count = Int(sqlite3_column_bytes(pointer, column))
        guard count > 0, let start = sqlite3_column_blob(pointer, column) else { return [] }
        return Array(UnsafeRawBufferPointer(start: start, count: count))
    }
}

// The columns of a statement that writes many rows at once: each an array, unnested as one
// column of `v`, and the expression that writes it, kept together.

import NIOCore
import PostgresNIO

/// The arrays a batch statement unnests (`unnest(...) AS v(...)`) and what it writes of
/// each: a column's name, type and values are given once, so that the arrays, their
/// aliases and the written columns cannot fall out of step.
///
/// `$1` is the stand-in for NULL in `bigint` arrays (postgres-nio encodes arrays of
/// non-optional values only); `text` and `bytea` ones travel with a flag array instead.
struct UnnestedColumns {
    private(set) var bindings = PostgresBindings()
    private var unnested: [(alias: String, type: String)] = []
    private var written: [(column: String, expression: String)] = []

    init() {
        bindings.append(PostgresScheduleStore.none)
    }

    /// A column written as given.
    mutating func add<Element: PostgresArrayEncodable & PostgresNonThrowingEncodable>(
        _ column: String, _ type: String, _ values: [Element]
    ) {
        unnest(column, type, values)
        written.append((column, "v.\(column)"))
    }

    /// A `bigint` column that may be NULL.
    mutating func add(_ column: String, _ values: [Int64?]) {
        unnest(column, "bigint", values.map { $0 ?? PostgresScheduleStore.none })
        written.append((column, "NULLIF(v.\(column), $1)"))
    }

    /// A `text` column that may be NULL.
    mutating func add(_ column: String, _ values: [String?]) {
        unnest(column, "text", values.map { $0 ?? "" })
        unnest("has_\(column)", "boolean", values.map { $0 != nil })
        written.append((column, "CASE WHEN v.has_\(column) THEN v.\(column) END"))
    }

    /// A `bytea` column (NULL where `nil`).
    mutating func add(_ column: String, bytes values: [[UInt8]?]) {
        unnest(column, "bytea", values.map { ByteBuffer(bytes: $0 ?? []) })
        unnest("has_\(column)", "boolean", values.map { $0 != nil })
        written.append((column, "CASE WHEN v.has_\(column) THEN v.\(column) END"))
    }

    /// An array only read by the statement (`v.alias`), not written as a column.
    mutating func unnest<Element: PostgresArrayEncodable & PostgresNonThrowingEncodable>(
        _ alias: String, _ type: String, _ values: [Element]
    ) {
        bindings.append(values)
        unnested.append((alias, type))
    }

    /// A column written from `expression`, which reads `v`.
    mutating func write(_ column: String, _ expression: String) {
        written.append((column, expression))
    }

    /// `unnest($2::text[], …) AS v(identifier, …)`.
    var source: String {
        let arrays = unnested.indices.map { "$\($0 + 2)::\(unnested[$0].type)[]" }
        return "unnest(\(arrays.joined(separator: ", "))) AS v(\(unnested.map(\.alias).joined(separator: ", ")))"
    }

    /// The written columns, in the order of ``expressions``.
    var columns: String { written.map(\.column).joined(separator: ", ") }

    /// What each written column takes.
    var expressions: String { written.map(\.expression).joined(separator: ", ") }
}

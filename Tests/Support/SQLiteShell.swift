// The `sqlite3` command-line shell: a client independent of the store, to read what the
// store wrote and to write stores of other versions.

import Foundation

/// Runs `sql` on the database at `path` with the system's `sqlite3` and returns its rows,
/// each a list of columns (NULL as ""); throws with the shell's error when it fails.
package func sqliteShell(_ path: String, _ sql: String) throws -> [[String]] {
    let result = try SpawnedProcess.run("/usr/bin/sqlite3", ["-batch", "-bail", "-separator", "\t", path, sql])
    guard result.status == 0 else {
        throw CocoaError(.fileReadUnknown, userInfo: [NSLocalizedDescriptionKey: "sqlite3 \(path): \(result.errors)"])
    }
    return result.output.split(separator: "\n", omittingEmptySubsequences: true).map {
        $0.split(separator: "\t", omittingEmptySubsequences: false).map(String.init)
    }
}

// The built `overtimectl`, run as an operator would against a daemon's control socket.

import Foundation

/// Runs the built `overtimectl` with `arguments` (as `uid`, when given, through
/// `setpriv`) and returns its exit status, standard output and standard error.
package func overtimectl(_ arguments: [String], as uid: Int? = nil) throws -> (
    status: Int32, output: String, errors: String
) {
    let tool = ChildProcess.harnessURL.deletingLastPathComponent().appendingPathComponent("overtimectl").path
    let command = (uid.map { ["/usr/bin/setpriv", "--reuid=\($0)", "--regid=\($0)", "--clear-groups"] } ?? []) + [tool]
    return try SpawnedProcess.run(command[0], Array(command.dropFirst()) + arguments)
}

// Who may use the dashboard: names and their tokens, read from a file only its owner reads
// (systemd's LoadCredential= puts one in $CREDENTIALS_DIRECTORY).

import Foundation

/// The people (or programs) allowed in, each a name and a secret token. Nothing of the
/// dashboard is shown without one; actions are recorded with the name.
public struct DashboardCredentials: Sendable {
    /// A token this short is refused: it could be guessed.
    public static let minimumTokenLength = 16

    private let users: [(name: String, token: [UInt8])]

    /// The names, in the order given.
    public var names: [String] { users.map(\.name) }

    /// `users`: name and token pairs. Names are letters, digits and `.-_@`; tokens at least
    /// ``minimumTokenLength`` characters without spaces.
    public init(users: [(name: String, token: String)]) throws(DashboardCredentialsError) {
        guard !users.isEmpty else {
            throw DashboardCredentialsError("no credentials: give at least one name and token")
        }
        var seen: Set<String> = []
        for user in users {
            try Self.check(name: user.name, token: user.token, at: nil)
            guard seen.insert(user.token).inserted else {
                throw DashboardCredentialsError("two users have the same token: each needs its own")
            }
        }
        self.users = users.map { ($0.name, Array($0.token.utf8)) }
    }

    /// Reads `path`: one `name:token` per line; empty lines and lines starting with `#`
    /// are skipped. The file must be the current user's and readable by no one else
    /// (mode 0600 or 0400), as a credential is.
    public init(contentsOf path: String) throws(DashboardCredentialsError) {
        var info = stat()
        guard lstat(path, &info) == 0 else {
            throw DashboardCredentialsError("cannot read the credentials \(path): \(String(cString: strerror(errno)))")
        }
        guard info.st_mode & S_IFMT == S_IFREG else {
            throw DashboardCredentialsError("the credentials \(path) are not a regular file")
        }
        guard info.st_mode & 0o077 == 0 else {
            throw DashboardCredentialsError(
                "the credentials \(path) can be read by others (mode \(String(info.st_mode & 0o777, radix: 8))): "
                    + "chmod 600 it")
        }
        guard let text = try? String(contentsOfFile: path, encoding: .utf8) else {
            throw DashboardCredentialsError("the credentials \(path) are not UTF-8 text")
        }
        var users: [(name: String, token: String)] = []
        for (number, line) in text.split(separator: "\n", omittingEmptySubsequences: false).enumerated() {
            let trimmed = line.trimmingCharacters(in: .whitespaces)
            if trimmed.isEmpty || trimmed.hasPrefix("#") { continue }
            guard let colon = trimmed.firstIndex(of: ":") else {
                throw DashboardCredentialsError("\(path) line \(number + 1): expected name:token")
            }
            let name = String(trimmed[..<colon])
            let token = String(trimmed[trimmed.index(after: colon)...])
            try Self.check(name: name, token: token, at: "\(path) line \(number + 1)")
            users.append((name, token))
        }
        try self.init(users: users)
    }

    /// The name whose token `candidate` is, or `nil`; compared in time that does not tell
    /// how much of a token matched.
    public func user(withToken candidate: String) -> String? {
        let bytes = Array(candidate.utf8)
        var found: String?
        for user in users where Self.equalInConstantTime(user.token, bytes) { found = user.name }
        return found
    }

    static func equalInConstantTime(_ a: [UInt8], _ b: [UInt8]) -> Bool {
        guard a.count == b.count else { return false }
        var difference: UInt8 = 0
        for index in a.indices { difference |= a[index] ^ b[index] }
        return difference == 0
    }

    private static func check(name: String, token: String, at place: String?) throws(DashboardCredentialsError) {
        let prefix = place.map { $0 + ": " } ?? ""
        let allowed = Set("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789.-_@")
        guard !name.isEmpty, name.count <= 64, name.allSatisfy({ allowed.contains($0) }) else {
            throw DashboardCredentialsError("\(prefix)a name is 1 to 64 letters, digits or .-_@")
        }
        guard token.count >= minimumTokenLength, !token.contains(where: \.isWhitespace) else {
            throw DashboardCredentialsError(
                "\(prefix)the token of '\(name)' must be at least \(minimumTokenLength) characters without spaces")
        }
    }
}

/// Why credentials were refused.
public struct DashboardCredentialsError: Error, Sendable, CustomStringConvertible {
    /// What is wrong, with the file and line.
    public let message: String
    init(_ message: String) { self.message = message }
    /// The message.
    public var description: String { message }
}

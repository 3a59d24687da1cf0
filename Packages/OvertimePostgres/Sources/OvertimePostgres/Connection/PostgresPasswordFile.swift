// libpq's password file (~/.pgpass, PGPASSFILE): the password for a connection that names none.

import Foundation

/// The password file as libpq reads it: lines of `host:port:database:user:password`, `*`
/// matching anything, `\:` and `\\` escaping, `#` starting a comment; the first line that
/// matches wins. Ignored (with the reason) unless only its owner may read it.
enum PostgresPasswordFile {
    /// The password `file` holds for the connection, or `nil`; `warn` hears why a file
    /// that exists was not read.
    static func password(
        in file: String, host: String, port: Int, database: String, user: String, warn: (String) -> Void
    ) -> String? {
        var status = stat()
        guard stat(file, &status) == 0 else { return nil }
        guard status.st_mode & S_IFMT == S_IFREG else {
            warn("password file \(file) is not a plain file: not read")
            return nil
        }
        guard status.st_mode & 0o077 == 0 else {
            warn("password file \(file) has group or world access; permissions should be u=rw (0600) or less")
            return nil
        }
        guard let text = try? String(contentsOfFile: file, encoding: .utf8) else {
            warn("password file \(file) cannot be read")
            return nil
        }
        // A socket folder is matched as libpq does: by `localhost`.
        let hostField = host.hasPrefix("/") ? "localhost" : host
        let wanted = [hostField, String(port), database, user]
        for line in text.split(whereSeparator: \.isNewline) where !line.hasPrefix("#") {
            let fields = Self.fields(of: line)
            guard fields.count == 5 else { continue }
            if zip(fields.prefix(4), wanted).allSatisfy({ $0 == "*" || $0 == $1 }) { return fields[4] }
        }
        return nil
    }

    /// The colon-separated fields of `line`, their escapes undone (a `*` escaped is a
    /// field of one star, which only a literal star matches; rare enough to treat alike).
    private static func fields(of line: Substring) -> [String] {
        var fields: [String] = []
        var current = ""
        var escaped = false
        for character in line {
            if escaped {
                current.append(character)
                escaped = false
            } else if character == "\\" {
                escaped = true
            } else if character == ":" && fields.count < 4 {
                fields.append(current)
                current = ""
            } else {
                current.append(character)
            }
        }
        fields.append(current)
        return fields
    }

    /// Where libpq looks: `PGPASSFILE`, else `~/.pgpass`.
    static func path(_ variables: [String: String]) -> String? {
        if let file = variables["PGPASSFILE"], !file.isEmpty { return file }
        guard let home = variables["HOME"], !home.isEmpty else { return nil }
        return home + "/.pgpass"
    }
}

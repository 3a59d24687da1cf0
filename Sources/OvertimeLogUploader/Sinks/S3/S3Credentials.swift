// The keys S3 requests are signed with; the secret never appears in any text we print.

#if canImport(Glibc)
    import Glibc
#elseif canImport(Musl)
    import Musl
#endif

/// An access key, its secret and an optional session token (temporary credentials).
///
/// ``description`` names the access key only: the secret and the token are never
/// printed, logged or put in an error.
public struct S3Credentials: Sendable, Hashable, CustomStringConvertible {
    /// The access key ID (`AWS_ACCESS_KEY_ID`).
    public var accessKeyID: String
    /// The secret access key (`AWS_SECRET_ACCESS_KEY`).
    public var secretAccessKey: String
    /// The session token of temporary credentials (`AWS_SESSION_TOKEN`), if any.
    public var sessionToken: String?

    /// Credentials given in code.
    public init(accessKeyID: String, secretAccessKey: String, sessionToken: String? = nil) {
        self.accessKeyID = accessKeyID
        self.secretAccessKey = secretAccessKey
        self.sessionToken = sessionToken
    }

    /// The usual environment variables: `AWS_ACCESS_KEY_ID`, `AWS_SECRET_ACCESS_KEY` and,
    /// if set and not empty, `AWS_SESSION_TOKEN`.
    ///
    /// - Throws: ``S3ConfigurationError`` naming the variables that are missing or empty.
    public static func fromEnvironment() throws(S3ConfigurationError) -> S3Credentials {
        func variable(_ name: String) -> String? {
            guard let value = getenv(name) else { return nil }
            let text = String(cString: value)
            return text.isEmpty ? nil : text
        }
        let key = variable("AWS_ACCESS_KEY_ID")
        let secret = variable("AWS_SECRET_ACCESS_KEY")
        guard let key, let secret else {
            let missing = [key == nil ? "AWS_ACCESS_KEY_ID" : nil, secret == nil ? "AWS_SECRET_ACCESS_KEY" : nil]
            throw S3ConfigurationError(
                "S3 credentials come from the environment; \(missing.compactMap { $0 }.joined(separator: " and ")) "
                    + "not set")
        }
        return S3Credentials(accessKeyID: key, secretAccessKey: secret, sessionToken: variable("AWS_SESSION_TOKEN"))
    }

    /// The access key ID, and whether a session token is present; never the secret.
    public var description: String {
        "access key \(accessKeyID)" + (sessionToken == nil ? "" : " with a session token")
    }
}

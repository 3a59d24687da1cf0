// TLS to the fleet's database, named as libpq names it (sslmode, sslrootcert, sslcert,
// sslkey), so a URL or environment that works for psql works here, or fails clearly.

import Foundation
import NIOSSL
import PostgresNIO

/// How a connection to the database checks the server and proves who the client is, in
/// libpq's terms: its `sslmode` and the files beside it.
///
/// ```swift
/// var database = PostgresScheduleConfiguration(host: "db.internal", username: "worker")
/// try database.secure(PostgresTLSOptions(mode: .verifyFull, rootCertificate: "/etc/overtime/db-ca.pem"))
/// ```
///
/// The same options come from a URL (`?sslmode=verify-full&sslrootcert=/etc/overtime/db-ca.pem`)
/// and from the environment (`PGSSLMODE`, `PGSSLROOTCERT`, `PGSSLCERT`, `PGSSLKEY`).
public struct PostgresTLSOptions: Sendable, Hashable {
    /// libpq's `sslmode`: whether TLS is used and what of the server's certificate is checked.
    public struct Mode: Sendable, Hashable, CustomStringConvertible {
        enum Kind: String, Sendable, Hashable, CaseIterable {
            case disable
            case prefer
            case require
            case verifyCA = "verify-ca"
            case verifyFull = "verify-full"
        }
        let kind: Kind

        /// No TLS.
        public static let disable = Mode(kind: .disable)
        /// TLS when the server offers it, the connection in the clear otherwise; the
        /// server's certificate is checked against ``PostgresTLSOptions/rootCertificate``
        /// when one is named, not otherwise.
        public static let prefer = Mode(kind: .prefer)
        /// TLS or no connection; the server's certificate is checked against
        /// ``PostgresTLSOptions/rootCertificate`` when one is named (as `verify-ca`), not
        /// otherwise.
        public static let require = Mode(kind: .require)
        /// TLS, and a server certificate signed by the root certificate; its name is not
        /// compared with the host's.
        public static let verifyCA = Mode(kind: .verifyCA)
        /// TLS, a server certificate signed by the root certificate, and issued for the
        /// host connected to (its name or address).
        public static let verifyFull = Mode(kind: .verifyFull)

        /// The mode libpq's `sslmode` names: `disable`, `prefer`, `require`, `verify-ca` or
        /// `verify-full`; `nil` for anything else (libpq's `allow` included: it tries the
        /// clear connection first, which postgres-nio does not offer).
        public init?(_ name: String) {
            guard let kind = Kind(rawValue: name) else { return nil }
            self.kind = kind
        }

        private init(kind: Kind) {
            self.kind = kind
        }

        /// The `sslmode` name.
        public var description: String { kind.rawValue }
    }

    /// Whether TLS is used and what is checked.
    public var mode: Mode
    /// A PEM file of the certificates that sign the server's (libpq's `sslrootcert`), or
    /// `system` for the system's trusted roots. Needed for `verify-ca` and `verify-full`:
    /// without it, `~/.postgresql/root.crt` is used as libpq would, and its absence is an
    /// error.
    public var rootCertificate: String?
    /// A PEM file of this client's certificate (libpq's `sslcert`), for a server that
    /// authenticates clients by certificate; named with ``privateKey``.
    public var certificate: String?
    /// The PEM file of the certificate's private key (libpq's `sslkey`).
    public var privateKey: String?

    /// Options of `mode` with the files named.
    public init(mode: Mode, rootCertificate: String? = nil, certificate: String? = nil, privateKey: String? = nil) {
        self.mode = mode
        self.rootCertificate = rootCertificate
        self.certificate = certificate
        self.privateKey = privateKey
    }

    /// postgres-nio's TLS setting for these options, its files read now.
    ///
    /// - Throws: ``PostgresScheduleConfigurationError`` naming a file that cannot be read,
    ///   a certificate without its key (or a key without its certificate), or a verifying
    ///   mode with no root certificate.
    func connectionTLS(home: String?) throws(PostgresScheduleConfigurationError) -> PostgresConnection.Configuration.TLS
    {
        if mode.kind == .disable {
            guard certificate == nil, privateKey == nil, rootCertificate == nil else {
                throw PostgresScheduleConfigurationError(
                    "sslmode 'disable' uses no TLS, yet certificate files are named: drop them or choose a mode")
            }
            return .disable
        }
        var tls = TLSConfiguration.makeClientConfiguration()
        var roots = rootCertificate
        if roots == nil, mode.kind == .verifyCA || mode.kind == .verifyFull {
            let fallback = (home ?? NSHomeDirectory()) + "/.postgresql/root.crt"
            guard FileManager.default.fileExists(atPath: fallback) else {
                throw PostgresScheduleConfigurationError(
                    "sslmode '\(mode)' checks the server's certificate, but no root certificate is named"
                        + " (sslrootcert, PGSSLROOTCERT) and \(fallback) does not exist;"
                        + " name one, or 'system' for the system's trusted roots")
            }
            roots = fallback
        }
        // As libpq: a root certificate, named or found, is always checked against; the
        // host's name only in verify-full.
        if let roots {
            tls.certificateVerification = mode.kind == .verifyFull ? .fullVerification : .noHostnameVerification
            tls.trustRoots = roots == "system" ? .default : .certificates(try Self.certificates(roots, "sslrootcert"))
        } else {
            tls.certificateVerification = .none
        }
        switch (certificate, privateKey) {
        case (nil, nil):
            break
        case (let certificate?, let privateKey?):
            tls.certificateChain = try Self.certificates(certificate, "sslcert").map { .certificate($0) }
            do {
                tls.privateKey = .privateKey(try NIOSSLPrivateKey(file: privateKey, format: .pem))
            } catch {
                throw Self.unreadable(privateKey, "sslkey", error)
            }
        case (nil, _?):
            throw PostgresScheduleConfigurationError(
                "a private key (sslkey) is named without its certificate (sslcert)")
        case (_?, nil):
            throw PostgresScheduleConfigurationError(
                "a certificate (sslcert) is named without its private key (sslkey)")
        }
        let context: NIOSSLContext
        do {
            context = try NIOSSLContext(configuration: tls)
        } catch {
            throw PostgresScheduleConfigurationError(
                "the TLS settings cannot be used (does the key \(privateKey ?? "") match the certificate?): \(error)")
        }
        return mode.kind == .prefer ? .prefer(context) : .require(context)
    }

    private static func certificates(_ path: String, _ parameter: String) throws(PostgresScheduleConfigurationError)
        -> [NIOSSLCertificate]
    {
        let certificates: [NIOSSLCertificate]
        do {
            certificates = try NIOSSLCertificate.fromPEMFile(path)
        } catch {
            throw unreadable(path, parameter, error)
        }
        guard !certificates.isEmpty else {
            throw PostgresScheduleConfigurationError("\(parameter) '\(path)' holds no PEM certificate")
        }
        return certificates
    }

    private static func unreadable(_ path: String, _ parameter: String, _ error: any Error)
        -> PostgresScheduleConfigurationError
    {
        guard FileManager.default.isReadableFile(atPath: path) else {
            return PostgresScheduleConfigurationError("\(parameter) '\(path)' does not exist or cannot be read")
        }
        return PostgresScheduleConfigurationError("\(parameter) '\(path)' is not a PEM file this can read: \(error)")
    }
}

extension PostgresScheduleConfiguration {
    /// Secures the connection as `options` say; the certificate files are read now.
    ///
    /// - Throws: ``PostgresScheduleConfigurationError`` naming a file that cannot be read
    ///   or options that do not go together; the configuration is left as it was.
    public mutating func secure(_ options: PostgresTLSOptions) throws(PostgresScheduleConfigurationError) {
        tls = try options.connectionTLS(home: nil)
    }

    /// The TLS options libpq's parameters name (`sslmode` and its files), `nil` when none is.
    static func tlsOptions(_ value: (String) -> String?, naming names: (String) -> String)
        throws(PostgresScheduleConfigurationError) -> PostgresTLSOptions?
    {
        let files = (value("sslrootcert"), value("sslcert"), value("sslkey"))
        guard let modeName = value("sslmode") else {
            guard files == (nil, nil, nil) else {
                // Files named without a mode most likely mean a checked connection was
                // meant, which libpq's default (prefer) gives up for a server without TLS.
                throw PostgresScheduleConfigurationError(
                    "certificate files are named without \(names("sslmode")): name the mode (require, verify-ca,"
                        + " verify-full)")
            }
            return nil
        }
        guard let mode = PostgresTLSOptions.Mode(modeName) else {
            let known = PostgresTLSOptions.Mode.Kind.allCases.map(\.rawValue).joined(separator: ", ")
            throw PostgresScheduleConfigurationError("\(names("sslmode")) '\(modeName)' is not one of \(known)")
        }
        return PostgresTLSOptions(mode: mode, rootCertificate: files.0, certificate: files.1, privateKey: files.2)
    }
}

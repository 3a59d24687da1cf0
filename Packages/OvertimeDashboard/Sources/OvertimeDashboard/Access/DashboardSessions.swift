// Signed-in browsers: a random session ID in a cookie, and the CSRF token its forms carry.

import NIOConcurrencyHelpers

#if canImport(Glibc)
    import Glibc
#endif

/// One signed-in browser.
struct DashboardSession: Sendable {
    let user: String
    /// Carried by every form the session's pages hold; an action without it is refused.
    let csrfToken: String
    let expires: ContinuousClock.Instant
}

/// The sessions, in memory (a restart signs everyone out), each ending after ``lifetime``.
final class DashboardSessions: Sendable {
    static let lifetime: Duration = .seconds(12 * 3600)
    /// The most sessions kept: a client signing in without end cannot fill memory.
    static let maximum = 10_000

    private let sessions = NIOLockedValueBox([String: DashboardSession]())

    /// A new session for `user`: its ID for the cookie.
    func open(for user: String) -> String {
        let id = Self.randomToken()
        let session = DashboardSession(
            user: user, csrfToken: Self.randomToken(), expires: .now + Self.lifetime)
        sessions.withLockedValue { sessions in
            let now = ContinuousClock.now
            if sessions.count >= Self.maximum {
                sessions = sessions.filter { $0.value.expires > now }
                if sessions.count >= Self.maximum,
                    let oldest = sessions.min(by: { $0.value.expires < $1.value.expires })
                {
                    sessions[oldest.key] = nil
                }
            }
            sessions[id] = session
        }
        return id
    }

    /// The session of `id`, unless it ended.
    func session(_ id: String) -> DashboardSession? {
        sessions.withLockedValue { sessions in
            guard let session = sessions[id] else { return nil }
            guard session.expires > .now else {
                sessions[id] = nil
                return nil
            }
            return session
        }
    }

    func close(_ id: String) {
        _ = sessions.withLockedValue { $0.removeValue(forKey: id) }
    }

    /// 32 random bytes from the kernel, as hex.
    static func randomToken() -> String {
        var generator = SystemRandomNumberGenerator()
        return (0..<32).map { _ in
            let byte = UInt8.random(in: 0...255, using: &generator)
            return String(byte, radix: 16).count == 1 ? "0" + String(byte, radix: 16) : String(byte, radix: 16)
        }.joined()
    }
}

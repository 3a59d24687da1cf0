// The names a dashboard answers to. A page of another site whose name was made to point at
// this machine (DNS rebinding) reaches the dashboard with that name in its Host header: it
// is answered with a refusal. An address is no name (it cannot be rebound), nor is localhost.

#if canImport(Glibc)
    import Glibc
#endif

enum HostCheck {
    /// Whether a request with `authority` (its Host header: a name or address, maybe a port)
    /// may be answered, given the names the configuration allows.
    static func allows(_ authority: String?, allowedHosts: [String]) -> Bool {
        guard let authority, !authority.isEmpty else { return true }  // HTTP/1.0: no browser
        let host: Substring
        if authority.hasPrefix("[") {
            guard let end = authority.firstIndex(of: "]") else { return false }
            host = authority[authority.index(after: authority.startIndex)..<end]
            return isAddress(String(host), family: AF_INET6)
        }
        host = authority.split(separator: ":", maxSplits: 1, omittingEmptySubsequences: false)[0]
        let name = host.lowercased()
        if name == "localhost" || isAddress(name, family: AF_INET) { return true }
        return allowedHosts.contains { $0.lowercased() == name }
    }

    private static func isAddress(_ text: String, family: Int32) -> Bool {
        var bytes = (UInt64(0), UInt64(0))
        return withUnsafeMutableBytes(of: &bytes) { inet_pton(family, text, $0.baseAddress) == 1 }
    }
}

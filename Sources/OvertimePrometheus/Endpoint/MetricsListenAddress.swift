// Where GET /metrics listens: an IP address and a port, parsed from `ADDR:PORT`.

import CLibUV

/// Where ``PrometheusExporter/serve(on:listeningAt:)`` listens for scrapes: an IP address
/// and a TCP port.
///
/// Parsed from what an operator types: `9464` (loopback, `127.0.0.1:9464`),
/// `127.0.0.1:9464`, `0.0.0.0:9464` (every IPv4 interface), `[::1]:9464`, `[::]:9464`,
/// `localhost:9464`. Port 0 takes a free port (``MetricsEndpoint/address`` says which).
/// A host name other than `localhost` is refused: the address is bound before the runtime
/// starts, without asking a resolver.
public struct MetricsListenAddress: Sendable, Hashable, CustomStringConvertible {
    /// The IP address, as typed (`127.0.0.1`, `::1`).
    public let host: String
    /// The TCP port; 0 takes a free one.
    public let port: UInt16

    /// Loopback at `port`: only this machine can scrape it.
    public static func loopback(port: UInt16) -> MetricsListenAddress {
        MetricsListenAddress(checkedHost: "127.0.0.1", port: port)
    }

    /// `host` (an IPv4 or IPv6 address, or `localhost`) at `port`.
    ///
    /// - Throws: ``MetricsExportError`` with code `invalidAddress` when `host` is not an IP
    ///   address.
    public init(host: String, port: UInt16) throws {
        let host = host == "localhost" ? "127.0.0.1" : host
        guard Self.family(of: host) != nil else {
            throw MetricsExportError(
                .invalidAddress,
                "'\(host)' is not an IP address (give one, such as 127.0.0.1, 0.0.0.0 or ::1; host names are not resolved)"
            )
        }
        self.init(checkedHost: host, port: port)
    }

    /// Parses `PORT`, `ADDR:PORT` or `[IPv6]:PORT`.
    ///
    /// - Throws: ``MetricsExportError`` with code `invalidAddress`, saying what is wrong.
    public init(parsing text: String) throws {
        let portText: Substring
        let host: String
        if !text.isEmpty, text.allSatisfy(\.isASCIIDigit) {
            host = "127.0.0.1"
            portText = Substring(text)
        } else if text.hasPrefix("[") {
            guard let close = text.firstIndex(of: "]"), text[text.index(after: close)...].hasPrefix(":") else {
                throw MetricsExportError(.invalidAddress, "'\(text)': expected [IPv6]:PORT, such as [::1]:9464")
            }
            host = String(text[text.index(after: text.startIndex)..<close])
            portText = text[text.index(close, offsetBy: 2)...]
        } else {
            guard let colon = text.lastIndex(of: ":"), !text[..<colon].contains(":") else {
                throw MetricsExportError(
                    .invalidAddress, "'\(text)': expected ADDR:PORT (such as 127.0.0.1:9464), PORT, or [IPv6]:PORT")
            }
            host = String(text[..<colon])
            portText = text[text.index(after: colon)...]
        }
        guard !portText.isEmpty, portText.allSatisfy(\.isASCIIDigit), let port = UInt16(portText) else {
            throw MetricsExportError(.invalidAddress, "'\(text)': the port must be a number from 0 to 65535")
        }
        try self.init(host: host, port: port)
    }

    private init(checkedHost: String, port: UInt16) {
        self.host = checkedHost
        self.port = port
    }

    /// `127.0.0.1:9464`, `[::1]:9464`.
    public var description: String {
        host.contains(":") ? "[\(host)]:\(port)" : "\(host):\(port)"
    }

    /// `AF_INET` or `AF_INET6` for an address libuv reads, else `nil`.
    static func family(of host: String) -> Int32? {
        var bytes = (UInt64(0), UInt64(0))
        return withUnsafeMutableBytes(of: &bytes) { raw in
            if uv_inet_pton(AF_INET, host, raw.baseAddress) == 0 { return AF_INET }
            if uv_inet_pton(AF_INET6, host, raw.baseAddress) == 0 { return AF_INET6 }
            return nil
        }
    }
}

extension Character {
    fileprivate var isASCIIDigit: Bool { isASCII && isNumber }
}

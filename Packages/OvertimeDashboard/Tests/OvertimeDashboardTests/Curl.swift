// HTTP as a client outside the dashboard sends it: curl, one request each.

import Foundation

/// One answer: the status, the headers (names lowercased), the body.
struct Answer {
    let status: Int
    let headers: [String: String]
    let body: String
}

enum Curl {
    /// `method` `url` with `form` fields (a POST's body), a cookie jar file, a bearer token,
    /// and extra headers; redirects are not followed. `updatingJar: false` only reads the
    /// jar: curl (7.88) truncates the jar before it writes the new one beside it, so another
    /// curl reading it meanwhile sends no cookie — requests made at once must not update it.
    static func post(
        _ url: String, form: [String: String] = [:], jar: String? = nil, updatingJar: Bool = true,
        bearer: String? = nil, headers: [String] = []
    ) throws -> Answer {
        try request(
            url, method: "POST", form: form, jar: jar, updatingJar: updatingJar, bearer: bearer, headers: headers)
    }

    static func request(
        _ url: String, method: String = "GET", form: [String: String]? = nil, jar: String? = nil,
        updatingJar: Bool = true, bearer: String? = nil, headers: [String] = []
    ) throws -> Answer {
        var arguments = ["-s", "-i", "-X", method, "--max-time", "20"]
        if let jar { arguments += ["-b", jar] + (updatingJar ? ["-c", jar] : []) }
        if let bearer { arguments += ["-H", "Authorization: Bearer \(bearer)"] }
        for header in headers { arguments += ["-H", header] }
        if let form {
            if form.isEmpty { arguments += ["--data", ""] }
            for (name, value) in form.sorted(by: { $0.key < $1.key }) {
                arguments += ["--data-urlencode", "\(name)=\(value)"]
            }
        }
        arguments.append(url)
        let process = Process()
        process.executableURL = URL(fileURLWithPath: "/usr/bin/curl")
        process.arguments = arguments
        let pipe = Pipe()
        process.standardOutput = pipe
        try process.run()
        let data = pipe.fileHandleForReading.readDataToEndOfFile()
        process.waitUntilExit()
        let text = String(decoding: data, as: UTF8.self)
        guard let split = text.range(of: "\r\n\r\n") else { return Answer(status: 0, headers: [:], body: text) }
        let head = text[..<split.lowerBound].components(separatedBy: "\r\n")
        var headers: [String: String] = [:]
        for line in head.dropFirst() {
            guard let colon = line.firstIndex(of: ":") else { continue }
            headers[line[..<colon].lowercased()] = line[line.index(after: colon)...].trimmingCharacters(
                in: .whitespaces)
        }
        let status = Int(head.first?.split(separator: " ").dropFirst().first ?? "") ?? 0
        return Answer(status: status, headers: headers, body: String(text[split.upperBound...]))
    }

    /// Signs in with `token` into a new cookie jar; returns the jar's path.
    static func signIn(_ base: String, token: String, folder: String) throws -> String {
        let jar = folder + "/jar-\(UUID().uuidString)"
        _ = try post(base + "/login", form: ["token": token], jar: jar)
        return jar
    }

    /// Does `url`'s action as a browser does: reads its confirmation page, posts its form
    /// (the CSRF token and the confirmation's ticket), and reads the page the post redirects
    /// to. The post's answer, and the outcome's page (nil when the post did not redirect).
    static func confirm(_ url: String, jar: String) throws -> (post: Answer, outcome: Answer?) {
        let page = try request(url, jar: jar)
        var form: [String: String] = [:]
        form["csrf"] = csrf(in: page.body)
        form["ticket"] = ticket(in: page.body)
        let post = try post(url, form: form, jar: jar)
        guard post.status == 303, let location = post.headers["location"] else { return (post, nil) }
        return (post, try request(origin(of: url) + location, jar: jar))
    }

    /// `http://host:port` of `url`.
    static func origin(of url: String) -> String {
        let afterScheme = url.range(of: "://").map { url[$0.upperBound...] } ?? url[...]
        let host = afterScheme.prefix { $0 != "/" }
        return String(url[..<host.endIndex])
    }

    /// The ticket a confirmation page's form carries.
    static func ticket(in body: String) -> String? {
        guard let range = body.range(of: #"name="ticket" value=""#) else { return nil }
        return String(body[range.upperBound...].prefix { $0 != "\"" })
    }

    /// The CSRF token a signed-in page carries.
    static func csrf(in body: String) -> String? {
        guard let range = body.range(of: #"name="csrf" value=""#) else { return nil }
        let rest = body[range.upperBound...]
        return String(rest.prefix { $0 != "\"" })
    }
}

/// Runs `body`, which blocks (curl, a process), on a thread of its own: the cooperative
/// threads stay free for a server in this process that answers it.
func onOwnThread<T: Sendable>(_ body: @escaping @Sendable () throws -> T) async throws -> T {
    try await withCheckedThrowingContinuation { continuation in
        Thread.detachNewThread { continuation.resume(with: Result { try body() }) }
    }
}

/// A client of the live feed on a socket of its own: it reads what comes, or holds the
/// stream open and reads nothing.
final class EventStreamClient {
    let fd: Int32
    private var received: [UInt8] = []

    init(port: Int, token: String) throws {
        fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        address.sin_port = UInt16(port).bigEndian
        let connected = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                connect(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size))
            }
        }
        guard connected == 0 else {
            close(fd)
            throw DashboardUnderTest.Failure("cannot connect to 127.0.0.1:\(port)")
        }
        let request = "GET /events HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer \(token)\r\n\r\n"
        _ = request.withCString { send(fd, $0, strlen($0), Int32(MSG_NOSIGNAL)) }
    }

    deinit { close(fd) }

    /// Whether `marker` came within `seconds`.
    func read(until marker: String, seconds: Double = 10) -> Bool {
        let deadline = Date().addingTimeInterval(seconds)
        var buffer = [UInt8](repeating: 0, count: 4096)
        while Date() < deadline {
            if received.firstRange(of: Array(marker.utf8)) != nil { return true }
            var descriptor = pollfd(fd: fd, events: Int16(POLLIN), revents: 0)
            guard poll(&descriptor, 1, 50) > 0 else { continue }
            let count = recv(fd, &buffer, buffer.count, 0)
            if count <= 0 { break }
            received += buffer[..<count]
        }
        return received.firstRange(of: Array(marker.utf8)) != nil
    }
}

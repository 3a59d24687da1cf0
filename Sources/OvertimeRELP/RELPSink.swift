// Syslog delivery with application-level acknowledgements: RELP through librelp.

import CLibRelp
import Overtime
import OvertimeLogUploader
import OvertimeSupport

#if canImport(Glibc)
    import Glibc
#endif

/// Sends each record as an RFC 5424 message over **RELP** (rsyslog's Reliable Event
/// Logging Protocol, `imrelp` on the collector), through librelp. A segment counts as
/// stored only when the collector acknowledged every message of it.
///
/// How that is known: librelp keeps the messages it sent until their `rsp` arrives but
/// does not report individual acknowledgements; its graceful close waits for the close
/// command's response, which a RELP server sends only after answering every command
/// before it. So each segment is sent in a session of its own — open, every message,
/// close — and is stored when every send succeeded and the session closed without an
/// error (librelp reports any break through its error callback). A collector killed with
/// -9 mid-segment never answers the close: the segment is sent again, whole; the messages
/// it had already processed arrive twice, identified by their stream and sequence in the
/// structured data. With the collector writing each message before acknowledging it
/// (rsyslog: a `Direct` queue on the ruleset, see README), nothing acknowledged is lost.
///
/// Blocking librelp calls run on a queue of their own; cancellation (expiration) makes
/// librelp's waits return at once.
public final class RELPSink: LogSink {
    /// The collector's host.
    public let host: String
    /// The collector's RELP port.
    public let port: Int
    /// APP-NAME in every message.
    public let appName: String
    /// How long librelp waits for an answer before the session counts as broken.
    public let timeout: Duration
    private let hostname = SyslogMessage.hostname
    private let queue = SerialWorkQueue(name: "overtime-relp")

    /// Sends to `host:port` as `appName`.
    public init(host: String, port: Int, appName: String = "overtime", timeout: Duration = .seconds(10)) {
        self.host = host
        self.port = port
        self.appName = appName
        self.timeout = timeout
    }

    /// `relp://host:port`.
    public var description: String { "relp://\(host):\(port)" }

    /// Why librelp cannot be loaded (it is loaded when the first session needs it, so a
    /// program that never sends RELP does not load it nor its TLS libraries), or `nil`
    /// once it is. A program may ask at start to fail early; until it loads, every
    /// upload is retried.
    public static var librelpUnavailable: String? { librelpLoadFailure }

    private static let librelpLoadFailure: String? = {
        var error = [CChar](repeating: 0, count: 256)
        guard overtime_relp_load(&error, error.count) != 0 else { return nil }
        return String(decoding: error.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self)
    }()

    /// Sends every record of the segment in one RELP session; returns once all are acknowledged.
    public func store(_ segment: SealedSegment) async throws(SinkError) {
        let messages = try SyslogMessage.messages(of: segment, hostname: hostname, appName: appName)
        let stop = UnsafeMutablePointer<Int32>.allocate(capacity: 1)
        stop.initialize(to: 0)
        defer { stop.deallocate() }
        let stopFlag = StopFlag(stop)
        try await runBlockingSinkWork(on: queue) { [self] _ in
            send(messages, stop: stopFlag)
        } onCancel: {
            stopFlag.raise()
        }
    }

    /// One session: connect, send all, close; any error reported by librelp fails it.
    ///
    /// librelp writes with a plain `send` (no `MSG_NOSIGNAL`): a collector that resets the
    /// connection would raise SIGPIPE, whose default ends the whole process. The session
    /// runs with SIGPIPE blocked on this thread, and one raised meanwhile is consumed.
    private func send(_ messages: [String], stop: StopFlag) -> Result<Void, SinkError> {
        withBrokenPipeSignalSuppressed { session(messages, stop: stop) }
    }

    private func session(_ messages: [String], stop: StopFlag) -> Result<Void, SinkError> {
        if let unavailable = Self.librelpUnavailable { return .failure(.retryable(unavailable, retryAfter: nil)) }
        let errors = ErrorLog()
        var engine: OpaquePointer?
        guard overtime_relp_engine_construct(&engine) == RELP_RET_OK, let engine else {
            return .failure(.retryable("librelp: cannot construct an engine", retryAfter: nil))
        }
        defer {
            var owned: OpaquePointer? = engine
            overtime_relp_engine_destruct(&owned)
        }
        overtime_relp_engine_silence(engine)
        var syslogCommand = Array("syslog".utf8CString).map { UInt8(bitPattern: $0) }
        overtime_relp_engine_set_enable_cmd(engine, &syslogCommand, eRelpCmdState_Required)
        overtime_relp_engine_set_shutdown_immediate(engine, stop.pointer)
        overtime_relp_engine_set_on_error(engine) { user, _, message, code in
            guard let user else { return }
            Unmanaged<ErrorLog>.fromOpaque(user).takeUnretainedValue()
                .add(message.map { String(cString: $0) } ?? "error", code: code)
        }
        var client: OpaquePointer?
        guard overtime_relp_engine_client_construct(engine, &client) == RELP_RET_OK, var client else {
            return .failure(.retryable("librelp: cannot construct a client", retryAfter: nil))
        }
        var destroyed = false
        defer {
            if !destroyed {
                var owned: OpaquePointer? = client
                overtime_relp_engine_client_destruct(engine, &owned)
            }
        }
        let seconds = UInt32(max(1, timeout.components.seconds))
        overtime_relp_client_set_timeout(client, seconds)
        overtime_relp_client_set_connect_timeout(client, Int32(seconds))
        overtime_relp_client_set_user_pointer(client, Unmanaged.passUnretained(errors).toOpaque())
        let connected = String(port).withCString { port in
            host.withCString { host in
                overtime_relp_client_connect(
                    client, AF_UNSPEC,
                    UnsafeMutablePointer(mutating: port).withMemoryRebound(to: UInt8.self, capacity: 1) { $0 },
                    UnsafeMutablePointer(mutating: host).withMemoryRebound(to: UInt8.self, capacity: 1) { $0 })
            }
        }
        if stop.isRaised { return .failure(.cancelled) }
        guard connected == RELP_RET_OK else {
            return .failure(
                .retryable("RELP connect to \(host):\(port): \(errors.summary(code: connected))", retryAfter: nil))
        }
        // No relpCltHintBurstBegin: it corks the socket, and a corked window waits on the
        // kernel's 200 ms cork timeout for its acknowledgements (4,000 lines took 6.2 s, 0.17 s without).
        for message in messages {
            var bytes = Array(message.utf8)
            let sent = bytes.withUnsafeMutableBufferPointer {
                overtime_relp_client_send_syslog(client, $0.baseAddress, $0.count)
            }
            if stop.isRaised { return .failure(.cancelled) }
            guard sent == RELP_RET_OK else {
                return .failure(
                    .retryable("RELP send to \(host):\(port): \(errors.summary(code: sent))", retryAfter: nil))
            }
        }
        // The graceful close waits for the close response: every message before it is answered.
        var owned: OpaquePointer? = client
        overtime_relp_engine_client_destruct(engine, &owned)
        destroyed = true
        client = engine  // not used again
        _ = client
        if stop.isRaised { return .failure(.cancelled) }
        if let problem = errors.first {
            return .failure(
                .retryable(
                    "RELP session to \(host):\(port) broke before every message was acknowledged: \(problem)",
                    retryAfter: nil))
        }
        return .success(())
    }
}

/// The flag librelp's waits check (`relpEngineSetShutdownImmdtPtr`), raised on cancellation.
private final class StopFlag: @unchecked Sendable {  // one int, written once, read by librelp
    let pointer: UnsafeMutablePointer<Int32>

    init(_ pointer: UnsafeMutablePointer<Int32>) {
        self.pointer = pointer
    }

    var isRaised: Bool { pointer.pointee != 0 }
    func raise() { pointer.pointee = 1 }
}

/// What librelp's error callback reported during one session.
private final class ErrorLog: @unchecked Sendable {  // used on the sink's queue only
    private(set) var messages: [String] = []

    func add(_ message: String, code: Int32) { messages.append("\(message) (librelp \(code))") }
    var first: String? { messages.first }
    func summary(code: Int32) -> String { messages.first ?? "librelp error \(code)" }
}

/// Runs `body` with SIGPIPE blocked on the calling thread; a SIGPIPE the body raised is
/// taken off the thread before the mask is restored, so it is never delivered.
private func withBrokenPipeSignalSuppressed<T>(_ body: () -> T) -> T {
    var brokenPipe = sigset_t()
    sigemptyset(&brokenPipe)
    sigaddset(&brokenPipe, SIGPIPE)
    var previous = sigset_t()
    pthread_sigmask(SIG_BLOCK, &brokenPipe, &previous)
    defer {
        var pending = sigset_t()
        sigpending(&pending)
        if sigismember(&pending, SIGPIPE) == 1 {
            var immediately = timespec()
            _ = sigtimedwait(&brokenPipe, nil, &immediately)
        }
        pthread_sigmask(SIG_SETMASK, &previous, nil)
    }
    return body()
}

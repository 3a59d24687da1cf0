// Live updates: server-sent events that say when the schedule changed, so an open page
// reads itself again. A SQLite schedule is watched through its change mark (SQLite's
// data_version moves with every commit its owner makes).

import HTTPTypes
import Hummingbird
import NIOConcurrencyHelpers
import NIOPosix
import OvertimeScheduler

/// Streams `change` events to each open page, at most ``maximumListeners`` at once.
final class ChangeFeed: Sendable {
    static let maximumListeners = 64
    /// A comment line this often keeps proxies from closing a quiet stream, and finds
    /// clients that left.
    static let keepAliveInterval: Duration = .seconds(15)

    private let inspector: any ScheduleInspector
    private let interval: Duration
    private let listeners = NIOLockedValueBox(0)

    init(inspector: any ScheduleInspector, interval: Duration) {
        self.inspector = inspector
        self.interval = interval
    }

    /// The event stream's response. Past ``maximumListeners`` the stream says so and ends
    /// (the browser tries again later): a place is taken only once the stream is written,
    /// and given back when it ends, however it ends.
    func response(to request: Request) -> Response {
        var headers = HTTPAnswers.headers(contentType: "text/event-stream")
        headers[HTTPField.Name("X-Accel-Buffering")!] = "no"
        let body = ResponseBody { [self] writer in
            let admitted = listeners.withLockedValue { count -> Bool in
                guard count < Self.maximumListeners else { return false }
                count += 1
                return true
            }
            guard admitted else {
                try await writer.write(ByteBuffer(string: "retry: 30000\n: too many live pages are open\n\n"))
                try await writer.finish(nil)
                return
            }
            defer { listeners.withLockedValue { $0 -= 1 } }
            var last = try await mark()
            // Said at once: the browser knows the stream is open (and waits 2 s to reconnect).
            try await writer.write(ByteBuffer(string: "retry: 2000\n\n"))
            // Ended as soon as the client closes its side (a page closed, a client gone):
            // its place is free at once, not at the next write that fails.
            try? await request.body.consumeWithCancellationOnInboundClose { _ in
                var quiet = Duration.zero
                while !Task.isCancelled {
                    try await Task.sleep(for: interval)
                    let current = try await mark()
                    if current != last {
                        last = current
                        quiet = .zero
                        try await writer.write(ByteBuffer(string: "event: change\ndata: \(current)\n\n"))
                    } else {
                        quiet += interval
                        if quiet >= Self.keepAliveInterval {
                            quiet = .zero
                            try await writer.write(ByteBuffer(string: ": still here\n\n"))
                        }
                    }
                }
            }
            try? await writer.finish(nil)
        }
        return Response(status: .ok, headers: headers, body: body)
    }

    /// The schedule's change mark (the inspector's read is async: a read that waits for the
    /// owner's commit holds no thread of the server).
    private func mark() async throws -> Int64 {
        try await inspector.changeMark()
    }
}

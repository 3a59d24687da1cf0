// Live updates: server-sent events that say when the schedule changed, so an open page
// reads itself again. One watch serves every open page: the schedule's change mark (SQLite's
// data_version, a fleet's notifications) is read once per interval however many pages are
// open, and each change is handed to all of them. A page turned away, or whose stream ends,
// is told so, and says so.

import HTTPTypes
import Hummingbird
import NIOConcurrencyHelpers
import NIOPosix
import OvertimeScheduler

/// Streams `change` events to each open page, at most ``maximumListeners`` at once.
final class ChangeFeed: Sendable {
    /// The most pages served at once, by all users: each holds a connection (a descriptor)
    /// and nothing else, the watch being shared.
    static let maximumListeners = 1_000
    /// A comment line this often keeps proxies from closing a quiet stream, and finds
    /// clients that left.
    static let keepAliveInterval: Duration = .seconds(15)

    /// What the shared watch tells each open page.
    enum Event: Sendable {
        case change(Int64)
        case keepAlive
    }

    private struct Listeners {
        var continuations: [UInt64: AsyncStream<Event>.Continuation] = [:]
        var nextID: UInt64 = 0
        var watch: Task<Void, Never>?
    }

    private let inspector: any ScheduleInspector
    private let interval: Duration
    private let listeners = NIOLockedValueBox(Listeners())

    init(inspector: any ScheduleInspector, interval: Duration) {
        self.inspector = inspector
        self.interval = interval
    }

    /// The event stream's response. Past ``maximumListeners`` the stream sends a `full`
    /// event and ends (the page says its live updates are off); a place is given back when
    /// its stream ends, however it ends.
    func response(to request: Request) -> Response {
        var headers = HTTPAnswers.headers(contentType: "text/event-stream")
        headers[HTTPField.Name("X-Accel-Buffering")!] = "no"
        let body = ResponseBody { [self] writer in
            // The page's baseline, read before it is told the stream is open: a change made
            // after that is told to it (and the watch starts from it, if this page starts it).
            var seen = try await inspector.changeMark()
            guard let events = subscribe(from: seen) else {
                try await writer.write(
                    ByteBuffer(string: "retry: 30000\nevent: full\ndata: too many live pages are open\n\n"))
                try await writer.finish(nil)
                return
            }
            // Said at once: the browser knows the stream is open (and waits 2 s to reconnect).
            try await writer.write(ByteBuffer(string: "retry: 2000\n\n"))
            // Ended as soon as the client closes its side (a page closed, a client gone):
            // its place is free at once, not at the next write that fails.
            try? await request.body.consumeWithCancellationOnInboundClose { _ in
                for await event in events {
                    switch event {
                    case .change(let mark):
                        guard mark != seen else { continue }
                        seen = mark
                        try await writer.write(ByteBuffer(string: "event: change\ndata: \(mark)\n\n"))
                    case .keepAlive: try await writer.write(ByteBuffer(string: ": still here\n\n"))
                    }
                }
            }
            try? await writer.finish(nil)
        }
        return Response(status: .ok, headers: headers, body: body)
    }

    /// A place among the listeners, and the events for it; nil when every place is taken.
    /// The first listener starts the shared watch from its `baseline`; the last to leave
    /// stops it.
    private func subscribe(from baseline: Int64) -> AsyncStream<Event>? {
        let (stream, continuation) = AsyncStream.makeStream(of: Event.self, bufferingPolicy: .bufferingNewest(1))
        let admitted = listeners.withLockedValue { listeners -> Bool in
            guard listeners.continuations.count < Self.maximumListeners else { return false }
            let id = listeners.nextID
            listeners.nextID += 1
            listeners.continuations[id] = continuation
            continuation.onTermination = { [self] _ in leave(id) }
            if listeners.watch == nil { listeners.watch = Task { await watch(from: baseline) } }
            return true
        }
        return admitted ? stream : nil
    }

    private func leave(_ id: UInt64) {
        listeners.withLockedValue { listeners in
            listeners.continuations[id] = nil
            if listeners.continuations.isEmpty {
                listeners.watch?.cancel()
                listeners.watch = nil
            }
        }
    }

    /// Reads the change mark every interval while any page listens, and tells each a
    /// change. A mark that cannot be read (the store away a moment) is tried again at the
    /// next interval; the pages keep their streams.
    private func watch(from baseline: Int64) async {
        var last = baseline
        var quiet = Duration.zero
        while !Task.isCancelled {
            try? await Task.sleep(for: interval)
            guard !Task.isCancelled else { return }
            let current = try? await inspector.changeMark()
            if let current, current != last {
                last = current
                quiet = .zero
                tell(.change(current))
            } else {
                quiet += interval
                if quiet >= Self.keepAliveInterval {
                    quiet = .zero
                    tell(.keepAlive)
                }
            }
        }
    }

    private func tell(_ event: Event) {
        for continuation in listeners.withLockedValue({ Array($0.continuations.values) }) {
            continuation.yield(event)
        }
    }
}

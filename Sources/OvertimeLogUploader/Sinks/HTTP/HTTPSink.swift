import Overtime

/// Stores segments with HTTP PUT under stable names, `<base>/<stream-id>/<segment>.log`,
/// through libcurl's multi-socket interface on the runtime's own loop.
///
/// 200, 201 and 204 mean stored (nginx answers 201, then 204 for a repeat); 408, 425, 429
/// and 5xx are retried (honouring `Retry-After`); other 4xx are refused for good (the
/// segment goes to the dead-letter folder); connection errors are retried. Cancelling the
/// upload's task (expiration) aborts the transfer in flight.
///
/// nginx from Debian stores these with `dav_methods PUT; create_full_put_path on;` (its
/// worker user must own the target folder).
public final class HTTPSink: LogSink {
    /// The URL segments are stored under, without a trailing slash.
    public let baseURL: String
    private let runtime: Runtime
    private let driver: Locked<CurlMulti?> = Locked(nil)

    /// Stores under `baseURL` (`http://host:port/prefix`) using `runtime`'s loop.
    public init(baseURL: String, runtime: Runtime) {
        var base = baseURL
        while base.hasSuffix("/") { base.removeLast() }
        self.baseURL = base
        self.runtime = runtime
    }

    /// The base URL.
    public var description: String { baseURL }

    /// PUTs the segment's file; returns once the collector answered 2xx.
    public func store(_ segment: SealedSegment) async throws(SinkError) {
        let url = baseURL + "/" + segment.name
        let pending = Locked<CurlTransfer?>(nil)
        let cancelled = Locked(false)
        let runtime = self.runtime
        let outcome: Result<Void, SinkError> = await withTaskCancellationHandler {
            await withCheckedContinuation { continuation in
                let transfer = CurlTransfer(
                    url: url, path: segment.path, bytes: segment.bytes, continuation: continuation)
                if let failure = transfer.canStart {
                    transfer.finish(failure)
                    return
                }
                pending.withLock { $0 = transfer }
                runtime.execute { [self] in
                    if cancelled.withLock({ $0 }) {
                        transfer.finish(.failure(.cancelled))
                    } else {
                        multi().start(transfer)
                    }
                }
            }
        } onCancel: {
            cancelled.withLock { $0 = true }
            runtime.execute { [self] in
                if let transfer = pending.withLock({ $0 }) { multi().cancel(transfer) }
            }
        }
        try outcome.get()
    }

    /// The driver, made on first use (on the loop thread).
    private func multi() -> CurlMulti {
        driver.withLock { driver in
            if let driver { return driver }
            let made = CurlMulti(runtime: runtime)
            driver = made
            return made
        }
    }
}

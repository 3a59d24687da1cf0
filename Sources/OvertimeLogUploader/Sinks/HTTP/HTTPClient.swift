// Requests on the runtime's loop through libcurl, awaited from any task: the one HTTP path
// every HTTP-based sink shares.

import CLibCurl
import Overtime
import OvertimeSupport

/// Sends ``HTTPRequest``s through one libcurl multi handle driven by the runtime's loop
/// (made on the first request). Cancelling the awaiting task aborts the transfer in flight.
final class HTTPClient: Sendable {
    private let context: DriverContext
    private let driver: LoopBound<CurlMulti?>

    init(runtime: Runtime) {
        context = runtime.driverContext
        driver = LoopBound(nil, context: runtime.driverContext)
    }

    /// Why libcurl cannot be loaded, or `nil` once it is (loaded by the first call).
    static var libcurlUnavailable: String? { libcurlLoadFailure }

    private static let libcurlLoadFailure: String? = {
        var error = [CChar](repeating: 0, count: 256)
        guard overtime_curl_load(&error, error.count) != 0 else { return nil }
        return String(decoding: error.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self)
    }()

    /// Sends `request` and returns the answer; transport failures are retryable errors,
    /// cancellation throws ``SinkError/cancelled``.
    func perform(_ request: HTTPRequest) async throws(SinkError) -> HTTPResponse {
        if let unavailable = Self.libcurlUnavailable { throw .retryable(unavailable, retryAfter: nil) }
        let pending = Locked<CurlTransfer?>(nil)
        let cancelled = Locked(false)
        let context = self.context
        let outcome: Result<HTTPResponse, SinkError> = await withTaskCancellationHandler {
            await withCheckedContinuation { continuation in
                let queued = context.execute { [self] in
                    guard !cancelled.withLock({ $0 }) else {
                        return continuation.resume(returning: .failure(.cancelled))
                    }
                    let transfer = CurlTransfer(request, context: context, continuation: continuation)
                    if let failure = transfer.cannotStart { return transfer.finish(.failure(failure)) }
                    pending.withLock { $0 = transfer }
                    multi().start(transfer)
                }
                if !queued {
                    continuation.resume(returning: .failure(.retryable("the runtime has shut down", retryAfter: nil)))
                }
            }
        } onCancel: {
            cancelled.withLock { $0 = true }
            _ = context.execute { [self] in
                if let transfer = pending.withLock({ $0 }) { multi().cancel(transfer) }
            }
        }
        return try outcome.get()
    }

    /// The driver, made on first use. Loop thread.
    private func multi() -> CurlMulti {
        if let made = driver.value { return made }
        let made = CurlMulti(context: context)
        driver.value = made
        return made
    }
}

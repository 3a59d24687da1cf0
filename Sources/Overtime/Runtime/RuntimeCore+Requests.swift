import Logging

/// Performing what drivers ask for (a signal, a control command), on the loop thread.
extension RuntimeCore {
    /// Performs `request` in order with queued requests; `false` for an ID not open.
    func perform(_ request: RuntimeRequest, from source: String) -> Bool {
        switch request {
        case .terminate:
            // The lifecycle machine decides what a repeat means (see `LifecycleMachine`).
            _ = host.queue.enqueue(.lifecycle(.terminationFromOutside, source: source))
        case .terminateNow:
            _ = host.queue.enqueue(.lifecycle(.terminationFromOutside, source: source))
            logger.notice("\(source): terminate now: expiring every background task")
            forceExpire(nil)
        case .background: _ = host.queue.enqueue(.lifecycle(.background, source: source))
        case .foreground: _ = host.queue.enqueue(.lifecycle(.foreground, source: source))
        case .reload: _ = host.queue.enqueue(.run { [unowned self] in emitReload() })
        case .memoryWarning: _ = host.queue.enqueue(.run { [unowned self] in memoryWarning(from: source) })
        case .capBackgroundBudget(let length):
            _ = host.queue.enqueue(.run { [unowned self] in capBackgroundBudget(length, from: source) })
        case .expireAll: forceExpire(nil)
        case .expire(let id): return forceExpire(id)
        }
        return true
    }
}

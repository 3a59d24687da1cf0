import Logging

/// Performing what drivers ask for (a signal, a control command), on the loop thread.
extension RuntimeCore {
    /// Performs `request` in order with queued requests; `false` for an ID not open.
    func perform(_ request: RuntimeRequest, from source: String) -> Bool {
        switch request {
        case .terminate:
            if lifecycle.isTerminating || lifecycle.state == .terminated {
                if let first = terminationRequestedAt, now - first < configuration.repeatedTerminationGrace {
                    logger.info("\(source) again within \(configuration.repeatedTerminationGrace): the same request")
                    return true
                }
                logger.notice("\(source) again while terminating: expiring every background task now")
                forceExpire(nil)
            } else if terminationRequestedAt == nil {
                terminationRequestedAt = now
                _ = queue.enqueue(.lifecycle(.termination))
            }
        case .terminateNow:
            _ = perform(.terminate, from: source)
            logger.notice("\(source): terminate now: expiring every background task")
            forceExpire(nil)
        case .background: _ = queue.enqueue(.lifecycle(.background))
        case .foreground: _ = queue.enqueue(.lifecycle(.foreground))
        case .reload: _ = queue.enqueue(.run { [unowned self] in emitReload() })
        case .expireAll: forceExpire(nil)
        case .expire(let id): return forceExpire(id)
        }
        return true
    }
}

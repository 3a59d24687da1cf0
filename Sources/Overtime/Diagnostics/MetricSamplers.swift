// Levels read when metrics are collected, not kept up to date at every change: a spool's
// pending bytes, a scheduler's requests by state.

import OvertimeSupport

/// The process's samplers of levels: each records the gauges it owns when
/// ``sampleAll()`` is called — by a backend about to be collected (the Prometheus
/// exporter calls it before each exposition). A level sampled this way costs its owner
/// nothing between collections, where a gauge kept current would cost every append or
/// commit a lock and a store.
///
/// A sampler must be quick and must not block: it runs where the collection runs, which
/// may be the runtime's loop. Work that needs a store's answer hands it to the owner's own
/// queue and records when done (that collection then shows the previous value).
package enum MetricSamplers {
    private static let samplers = Locked<[UInt64: @Sendable () -> Void]>([:])
    private static let nextKey = Locked<UInt64>(0)

    /// Adds `sample`; it is removed when the returned registration is released.
    package static func add(_ sample: @escaping @Sendable () -> Void) -> MetricSamplerRegistration {
        let key = nextKey.withLock { key in
            key += 1
            return key
        }
        samplers.withLock { $0[key] = sample }
        return MetricSamplerRegistration(key: key)
    }

    /// Runs every sampler. From any thread.
    package static func sampleAll() {
        for sample in samplers.withLock({ Array($0.values) }) { sample() }
    }

    fileprivate static func remove(_ key: UInt64) {
        _ = samplers.withLock { $0.removeValue(forKey: key) }
    }
}

/// A sampler's place in ``MetricSamplers``: released, it goes.
package final class MetricSamplerRegistration: Sendable {
    private let key: UInt64

    fileprivate init(key: UInt64) {
        self.key = key
    }

    deinit {
        MetricSamplers.remove(key)
    }
}

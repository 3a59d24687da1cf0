import Benchmark
import BenchmarkScenarios
import Dispatch
import NIOCore
import NIOPosix
import Overtime

// package-benchmark micro-benchmarks of one begin+end pair per implementation, with
// allocation and instruction counts (`swift package benchmark` in Benchmarks/). Unlike
// the runner's scenarios nothing else is open: this isolates the per-pair cost.

let benchmarks: @Sendable () -> Void = {
    Benchmark.defaultConfiguration = .init(
        metrics: [.throughput, .wallClock, .mallocCountTotal, .instructions],
        scalingFactor: .kilo,
        maxDuration: .seconds(1)
    )

    Benchmark("overtime begin+end (loop thread)") { benchmark in
        guard let runtime = try? BenchmarkRuntime.start() else { return }
        let iterations = benchmark.scaledIterations
        let measured = Unprotected(benchmark)  // used on the loop thread while this one waits
        BenchmarkRuntime.onLoop(runtime) {
            let handler: @Sendable () -> Void = {}
            measured.value.startMeasurement()
            for _ in iterations {
                let id = runtime.beginBackgroundTask(name: "pair", expirationHandler: handler)
                runtime.endBackgroundTask(id)
            }
            measured.value.stopMeasurement()
        }
        BenchmarkRuntime.stop(runtime)
    }

    Benchmark("overtime begin+end (other thread)") { benchmark in
        guard let runtime = try? BenchmarkRuntime.start() else { return }
        let handler: @Sendable () -> Void = {}
        benchmark.startMeasurement()
        for _ in benchmark.scaledIterations {
            let id = runtime.beginBackgroundTask(name: "pair", expirationHandler: handler)
            runtime.endBackgroundTask(id)
        }
        runtime.waitForQueuedRequests()
        benchmark.stopMeasurement()
        BenchmarkRuntime.stop(runtime)
    }

    Benchmark("libuv uv_timer_start+stop") { benchmark in
        let timers = LibuvTimers(open: 0)
        benchmark.startMeasurement()
        timers.pairs(benchmark.scaledIterations.count)
        benchmark.stopMeasurement()
        timers.close()
    }

    Benchmark("nio scheduleTask+cancel") { benchmark in
        let group = MultiThreadedEventLoopGroup(numberOfThreads: 1)
        let loop = group.next()
        let iterations = benchmark.scaledIterations
        let measured = Unprotected(benchmark)  // used on the event loop while this thread waits
        try? loop.submit {
            measured.value.startMeasurement()
            for _ in iterations { loop.scheduleTask(in: .hours(1)) {}.cancel() }
            measured.value.stopMeasurement()
        }.wait()
        try? group.syncShutdownGracefully()
    }

    Benchmark("dispatch asyncAfter+cancel") { benchmark in
        let queue = DispatchQueue(label: "micro.dispatch")
        for _ in benchmark.scaledIterations {
            let item = DispatchWorkItem {}
            queue.asyncAfter(deadline: .now() + .seconds(3600), execute: item)
            item.cancel()
        }
    }

    Benchmark("Task.sleep+cancel") { benchmark in
        for _ in benchmark.scaledIterations {
            Task { try? await Task.sleep(for: .seconds(3600)) }.cancel()
        }
    }
}

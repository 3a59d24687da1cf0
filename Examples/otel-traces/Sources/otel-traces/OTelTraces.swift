// Overtime's spans, exported over OTLP/HTTP: a scheduled run (with its grant and the
// handler's own span), then the spool uploaded inside a grant (a span per segment).
//
//   OTEL_EXPORTER_OTLP_ENDPOINT=http://127.0.0.1:4318 swift run otel-traces ./otel-traces-state
//
// swift-otel reads the usual OTEL_* variables (endpoint, headers, sampler); the program
// sets the service name and exports traces only.
import Logging
import OTel
import Overtime
import OvertimeLogUploader
import OvertimeScheduler
import ServiceLifecycle
import Tracing

#if canImport(Glibc)
    import Glibc
#endif

@main
struct OTelTraces {
    static func main() async throws {
        let state = CommandLine.arguments.dropFirst().first ?? "./otel-traces-state"
        mkdir(state, 0o755)
        var configuration = OTel.Configuration.default
        configuration.serviceName = "overtime-otel-traces"
        configuration.metrics.enabled = false
        configuration.logs.enabled = false
        configuration.traces.batchSpanProcessor.scheduleDelay = .milliseconds(200)
        // Bootstraps InstrumentationSystem's tracer, which the runtime then picks up.
        let observability = try OTel.bootstrap(configuration: configuration)
        let work = Work(state: state)
        let group = ServiceGroup(
            configuration: ServiceGroupConfiguration(
                services: [
                    .init(service: observability),
                    // When the work is done, the group shuts down gracefully: the exporter
                    // sends what it still holds.
                    .init(service: work, successTerminationBehavior: .gracefullyShutdownGroup),
                ],
                logger: Logger(label: "otel-traces")))
        try await group.run()
        print("done: spans exported")
    }
}

/// The work traced: one scheduled run, then an upload.
struct Work: Service {
    let state: String

    func run() async throws {
        var runtimeConfiguration = RuntimeConfiguration()
        runtimeConfiguration.signalHandling = nil  // the service group has the signals
        let runtime = try Runtime(configuration: runtimeConfiguration)
        runtime.start()
        do {
            try await traced(runtime)
        } catch {
            runtime.requestTermination()
            await runtime.waitUntilTerminated()
            throw error
        }
        runtime.requestTermination()
        await runtime.waitUntilTerminated()
    }

    private func traced(_ runtime: Runtime) async throws {
        // A scheduled run: `overtime.scheduled_run`, its grant `overtime.grant` and the
        // handler's own span as its children.
        var schedulerConfiguration = SchedulerConfiguration(storePath: state + "/schedule.db")
        schedulerConfiguration.startSpacing = .zero
        let scheduler = try Scheduler(runtime: runtime, configuration: schedulerConfiguration)
        try scheduler.register("report") { task in
            try await withSpan("write the report") { span in
                span.attributes["report.lines"] = 3
                try await Task.sleep(for: .milliseconds(20))
            }
            print("report run \(task.runID) attempt \(task.attempt) done")
        }
        try scheduler.start()
        try await scheduler.submit(ScheduledTaskRequest(identifier: "report"), ifExists: .replace)
        for await info in scheduler.workInfoUpdates("report") where info.state.isFinished {
            print("report: \(info.state)")
            break
        }

        // The spool uploaded inside a grant: `overtime.grant` (log-upload) and one
        // `overtime.upload_segment` per segment under it.
        var spoolConfiguration = SpoolConfiguration()
        spoolConfiguration.segmentBytes = 4096
        let spool = try Spool(directory: state + "/spool", configuration: spoolConfiguration, clock: runtime.clock)
        for index in 0..<200 { try spool.append("line \(index) of the example's log, as a daemon would write it") }
        let uploader = LogUploader(runtime: runtime, spool: spool, sink: DirectorySink(root: state + "/collected"))
        uploader.start()
        uploader.drainInGrant(reason: "example")
        while uploader.isDraining || spool.pendingLines > 0 {
            try await Task.sleep(for: .milliseconds(10))
        }
        print("uploaded: \(uploader.statistics.uploadedLines) lines")
        uploader.stop()
    }
}

import Foundation
import OvertimeSupport
import OvertimeTestSupport
import Testing

@testable import OvertimeLogUploader

/// The records of every segment file under `folder` (a sink's folder, or a spool's).
private func records(under folder: String) -> [SpoolRecord] {
    guard let files = FileManager.default.enumerator(atPath: folder)?.compactMap({ $0 as? String }) else { return [] }
    return files.filter { $0.hasSuffix(".log") || $0.hasSuffix(".seg") || $0.hasSuffix(".open") }.sorted()
        .flatMap { name -> [SpoolRecord] in
            guard let bytes = FileManager.default.contents(atPath: folder + "/" + name) else { return [] }
            return SegmentFormat.parse(Array(bytes)).records
        }
}

/// Polls `check` every 200 ms until it returns `nil` (done) or `timeout` passes; returns
/// the last reason it gave (`nil` when it held).
private func until(_ timeout: Duration = .seconds(45), _ check: () -> String?) -> String? {
    let deadline = ContinuousClock.now + timeout
    var reason = check()
    while let _ = reason, ContinuousClock.now < deadline {
        usleep(200_000)
        reason = check()
    }
    return reason
}

/// What process `pid`'s descriptors point at (`3=socket:[…]`), listed when it is not
/// answering a scrape. Answering one it holds the connection and, for a moment, one of its
/// /proc files (`stat`, `fd`) at once: a listing taken then counts two beyond its rest where
/// the scraped figure counts one. Such a listing either names the /proc file or, when the
/// descriptors closed between reading the folder and reading their links, holds entries
/// without a target (`21=?`): a descriptor that is open stays readable, so either means
/// the daemon was mid-scrape.
private func restingDescriptors(of pid: Int32) throws -> [String] {
    var listing: [String] = []
    for _ in 0..<500 {
        listing = try descriptorTargets(of: pid)
        guard listing.contains(where: { $0.contains("=/proc/\(pid)/") || $0.hasSuffix("=?") }) else { break }
        usleep(10_000)
    }
    return listing
}

/// When process `pid` started, in seconds since the epoch, from /proc.
private func startTime(of pid: Int32) throws -> Double {
    let stat = try String(contentsOfFile: "/proc/\(pid)/stat", encoding: .utf8)
    let fields = stat[stat.index(after: try #require(stat.lastIndex(of: ")")))...].split(separator: " ")
    let boot = try String(contentsOfFile: "/proc/stat", encoding: .utf8).split(separator: "\n")
        .first { $0.hasPrefix("btime ") }.flatMap { Double($0.dropFirst(6)) }
    let ticks = try #require(Double(fields[19]))
    return try #require(boot) + ticks / Double(sysconf(Int32(_SC_CLK_TCK)))
}

@Suite("The shipped daemons scraped by a real Prometheus server", .timeLimit(.minutes(3)))
struct DaemonScrapeTests {
    @Test(.startsProcesses) func prometheusSeesWhatLogUploaderAndPeriodicReportDid() async throws {
        try await onOwnThread {
            let folder = TemporaryDirectory("scrape")
            defer { folder.remove() }
            let uploaderPort = try freeLoopbackPort()
            let reportPort = try freeLoopbackPort()
            let datagrams = folder.path + "/in.sock"
            let uploader = try RunningChild(
                [
                    "--spool", folder.path + "/spool", "--sink", folder.path + "/collected", "--datagram-socket",
                    datagrams, "--control-socket", folder.path + "/uploader.sock", "--progress-interval", "0",
                    "--upload-interval", "0", "--no-system-events", "--metrics-listen", "127.0.0.1:\(uploaderPort)",
                ], executable: "log-uploader")
            defer {
                uploader.send(SIGKILL)
                _ = uploader.waitForExit()
            }
            let report = try RunningChild(
                [
                    "--state-directory", folder.path + "/report", "--every", "3600", "--fail-attempts", "1",
                    "--retry-delay", "10", "--metrics-listen", "127.0.0.1:\(reportPort)",
                ], executable: "periodic-report")
            defer {
                report.send(SIGKILL)
                _ = report.waitForExit()
            }
            #expect(report.waitForLine { $0.hasPrefix("metrics at http://127.0.0.1:\(reportPort)/metrics") } != nil)
            for _ in 0..<2000 {
                guard access(datagrams, F_OK) != 0 else { break }
                usleep(5000)
            }
            let prometheus = try PrometheusServer(targets: [
                "log-uploader": uploaderPort, "periodic-report": reportPort,
            ])
            defer { prometheus.stop() }

            // Spooled, not uploaded: what waits is what the spool holds.
            try sendDatagrams((1...300).map { "line \($0)" }, to: datagrams)
            let spool = folder.path + "/spool"
            var problem = until {
                let held = records(under: spool).count
                let pending = prometheus.value("overtime_spool_pending_lines{job=\"log-uploader\"}")
                let appended = prometheus.value("overtime_spool_appended_lines_total{job=\"log-uploader\"}")
                guard held >= 300, pending == Double(held), appended == Double(held) else {
                    return "spool holds \(held); Prometheus says pending \(pending ?? -1), appended \(appended ?? -1)"
                }
                return nil
            }
            #expect(problem == nil, "\(problem ?? "")")
            let oldest = try #require(
                prometheus.value("overtime_spool_oldest_pending_timestamp_seconds{job=\"log-uploader\"}"))
            #expect(abs(oldest - Date().timeIntervalSince1970) < 60, "the oldest waiting line is from now: \(oldest)")

            // Background: uploaded inside a grant. The sink's records are the uploaded lines;
            // with what the spool still holds they are every line spooled.
            uploader.send(SIGUSR1)
            let collected = folder.path + "/collected"
            problem = until {
                records(under: collected).filter { $0.text.hasPrefix("line ") }.count == 300 ? nil : "not uploaded"
            }
            #expect(problem == nil, "the 300 lines reached the sink")
            uploader.send(SIGUSR2)
            problem = until {
                let stored = records(under: collected).count
                let held = records(under: spool).count
                let uploaded = prometheus.value(
                    "overtime_uploader_lines_total{job=\"log-uploader\",sink=\"directory\"}")
                let appended = prometheus.value("overtime_spool_appended_lines_total{job=\"log-uploader\"}")
                let segments = prometheus.value(
                    "overtime_uploader_segments_total{job=\"log-uploader\",sink=\"directory\",result=\"stored\"}")
                let files = (FileManager.default.enumerator(atPath: collected)?.compactMap { $0 as? String } ?? [])
                    .filter { $0.hasSuffix(".log") }.count
                guard uploaded == Double(stored), appended == Double(stored + held), segments == Double(files) else {
                    return
                        "sink \(stored) in \(files) files, spool \(held); Prometheus: uploaded \(uploaded ?? -1), appended \(appended ?? -1), segments \(segments ?? -1)"
                }
                return nil
            }
            #expect(problem == nil, "\(problem ?? "")")
            let durations = prometheus.value(
                "overtime_uploader_upload_duration_seconds_count{job=\"log-uploader\",sink=\"directory\"}")
            #expect((durations ?? 0) >= 1)
            #expect(prometheus.value("overtime_background_tasks_begun_total{job=\"log-uploader\"}") ?? 0 >= 1)

            // periodic-report: the first attempt fails on purpose, its retry 10 s later succeeds.
            let reports = folder.path + "/report/reports.log"
            problem = until {
                let written = ((try? String(contentsOfFile: reports, encoding: .utf8)) ?? "").split(separator: "\n")
                    .count
                let failedOnPurpose = report.output.filter { $0.contains("failing on purpose") }.count
                let runs = "overtime_scheduler_runs_total{job=\"periodic-report\",handler=\"report\""
                let succeeded = prometheus.value(runs + ",result=\"succeeded\"}")
                let failed = prometheus.value(runs + ",result=\"failed\"}")
                let enqueued = prometheus.value(
                    "overtime_scheduler_requests{job=\"periodic-report\",state=\"enqueued\"}")
                guard written == 1, failedOnPurpose == 1, succeeded == 1, failed == 1, enqueued == 1 else {
                    return
                        "reports \(written), failures said \(failedOnPurpose); Prometheus: succeeded \(succeeded ?? -1), failed \(failed ?? -1), enqueued \(enqueued ?? -1)"
                }
                return nil
            }
            #expect(problem == nil, "\(problem ?? "")")
            #expect(prometheus.value("overtime_scheduler_failed_for_good_total{job=\"periodic-report\"}") == nil)
            #expect(prometheus.value("overtime_scheduler_lateness_seconds_count{job=\"periodic-report\"}") ?? 0 >= 1)

            // The processes' own figures, against /proc, and both targets up.
            for (job, child) in [("log-uploader", uploader), ("periodic-report", report)] {
                #expect(prometheus.value("up{job=\"\(job)\"}") == 1)
                let started = try #require(prometheus.value("process_start_time_seconds{job=\"\(job)\"}"))
                #expect(abs(started - (try startTime(of: child.pid))) < 0.05, "\(job)")
                let open = try #require(prometheus.value("process_open_fds{job=\"\(job)\"}"))
                let fds = try restingDescriptors(of: child.pid)
                // The scrape's own connection is open while it is counted.
                #expect(
                    open == Double(fds.count) || open == Double(fds.count + 1),
                    "\(job): \(open) against \(fds.count): \(fds.joined(separator: " "))")
                let resident = try #require(prometheus.value("process_resident_memory_bytes{job=\"\(job)\"}"))
                #expect(resident > 1_000_000 && resident < 1_000_000_000)
            }
        }
    }

    @Test(.startsProcesses) func promtoolAcceptsEachDaemonsExpositionAndOvertimectlPrintsIt() async throws {
        try await onOwnThread {
            let folder = TemporaryDirectory("promtool")
            defer { folder.remove() }
            let socket = folder.path + "/control.sock"
            let tiny = try RunningChild(["--control-socket", socket], executable: "tiny-daemon", standardInput: true)
            defer {
                tiny.send(SIGKILL)
                _ = tiny.waitForExit()
            }
            for _ in 0..<2000 {
                guard access(socket, F_OK) != 0 else { break }
                usleep(5000)
            }
            tiny.input?.write(Data("work\nbg\n".utf8))
            #expect(tiny.waitForLine { $0.hasPrefix("grant ended") } != nil)
            let printed = try overtimectl(["metrics", "--socket", socket])
            #expect(printed.status == 0)
            #expect(printed.output.contains("overtime_background_tasks_ended_total{reason=\"completed\"} 1\n"))
            #expect(printed.output.contains("# HELP process_cpu_seconds_total "))
            let file = folder.path + "/exposition.txt"
            try printed.output.write(toFile: file, atomically: true, encoding: .utf8)
            let checked = try SpawnedProcess.run("/bin/sh", ["-c", "promtool check metrics < \(file)"])
            #expect(checked.status == 0, "promtool: \(checked.output) \(checked.errors)")
            // A daemon without the exporter's command says which commands it has.
            let missing = try overtimectl(["metrics", "--socket", folder.path + "/none.sock"])
            #expect(missing.status == 69)
        }
    }
}

// The scheduler on the runtime's control socket (`overtimectl schedule | history ID |
// work ID | run | retry | cancel | actions`) and in its status line (systemd's STATUS=: the
// next run).

import Overtime
import OvertimeSupport

extension Scheduler {
    /// Adds the scheduler's commands to the runtime's control socket.
    func addControlCommands() {
        addCommand("schedule", usage: nil) { scheduler, arguments throws(SchedulerError) in
            // An argument is a tag: the requests with it. A store that cannot be read is
            // said, not shown as an empty schedule.
            Self.scheduleTable(try await scheduler.pending(tagged: arguments.first))
        }
        addCommand("history", usage: "history ID [LIMIT]") { scheduler, arguments throws(SchedulerError) in
            let limit = arguments.dropFirst().first.flatMap { Int($0) } ?? 20
            return Self.historyTable(try await scheduler.readingHistory(arguments[0], limit: max(1, limit)))
        }
        addCommand("work", usage: "work ID") { scheduler, arguments throws(SchedulerError) in
            guard let info = try await scheduler.currentWorkInfo(arguments[0]) else {
                throw SchedulerError(code: .unknownIdentifier, message: "no request '\(arguments[0])'")
            }
            return Self.workTable(info)
        }
        // What changes the schedule takes `by=NAME` after its arguments (who asked), and is
        // recorded once done (`actions`).
        addCommand("run", usage: "run ID [by=NAME]") { scheduler, arguments throws(SchedulerError) in
            let asked = try OperatorArguments(arguments, positional: 1, usage: "run ID [by=NAME]")
            let identifier = asked.positional[0]
            let runID = try await scheduler.runningNow(identifier)
            return await scheduler.recorded(
                "run", identifier, by: asked.by, count: 1, "started run \(runID) of '\(identifier)'")
        }
        addCommand("retry", usage: "retry ID [by=NAME]") { scheduler, arguments throws(SchedulerError) in
            let asked = try OperatorArguments(arguments, positional: 1, usage: "retry ID [by=NAME]")
            let identifier = asked.positional[0]
            _ = try await scheduler.retrying(identifier)
            scheduler.cycleSoon()
            return await scheduler.recorded(
                "retry", identifier, by: asked.by, count: 1, "submitted '\(identifier)' again: due now")
        }
        addCommand("cancel", usage: "cancel ID [by=NAME]") { scheduler, arguments throws(SchedulerError) in
            let asked = try OperatorArguments(arguments, positional: 1, usage: "cancel ID [by=NAME]")
            let identifier = asked.positional[0]
            try await scheduler.cancelling(identifier)
            scheduler.cycleSoon()
            return await scheduler.recorded("cancel", identifier, by: asked.by, count: 1, "cancelled '\(identifier)'")
        }
        addCommand("cancel-tag", usage: "cancel-tag TAG [by=NAME]") { scheduler, arguments throws(SchedulerError) in
            let asked = try OperatorArguments(arguments, positional: 1, usage: "cancel-tag TAG [by=NAME]")
            let tag = asked.positional[0]
            let count = try await scheduler.cancelling(tag: tag)
            scheduler.cycleSoon()
            return await scheduler.recorded(
                "cancel-tag", "tag \(tag)", by: asked.by, count: count,
                "cancelled \(count) request\(count == 1 ? "" : "s") tagged '\(tag)'")
        }
        addCommand("run-tag", usage: "run-tag TAG [by=NAME]") { scheduler, arguments throws(SchedulerError) in
            let asked = try OperatorArguments(arguments, positional: 1, usage: "run-tag TAG [by=NAME]")
            let tag = asked.positional[0]
            let outcome = try await scheduler.runningNow(tag: tag)
            let runs = "run\(outcome.changed == 1 ? "" : "s")"
            return await scheduler.recorded(
                "run-tag", "tag \(tag)", by: asked.by, count: outcome.changed,
                outcome.describe("started \(outcome.changed) \(runs) of requests tagged '\(tag)'"))
        }
        let retryUsage = "retry-failed [tag=TAG] [prefix=PREFIX] [by=NAME]"
        addCommand("retry-failed", usage: nil) { scheduler, arguments throws(SchedulerError) in
            let asked = try OperatorArguments(
                arguments, positional: 0, options: ["tag", "prefix"], usage: retryUsage)
            let tag = asked.options["tag"]
            let prefix = asked.options["prefix"]
            let outcome = try await scheduler.retryingFailed(tag: tag, prefix: prefix)
            scheduler.cycleSoon()
            let subject =
                [tag.map { "tag \($0)" }, prefix.map { "prefix \($0)" }].compactMap { $0 }.joined(separator: ", ")
            let requests = "request\(outcome.changed == 1 ? "" : "s")"
            return await scheduler.recorded(
                "retry-failed", subject.isEmpty ? "every request" : subject, by: asked.by, count: outcome.changed,
                outcome.describe(
                    "submitted again \(outcome.changed) \(requests) that failed for good"
                        + (subject.isEmpty ? "" : " (\(subject))") + ": due now"))
        }
        addCommand("actions", usage: nil) { scheduler, arguments throws(SchedulerError) in
            let limit = arguments.first.flatMap { Int($0) } ?? 20
            return Self.actionsTable(
                try await scheduler.fromStore { () async throws(ScheduleStoreError) in
                    try await scheduler.store.operatorActions(limit: max(1, limit))
                })
        }
    }

    /// Adds `name`; with a `usage`, it needs an identifier as its first argument. Each
    /// answers from the scheduler's queue, as its work: a store that is slow to answer (a
    /// fleet's database stopped) delays the answer, never the loop.
    private func addCommand(
        _ name: String, usage: String?,
        _ body: @escaping @Sendable (Scheduler, [String]) async throws(SchedulerError) -> String
    ) {
        runtime.addControlCommand(name) { [weak self] arguments, reply in
            guard let self else { return reply(.failure(ControlCommandError("the scheduler is gone"))) }
            if let usage, arguments.isEmpty { return reply(.failure(ControlCommandError("usage: \(usage)"))) }
            queue.task {
                do throws(SchedulerError) {
                    reply(.success(try await body(self, arguments)))
                } catch {
                    reply(.failure(ControlCommandError(error.message)))
                }
            }
        }
    }

    static func scheduleTable(_ pending: [PendingRequest]) -> String {
        guard !pending.isEmpty else { return "no pending requests" }
        let rows = pending.map { pending -> [String] in
            let request = pending.request
            let repeats = Self.repeats(request)
            let requirements = request.requirements.sorted().map(\.description).joined(separator: ",")
            let tags = request.tags.sorted().joined(separator: ",")
            var waiting = pending.holder.map { "\(pending.waitingFor) on \($0)" } ?? "\(pending.waitingFor)"
            if let progress = pending.progress { waiting += " (\(progress))" }
            return [
                request.identifier, "\(pending.nextRun)", "\(pending.attempt)", repeats,
                requirements.isEmpty ? "-" : requirements, tags.isEmpty ? "-" : tags, waiting,
            ]
        }
        return TextTable.render(
            [["IDENTIFIER", "NEXT RUN", "ATTEMPT", "REPEATS", "REQUIRES", "TAGS", "WAITING FOR"]] + rows)
    }

    /// `once`, `every 3600 s`, `on *-*-* 02:30 Europe/Berlin`.
    static func repeats(_ request: ScheduledTaskRequest) -> String {
        request.repetition?.description ?? "once"
    }

    /// One request's work info, a line per field.
    static func workTable(_ info: WorkInfo) -> String {
        let request = info.request
        var rows: [[String]] = [["identifier", request.identifier], ["state", "\(info.state)"]]
        if let waiting = info.waitingFor, info.state != .running { rows.append(["waiting for", "\(waiting)"]) }
        if let holder = info.holder { rows.append(["holder", holder]) }
        if let progress = info.progress { rows.append(["progress", "\(progress)"]) }
        if let next = info.nextRun { rows.append(["next run", "\(next)"]) }
        rows.append(["attempt", "\(info.attempt) of \(request.retry.maximumAttempts)"])
        rows.append(["repeats", repeats(request)])
        if !request.tags.isEmpty { rows.append(["tags", request.tags.sorted().joined(separator: ",")]) }
        rows.append(["submitted", "\(info.submittedAt)"])
        if !request.prerequisites.isEmpty {
            rows.append(["prerequisites", request.prerequisites.sorted().joined(separator: ", ")])
        }
        if let stopper = info.stoppedBy { rows.append(["stopped by", "prerequisite '\(stopper)'"]) }
        if let cancelled = info.cancelledAt { rows.append(["cancelled", "\(cancelled)"]) }
        if let last = info.lastRun {
            let ended = last.endedAt.map { " at \($0)" } ?? ""
            rows.append(["last run", "run \(last.runID), attempt \(last.attempt): \(last.result)\(ended)"])
            if let reason = last.stopReason { rows.append(["why it stopped", reason]) }
            if let output = last.output { rows.append(["output", shown(output)]) }
        }
        return TextTable.render(rows)
    }

    static func historyTable(_ records: [RunRecord]) -> String {
        guard !records.isEmpty else { return "no runs" }
        let rows = records.map { record -> [String] in
            [
                "\(record.runID)", "\(record.attempt)", "\(record.startedAt)", record.endedAt.map { "\($0)" } ?? "-",
                "\(record.result)", record.output.map(Self.shown) ?? "-", record.stopReason ?? "",
            ]
        }
        return TextTable.render([["RUN", "ATTEMPT", "STARTED", "ENDED", "RESULT", "OUTPUT", "WHY IT STOPPED"]] + rows)
    }

    /// An output as a table shows it: short printable text as it is, else its size.
    static func shown(_ output: [UInt8]) -> String {
        let printable = output.allSatisfy { $0 >= 0x20 && $0 != 0x7F }
        if printable, output.count <= 60, let text = String(validating: output, as: UTF8.self) { return "\"\(text)\"" }
        return "\(output.count) bytes"
    }
}

extension Duration {
    /// `3600 s`, `200 ms`, `1500 µs`: the largest unit that states it exactly (an
    /// interval under a second is not shown as `0 s`).
    var compactDescription: String {
        let (seconds, attoseconds) = components
        if attoseconds == 0 { return "\(seconds) s" }
        let nanoseconds = seconds * 1_000_000_000 + attoseconds / 1_000_000_000
        if nanoseconds % 1_000_000 == 0 { return "\(nanoseconds / 1_000_000) ms" }
        if nanoseconds % 1_000 == 0 { return "\(nanoseconds / 1_000) µs" }
        return "\(nanoseconds) ns"
    }
}

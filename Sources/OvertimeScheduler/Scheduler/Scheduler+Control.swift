// The scheduler on the runtime's control socket (`overtimectl schedule | history ID |
// run ID | cancel ID`) and in its status line (systemd's STATUS=: the next run).

import Overtime

extension Scheduler {
    /// Adds the scheduler's commands to the runtime's control socket.
    func addControlCommands() {
        runtime.addControlCommand("schedule") { [weak self] _ in
            guard let self else { return .failure(ControlCommandError("the scheduler is gone")) }
            return .success(Self.scheduleTable(pendingRequests()))
        }
        runtime.addControlCommand("history") { [weak self] arguments in
            guard let self else { return .failure(ControlCommandError("the scheduler is gone")) }
            guard let identifier = arguments.first else { return .failure(ControlCommandError("usage: history ID")) }
            let limit = arguments.dropFirst().first.flatMap { Int($0) } ?? 20
            do throws(SchedulerError) {
                return .success(Self.historyTable(try history(identifier, limit: max(1, limit))))
            } catch {
                return .failure(ControlCommandError(error.message))
            }
        }
        runtime.addControlCommand("run") { [weak self] arguments in
            guard let self else { return .failure(ControlCommandError("the scheduler is gone")) }
            guard let identifier = arguments.first else { return .failure(ControlCommandError("usage: run ID")) }
            do throws(SchedulerError) {
                let runID = try runNow(identifier)
                return .success("started run \(runID) of '\(identifier)'")
            } catch {
                return .failure(ControlCommandError(error.message))
            }
        }
        runtime.addControlCommand("cancel") { [weak self] arguments in
            guard let self else { return .failure(ControlCommandError("the scheduler is gone")) }
            guard let identifier = arguments.first else { return .failure(ControlCommandError("usage: cancel ID")) }
            do throws(SchedulerError) {
                try cancel(identifier)
                return .success("cancelled '\(identifier)'")
            } catch {
                return .failure(ControlCommandError(error.message))
            }
        }
    }

    static func scheduleTable(_ pending: [PendingRequest]) -> String {
        guard !pending.isEmpty else { return "no pending requests" }
        let rows = pending.map { pending -> [String] in
            let request = pending.request
            let repeats = request.repetition.map { "every \($0.interval.wholeSeconds) s" } ?? "once"
            let requirements = request.requirements.sorted().map(\.description).joined(separator: ",")
            return [
                request.identifier, "\(pending.nextRun)", "\(pending.attempt)", repeats,
                requirements.isEmpty ? "-" : requirements, "\(pending.waitingFor)",
            ]
        }
        return TextTable.render([["IDENTIFIER", "NEXT RUN", "ATTEMPT", "REPEATS", "REQUIRES", "WAITING FOR"]] + rows)
    }

    static func historyTable(_ records: [RunRecord]) -> String {
        guard !records.isEmpty else { return "no runs" }
        let rows = records.map { record -> [String] in
            [
                "\(record.runID)", "\(record.attempt)", "\(record.startedAt)", record.endedAt.map { "\($0)" } ?? "-",
                "\(record.result)", record.stopReason ?? "",
            ]
        }
        return TextTable.render([["RUN", "ATTEMPT", "STARTED", "ENDED", "RESULT", "WHY IT STOPPED"]] + rows)
    }
}

/// Plain aligned columns, the last one unpadded.
enum TextTable {
    static func render(_ rows: [[String]]) -> String {
        let columns = rows.map(\.count).max() ?? 0
        let widths = (0..<columns).map { column in rows.map { column < $0.count ? $0[column].count : 0 }.max() ?? 0 }
        return rows.map { row in
            row.enumerated().map { index, cell in
                index == row.count - 1 ? cell : cell + String(repeating: " ", count: widths[index] + 2 - cell.count)
            }.joined()
        }.joined(separator: "\n")
    }
}

extension Duration {
    fileprivate var wholeSeconds: Int64 { components.seconds }
}

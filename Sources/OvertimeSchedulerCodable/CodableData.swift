// Codable values as a request's input and a run's output, encoded as JSON. A module of its
// own: programs that pass bytes link no Foundation.

import OvertimeScheduler

#if canImport(FoundationEssentials)
    import FoundationEssentials
#else
    import Foundation
#endif

extension ScheduledTaskRequest {
    /// Sets ``ScheduledTaskRequest/input`` to `value` encoded as JSON (keys sorted: equal
    /// values are equal bytes). The bound on the input is checked at `submit`.
    ///
    /// ```swift
    /// var request = ScheduledTaskRequest(identifier: "report.daily")
    /// try request.setInput(encoding: ReportJob(region: "eu", format: "csv"))
    /// ```
    public mutating func setInput<Value: Encodable>(encoding value: Value) throws {
        input = try CodableData.encode(value)
    }
}

extension ScheduledTask {
    /// The request's input decoded from JSON as `type`.
    ///
    /// ```swift
    /// let job = try task.input(as: ReportJob.self)
    /// ```
    public func input<Value: Decodable>(as type: Value.Type) throws -> Value {
        try JSONDecoder().decode(type, from: Data(input))
    }

    /// Keeps `value`, encoded as JSON, as this attempt's output (``ScheduledTask/setOutput(_:)``;
    /// the same bound and the same error over it).
    public func setOutput<Value: Encodable>(encoding value: Value) throws {
        try setOutput(try CodableData.encode(value))
    }
}

extension RunRecord {
    /// The attempt's output decoded from JSON as `type`; `nil` when the attempt set none.
    public func output<Value: Decodable>(as type: Value.Type) throws -> Value? {
        guard let output else { return nil }
        return try JSONDecoder().decode(type, from: Data(output))
    }
}

/// The encoding both directions share.
enum CodableData {
    static func encode<Value: Encodable>(_ value: Value) throws -> [UInt8] {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys]
        return Array(try encoder.encode(value))
    }
}

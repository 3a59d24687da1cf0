// Where a link of a chain stands: what it still waits for, what its prerequisites handed
// on, and what stopped it — and the bytes a store keeps it as.

/// A request with prerequisites, as it stands: kept with the request by every store.
@_spi(ScheduleStore) public struct ChainState: Sendable, Hashable {
    /// The prerequisites that have not succeeded yet: the request is not due while one is
    /// left.
    public var waitingOn: Set<String>
    /// The outputs of the prerequisites that succeeded and set one, by identifier.
    public var handedOn: [String: [UInt8]] = [:]
    /// The prerequisite whose failure or cancellation finished this request.
    public var stoppedBy: String?

    /// A link waiting on `waitingOn`.
    public init(waitingOn: Set<String>, handedOn: [String: [UInt8]] = [:], stoppedBy: String? = nil) {
        self.waitingOn = waitingOn
        self.handedOn = handedOn
        self.stoppedBy = stoppedBy
    }

    /// Whether the request waits on a prerequisite (it is not due).
    public var isWaiting: Bool { !waitingOn.isEmpty }

    /// The state as a store keeps it: a version byte (1), the identifiers waited on, the
    /// outputs handed on (identifier, bytes), and what stopped it (0 or 1 identifier), each
    /// count and length four bytes, little-endian. Sorted, so one state is one value.
    public var packed: [UInt8] {
        var writer = PackedWriter()
        writer.bytes.append(1)
        writer.strings(waitingOn.sorted())
        writer.count(handedOn.count)
        for (identifier, output) in handedOn.sorted(by: { $0.key < $1.key }) {
            writer.string(identifier)
            writer.data(output)
        }
        writer.strings(stoppedBy.map { [$0] } ?? [])
        return writer.bytes
    }

    /// The state `packed` holds; `nil` for bytes that are not one (damaged, or of a newer
    /// build).
    public init?(packed: some Collection<UInt8>) {
        var reader = PackedReader(Array(packed))
        guard reader.byte() == 1, let waiting = reader.strings(), let count = reader.count() else { return nil }
        var handed: [String: [UInt8]] = [:]
        for _ in 0..<count {
            guard let identifier = reader.string(), let output = reader.data() else { return nil }
            handed[identifier] = output
        }
        guard let stopped = reader.strings(), stopped.count <= 1, reader.isAtEnd else { return nil }
        self.init(waitingOn: Set(waiting), handedOn: handed, stoppedBy: stopped.first)
    }
}

/// Appends counts, strings and byte strings as ``ChainState/packed`` lays them out.
struct PackedWriter {
    var bytes: [UInt8] = []

    mutating func count(_ value: Int) {
        let value = UInt32(clamping: value)
        for index in 0..<4 { bytes.append(UInt8(truncatingIfNeeded: value >> UInt32(index * 8))) }
    }

    mutating func data(_ data: [UInt8]) {
        count(data.count)
        bytes += data
    }

    mutating func string(_ text: String) { data(Array(text.utf8)) }

    mutating func strings(_ texts: [String]) {
        count(texts.count)
        for text in texts { string(text) }
    }
}

/// Reads what ``PackedWriter`` wrote; every read is `nil` past the end.
struct PackedReader {
    private let bytes: [UInt8]
    private var position = 0

    init(_ bytes: [UInt8]) { self.bytes = bytes }

    var isAtEnd: Bool { position == bytes.count }

    mutating func byte() -> UInt8? {
        guard position < bytes.count else { return nil }
        defer { position += 1 }
        return bytes[position]
    }

    mutating func count() -> Int? {
        guard bytes.count - position >= 4 else { return nil }
        defer { position += 4 }
        return Int(bytes[position..<position + 4].reversed().reduce(UInt32(0)) { $0 << 8 | UInt32($1) })
    }

    mutating func data() -> [UInt8]? {
        guard let length = count(), bytes.count - position >= length else { return nil }
        defer { position += length }
        return Array(bytes[position..<position + length])
    }

    mutating func string() -> String? { data().flatMap { String(validating: $0, as: UTF8.self) } }

    mutating func strings() -> [String]? {
        guard let count = count(), count <= bytes.count - position else { return nil }
        var texts: [String] = []
        for _ in 0..<count {
            guard let text = string() else { return nil }
            texts.append(text)
        }
        return texts
    }
}

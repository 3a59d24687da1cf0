// A named time zone read from the system's tz database (TZif files, RFC 8536), for
// calendar schedules. No Foundation: its time zones need ICU, which devices do not ship.

import OvertimeSupport

/// The offsets from UTC of one time zone over time.
struct TimeZoneRules: Sendable, Hashable {
    /// The zone's name (`Europe/Berlin`, `UTC`), or `localtime` for the system's own zone.
    let name: String
    /// The times (seconds since 1970, UTC) at which the offset changes, ascending.
    let transitions: [Int64]
    /// The offset (seconds east of UTC) from each transition on.
    let offsets: [Int32]
    /// The offset before the first transition.
    let initialOffset: Int32
    /// The rule for times after the last transition (the file's footer), if it has one.
    let rule: PosixTimeZoneRule?

    /// Coordinated Universal Time, which needs no file.
    static let utc = TimeZoneRules(name: "UTC", transitions: [], offsets: [], initialOffset: 0, rule: nil)

    /// Where the tz database is: `$TZDIR`, else `/usr/share/zoneinfo`.
    static var databaseDirectory: String {
        if let directory = environmentValue("TZDIR"), !directory.isEmpty { return directory }
        return "/usr/share/zoneinfo"
    }

    /// The zone `name` from the tz database in `directory`. Names are paths below it
    /// (`Europe/Berlin`); one that leaves it (`..`, a leading `/`) is refused.
    static func named(_ name: String, in directory: String = databaseDirectory) throws(CalendarScheduleError)
        -> TimeZoneRules
    {
        // UTC in any case, as systemd takes it (`utc`).
        if ["utc", "etc/utc", "z"].contains(name.lowercased()) { return .utc }
        let components = name.split(separator: "/", omittingEmptySubsequences: false)
        let allowed = name.utf8.allSatisfy { byte in
            (byte >= 0x41 && byte <= 0x5A) || (byte >= 0x61 && byte <= 0x7A) || (byte >= 0x30 && byte <= 0x39)
                || byte == 0x2F || byte == 0x5F || byte == 0x2D || byte == 0x2B
        }
        guard !name.isEmpty, name.utf8.count <= 255, allowed,
            components.allSatisfy({ !$0.isEmpty && $0 != "." && $0 != ".." })
        else {
            throw CalendarScheduleError(
                .unknownTimeZone, "'\(name)' is not a time zone name (like Europe/Berlin or UTC)")
        }
        return try file(directory + "/" + name, name: name)
    }

    /// Zones read so far, by path: stored requests are read back often, their zones once.
    private static let loaded = Locked<[String: TimeZoneRules]>([:])

    /// The system's own zone: `$TZ` when it names a zone (`:Europe/Berlin`, `Europe/Berlin`),
    /// else `/etc/localtime`, else UTC.
    static func local() -> TimeZoneRules {
        if let value = environmentValue("TZ"), !value.isEmpty {
            let name = value.hasPrefix(":") ? String(value.dropFirst()) : value
            if name.hasPrefix("/") { return (try? file(name, name: name)) ?? .utc }
            if let zone = try? named(name) { return zone }
            if let rule = PosixTimeZoneRule(parsing: name) {
                return TimeZoneRules(name: name, transitions: [], offsets: [], initialOffset: 0, rule: rule)
            }
            return .utc
        }
        return (try? file("/etc/localtime", name: "localtime")) ?? .utc
    }

    /// The zone in the TZif file at `path`, read once per process.
    static func file(_ path: String, name: String) throws(CalendarScheduleError) -> TimeZoneRules {
        if let cached = loaded.withLock({ $0[path] }) { return cached }
        let rules = try read(path, name: name)
        loaded.withLock { $0[path] = rules }
        return rules
    }

    private static func read(_ path: String, name: String) throws(CalendarScheduleError) -> TimeZoneRules {
        let bytes: [UInt8]
        switch readWholeFile(path) {
        case .success(let read): bytes = read
        case .failure(let failure):
            throw CalendarScheduleError(
                .unknownTimeZone,
                "time zone '\(name)' is not in the tz database (\(path): \(failure.operation) failed, errno \(failure.errno))"
            )
        }
        var parser = TZifParser(bytes: bytes, name: name)
        guard let rules = parser.parse() else {
            throw CalendarScheduleError(.unknownTimeZone, "time zone file \(path) is damaged or not a TZif file")
        }
        return rules
    }

    /// The offset (seconds east of UTC) in effect at `seconds` since 1970 (UTC).
    func offset(at seconds: Int64) -> Int32 {
        if let last = transitions.last, seconds >= last, let rule { return rule.offset(at: seconds) }
        if transitions.isEmpty { return rule?.offset(at: seconds) ?? initialOffset }
        var low = 0
        var high = transitions.count
        while low < high {  // the first transition after `seconds`
            let middle = (low + high) / 2
            if transitions[middle] <= seconds { low = middle + 1 } else { high = middle }
        }
        return low == 0 ? initialOffset : offsets[low - 1]
    }

    /// The times (seconds since 1970, UTC) whose local time in this zone is `local`
    /// (seconds since 1970 as if the zone were UTC), earliest first: none for a local time
    /// a change skipped (a spring-forward gap), two for one it repeated (a fall-back).
    func instants(atLocal local: Int64) -> [Int64] {
        // A zone's offset changes at most once in two days around any time.
        var found: [Int64] = []
        for probe in [local - 2 * 86_400, local + 2 * 86_400] {
            let candidate = local - Int64(offset(at: probe))
            if Int64(offset(at: candidate)) == local - candidate, !found.contains(candidate) {
                found.append(candidate)
            }
        }
        return found.sorted()
    }

    static func == (lhs: TimeZoneRules, rhs: TimeZoneRules) -> Bool { lhs.name == rhs.name }
    func hash(into hasher: inout Hasher) { hasher.combine(name) }
}

/// Reads the data of a TZif file: the 64-bit block of version 2 and later (the 32-bit one
/// of version 1), and the footer's rule.
private struct TZifParser {
    let bytes: [UInt8]
    let name: String
    var position = 0

    init(bytes: [UInt8], name: String) {
        self.bytes = bytes
        self.name = name
    }

    mutating func parse() -> TimeZoneRules? {
        guard let header = readHeader() else { return nil }
        if header.version >= 2 {
            // Skip the version 1 block; the second header and 64-bit times follow.
            position += header.dataLength(timeSize: 4)
            guard let header64 = readHeader() else { return nil }
            return readData(header64, timeSize: 8, withFooter: true)
        }
        return readData(header, timeSize: 4, withFooter: false)
    }

    struct Header {
        let version: Int
        let isUTCCount, isStandardCount, leapCount, transitionCount, typeCount, characterCount: Int

        func dataLength(timeSize: Int) -> Int {
            transitionCount * (timeSize + 1) + typeCount * 6 + characterCount + leapCount * (timeSize + 4)
                + isStandardCount + isUTCCount
        }
    }

    mutating func readHeader() -> Header? {
        guard position + 44 <= bytes.count, bytes[position..<position + 4].elementsEqual("TZif".utf8) else {
            return nil
        }
        let versionByte = bytes[position + 4]
        let version = versionByte == 0 ? 1 : Int(versionByte) - 0x30
        guard version >= 1, version <= 9 else { return nil }
        position += 20
        var counts: [Int] = []
        for _ in 0..<6 {
            guard let value = readInteger(size: 4), value >= 0, value < 1 << 20 else { return nil }
            counts.append(Int(value))
        }
        guard counts[4] >= 1 else { return nil }
        return Header(
            version: version, isUTCCount: counts[0], isStandardCount: counts[1], leapCount: counts[2],
            transitionCount: counts[3], typeCount: counts[4], characterCount: counts[5])
    }

    mutating func readData(_ header: Header, timeSize: Int, withFooter: Bool) -> TimeZoneRules? {
        guard position + header.dataLength(timeSize: timeSize) <= bytes.count else { return nil }
        var transitions: [Int64] = []
        for _ in 0..<header.transitionCount {
            guard let time = readInteger(size: timeSize) else { return nil }
            if let last = transitions.last, time <= last { return nil }
            transitions.append(time)
        }
        var typeIndices: [Int] = []
        for _ in 0..<header.transitionCount {
            let index = Int(bytes[position])
            position += 1
            guard index < header.typeCount else { return nil }
            typeIndices.append(index)
        }
        var typeOffsets: [Int32] = []
        for _ in 0..<header.typeCount {
            guard let offset = readInteger(size: 4), abs(offset) < 26 * 3600 else { return nil }
            typeOffsets.append(Int32(offset))
            position += 2  // is-DST flag, abbreviation index: not needed to plan
        }
        position +=
            header.characterCount + header.leapCount * (timeSize + 4) + header.isStandardCount
            + header.isUTCCount
        var rule: PosixTimeZoneRule?
        if withFooter, position < bytes.count, bytes[position] == 0x0A {
            let rest = bytes[(position + 1)...]
            if let end = rest.firstIndex(of: 0x0A), end > position + 1 {
                rule = PosixTimeZoneRule(parsing: String(decoding: bytes[(position + 1)..<end], as: UTF8.self))
            }
        }
        return TimeZoneRules(
            name: name, transitions: transitions, offsets: typeIndices.map { typeOffsets[$0] },
            initialOffset: typeOffsets[0], rule: rule)
    }

    mutating func readInteger(size: Int) -> Int64? {
        guard position + size <= bytes.count else { return nil }
        var value: UInt64 = 0
        for byte in bytes[position..<position + size] { value = value << 8 | UInt64(byte) }
        position += size
        return size == 4 ? Int64(Int32(bitPattern: UInt32(truncatingIfNeeded: value))) : Int64(bitPattern: value)
    }
}

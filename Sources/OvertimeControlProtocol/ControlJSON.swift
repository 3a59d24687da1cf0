// JSON as the control protocol needs it: a strict reader (RFC 8259) and a writer, so the
// core links no Foundation. Foundation's JSONEncoder and JSONDecoder were the core's only
// use of it, and they doubled every program's code and the conformance records that
// Swift's runtime scans at start.

/// A JSON value as the control socket reads and writes it.
package enum JSONValue: Sendable, Equatable {
    case null
    case bool(Bool)
    /// A number as it was written, so 64-bit task IDs keep every digit.
    case number(String)
    case string(String)
    case array([JSONValue])
    /// Members by name; a name given twice keeps its last value, and names are written
    /// sorted.
    case object([String: JSONValue])
}

/// Why a text is not the JSON that was expected: what and, for syntax, where.
package struct JSONError: Error, Sendable, Equatable, CustomStringConvertible {
    /// One phrase: what was wrong, and for syntax the byte offset where it was seen.
    package var description: String

    /// An error saying `description`.
    package init(_ description: String) {
        self.description = description
    }
}

// MARK: Reading

extension JSONValue {
    /// The deepest nesting read. Control messages are two levels deep; refusing deeper
    /// input bounds the reader's recursion whatever a client sends.
    package static let maximumDepth = 32

    /// Reads one JSON text: a single value with only white space around it.
    package init(parsing bytes: [UInt8]) throws(JSONError) {
        var reader = JSONReader(bytes: bytes)
        self = try reader.value(depth: 0)
        reader.skipWhiteSpace()
        guard reader.index == bytes.count else { throw reader.error("unexpected text after the value") }
    }
}

/// A cursor over the bytes of one JSON text.
private struct JSONReader {
    let bytes: [UInt8]
    var index = 0

    init(bytes: [UInt8]) {
        self.bytes = bytes
    }

    func error(_ what: String) -> JSONError {
        JSONError("\(what) at byte \(index)")
    }

    mutating func skipWhiteSpace() {
        while index < bytes.count, [0x20, 0x09, 0x0A, 0x0D].contains(bytes[index]) { index += 1 }
    }

    mutating func value(depth: Int) throws(JSONError) -> JSONValue {
        guard depth <= JSONValue.maximumDepth else { throw error("nested deeper than \(JSONValue.maximumDepth)") }
        skipWhiteSpace()
        guard index < bytes.count else { throw error("a value expected") }
        switch bytes[index] {
        case UInt8(ascii: "{"): return try object(depth: depth)
        case UInt8(ascii: "["): return try array(depth: depth)
        case UInt8(ascii: "\""): return .string(try string())
        case UInt8(ascii: "t"): return try literal("true", .bool(true))
        case UInt8(ascii: "f"): return try literal("false", .bool(false))
        case UInt8(ascii: "n"): return try literal("null", .null)
        case UInt8(ascii: "-"), UInt8(ascii: "0")...UInt8(ascii: "9"): return .number(try number())
        default: throw error("a value expected")
        }
    }

    private mutating func literal(_ word: StaticString, _ value: JSONValue) throws(JSONError) -> JSONValue {
        let count = word.utf8CodeUnitCount
        guard index + count <= bytes.count,
            word.withUTF8Buffer({ $0.elementsEqual(bytes[index..<index + count]) })
        else { throw error("a value expected") }
        index += count
        return value
    }

    private mutating func object(depth: Int) throws(JSONError) -> JSONValue {
        index += 1  // {
        var members: [String: JSONValue] = [:]
        guard !closes(with: UInt8(ascii: "}")) else { return .object(members) }
        repeat {
            skipWhiteSpace()
            guard index < bytes.count, bytes[index] == UInt8(ascii: "\"") else { throw error("a member name expected") }
            let name = try string()
            skipWhiteSpace()
            guard index < bytes.count, bytes[index] == UInt8(ascii: ":") else { throw error("':' expected") }
            index += 1
            members[name] = try value(depth: depth + 1)
        } while try another(before: UInt8(ascii: "}"))
        return .object(members)
    }

    private mutating func array(depth: Int) throws(JSONError) -> JSONValue {
        index += 1  // [
        var elements: [JSONValue] = []
        guard !closes(with: UInt8(ascii: "]")) else { return .array(elements) }
        repeat {
            elements.append(try value(depth: depth + 1))
        } while try another(before: UInt8(ascii: "]"))
        return .array(elements)
    }

    /// Whether the container ends at once with `closing` (read if so).
    private mutating func closes(with closing: UInt8) -> Bool {
        skipWhiteSpace()
        guard index < bytes.count, bytes[index] == closing else { return false }
        index += 1
        return true
    }

    /// After a member or element: `true` at a comma (another follows), `false` at
    /// `closing` (the container ended); both read.
    private mutating func another(before closing: UInt8) throws(JSONError) -> Bool {
        skipWhiteSpace()
        let expected = "',' or '\(Character(Unicode.Scalar(closing)))' expected"
        guard index < bytes.count else { throw error(expected) }
        switch bytes[index] {
        case UInt8(ascii: ","):
            index += 1
            return true
        case closing:
            index += 1
            return false
        default: throw error(expected)
        }
    }

    private mutating func digits() -> Int {
        let start = index
        while index < bytes.count, (UInt8(ascii: "0")...UInt8(ascii: "9")).contains(bytes[index]) { index += 1 }
        return index - start
    }

    /// `-? (0 | [1-9][0-9]*) (. [0-9]+)? ([eE] [+-]? [0-9]+)?`, returned as written.
    private mutating func number() throws(JSONError) -> String {
        let start = index
        if bytes[index] == UInt8(ascii: "-") { index += 1 }
        let leadingZero = index < bytes.count && bytes[index] == UInt8(ascii: "0")
        let whole = digits()
        guard whole > 0 else { throw error("a digit expected") }
        guard !leadingZero || whole == 1 else { throw error("a number with a leading zero") }
        if index < bytes.count, bytes[index] == UInt8(ascii: ".") {
            index += 1
            guard digits() > 0 else { throw error("a digit expected after '.'") }
        }
        if index < bytes.count, bytes[index] | 0x20 == UInt8(ascii: "e") {
            index += 1
            if index < bytes.count, bytes[index] == UInt8(ascii: "+") || bytes[index] == UInt8(ascii: "-") {
                index += 1
            }
            guard digits() > 0 else { throw error("a digit expected in the exponent") }
        }
        return String(decoding: bytes[start..<index], as: UTF8.self)
    }

    /// A string from its opening quote through its closing one; its bytes must be UTF-8.
    private mutating func string() throws(JSONError) -> String {
        index += 1  // "
        var scalars: [UInt8] = []
        while true {
            guard index < bytes.count else { throw error("an unterminated string") }
            let byte = bytes[index]
            index += 1
            switch byte {
            case UInt8(ascii: "\""):
                guard let text = String(validating: scalars, as: UTF8.self) else {
                    throw error("a string that is not UTF-8")
                }
                return text
            case UInt8(ascii: "\\"):
                guard index < bytes.count else { throw error("an unterminated string") }
                index += 1
                switch bytes[index - 1] {
                case UInt8(ascii: "\""): scalars.append(UInt8(ascii: "\""))
                case UInt8(ascii: "\\"): scalars.append(UInt8(ascii: "\\"))
                case UInt8(ascii: "/"): scalars.append(UInt8(ascii: "/"))
                case UInt8(ascii: "b"): scalars.append(0x08)
                case UInt8(ascii: "f"): scalars.append(0x0C)
                case UInt8(ascii: "n"): scalars.append(0x0A)
                case UInt8(ascii: "r"): scalars.append(0x0D)
                case UInt8(ascii: "t"): scalars.append(0x09)
                case UInt8(ascii: "u"): scalars.append(contentsOf: String(try escapedScalar()).utf8)
                default: throw error("an unknown escape")
                }
            case 0x00..<0x20:
                throw error("a control character in a string")
            default:
                scalars.append(byte)
            }
        }
    }

    /// The scalar of `\uXXXX` (the `\u` read), with its low surrogate when it is a high one.
    private mutating func escapedScalar() throws(JSONError) -> Character {
        let first = try hexQuad()
        var value = UInt32(first)
        if (0xD800..<0xDC00).contains(first) {
            guard index + 1 < bytes.count, bytes[index] == UInt8(ascii: "\\"), bytes[index + 1] == UInt8(ascii: "u")
            else { throw error("a high surrogate without its low one") }
            index += 2
            let second = try hexQuad()
            guard (0xDC00..<0xE000).contains(second) else { throw error("a high surrogate without its low one") }
            value = 0x10000 + ((UInt32(first) - 0xD800) << 10) + (UInt32(second) - 0xDC00)
        }
        guard let scalar = Unicode.Scalar(value) else { throw error("a lone low surrogate") }
        return Character(scalar)
    }

    private mutating func hexQuad() throws(JSONError) -> UInt16 {
        guard index + 4 <= bytes.count else { throw error("four hex digits expected") }
        var value: UInt16 = 0
        for byte in bytes[index..<index + 4] {
            let digit: UInt8
            switch byte {
            case UInt8(ascii: "0")...UInt8(ascii: "9"): digit = byte - UInt8(ascii: "0")
            case UInt8(ascii: "a")...UInt8(ascii: "f"): digit = byte - UInt8(ascii: "a") + 10
            case UInt8(ascii: "A")...UInt8(ascii: "F"): digit = byte - UInt8(ascii: "A") + 10
            default: throw error("four hex digits expected")
            }
            value = value << 4 | UInt16(digit)
        }
        index += 4
        return value
    }
}

// MARK: Writing

extension JSONValue {
    /// A number for `value`; `null` when it is not finite (JSON has no infinity).
    package init(_ value: Double) {
        self = value.isFinite ? .number(value.description) : .null
    }

    /// A number for `value`, every digit kept.
    package init(_ value: some BinaryInteger) {
        self = .number(value.description)
    }

    /// The value as compact JSON text, object members sorted by name.
    package var serialized: [UInt8] {
        var bytes: [UInt8] = []
        write(into: &bytes)
        return bytes
    }

    private func write(into bytes: inout [UInt8]) {
        switch self {
        case .null: bytes += "null".utf8
        case .bool(let value): bytes += (value ? "true" : "false").utf8
        case .number(let literal): bytes += literal.utf8
        case .string(let text): Self.write(text, into: &bytes)
        case .array(let elements):
            bytes.append(UInt8(ascii: "["))
            for (position, element) in elements.enumerated() {
                if position > 0 { bytes.append(UInt8(ascii: ",")) }
                element.write(into: &bytes)
            }
            bytes.append(UInt8(ascii: "]"))
        case .object(let members):
            bytes.append(UInt8(ascii: "{"))
            for (position, name) in members.keys.sorted().enumerated() {
                if position > 0 { bytes.append(UInt8(ascii: ",")) }
                Self.write(name, into: &bytes)
                bytes.append(UInt8(ascii: ":"))
                members[name]?.write(into: &bytes)
            }
            bytes.append(UInt8(ascii: "}"))
        }
    }

    /// A string literal: quotes, backslashes and control characters escaped; the rest as
    /// UTF-8.
    private static func write(_ text: String, into bytes: inout [UInt8]) {
        bytes.append(UInt8(ascii: "\""))
        for byte in text.utf8 {
            switch byte {
            case UInt8(ascii: "\""): bytes += #"\""#.utf8
            case UInt8(ascii: "\\"): bytes += #"\\"#.utf8
            case 0x0A: bytes += #"\n"#.utf8
            case 0x0D: bytes += #"\r"#.utf8
            case 0x09: bytes += #"\t"#.utf8
            case 0x00..<0x20:
                let hex = Array("0123456789abcdef".utf8)
                bytes += #"\u00"#.utf8
                bytes.append(hex[Int(byte >> 4)])
                bytes.append(hex[Int(byte & 0xF)])
            default: bytes.append(byte)
            }
        }
        bytes.append(UInt8(ascii: "\""))
    }
}

// MARK: Members

extension JSONValue {
    /// The members of an object.
    package func members(_ what: String) throws(JSONError) -> [String: JSONValue] {
        guard case .object(let members) = self else { throw JSONError("\(what) must be a JSON object") }
        return members
    }
}

extension [String: JSONValue] {
    /// The member `name`, absent and `null` both `nil`; `read` turns a present one into
    /// its type or throws.
    package func optional<T>(
        _ name: String, _ read: (JSONValue) -> T?, _ expected: String
    ) throws(JSONError) -> T? {
        guard let value = self[name], value != .null else { return nil }
        guard let typed = read(value) else { throw JSONError("'\(name)' must be \(expected)") }
        return typed
    }

    /// The member `name`, which must be present.
    package func required<T>(_ name: String, _ read: (JSONValue) -> T?, _ expected: String) throws(JSONError) -> T {
        guard let value = try optional(name, read, expected) else { throw JSONError("'\(name)' is missing") }
        return value
    }
}

extension JSONValue {
    /// The text of a string.
    package var stringValue: String? {
        if case .string(let text) = self { text } else { nil }
    }

    /// A boolean.
    package var boolValue: Bool? {
        if case .bool(let flag) = self { flag } else { nil }
    }

    /// Any number, as the nearest `Double`.
    package var doubleValue: Double? {
        if case .number(let literal) = self { Double(literal) } else { nil }
    }

    /// A number written as a whole number that fits `type`.
    package func integer<T: FixedWidthInteger>(_ type: T.Type) -> T? {
        if case .number(let literal) = self { T(literal) } else { nil }
    }

    /// An array whose every element `read` accepts.
    package func array<T>(of read: (JSONValue) -> T?) -> [T]? {
        guard case .array(let elements) = self else { return nil }
        var typed: [T] = []
        for element in elements {
            guard let one = read(element) else { return nil }
            typed.append(one)
        }
        return typed
    }
}

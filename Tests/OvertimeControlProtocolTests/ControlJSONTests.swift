import Foundation
import OvertimeControlProtocol
import OvertimeTestSupport
import Testing

/// The control protocol's own JSON reader and writer, checked against RFC 8259's grammar
/// and against Foundation's `JSONSerialization` as an independent implementation.
@Suite("Control protocol JSON", .notUnderThreadSanitizer("a JSON codec: one thread, nothing shared"))
struct ControlJSONTests {
    private func parse(_ text: String) throws(JSONError) -> JSONValue {
        try JSONValue(parsing: Array(text.utf8))
    }

    @Test func readsWhatTheGrammarAllows() throws {
        #expect(
            try parse(" {\"a\" : [ 1 , -0 , 2.5e-3 , 1E+5 , true , false , null ] }\r\n")
                == .object([
                    "a": .array([
                        .number("1"), .number("-0"), .number("2.5e-3"), .number("1E+5"), .bool(true), .bool(false),
                        .null,
                    ])
                ]))
        #expect(try parse(#""\"\\\/\b\f\n\r\t\u00e9\ud83d\ude00""#) == .string("\"\\/\u{08}\u{0C}\n\r\té😀"))
        #expect(try parse("\"caf\u{E9} \u{1F600}\"") == .string("café 😀"))  // UTF-8 as it is
        #expect(try parse(#"{"a":1,"a":2}"#) == .object(["a": .number("2")]))  // the last one counts
        #expect(try parse("[]") == .array([]) && parse("{}") == .object([:]) && parse("\"\"") == .string(""))
    }

    @Test(arguments: [
        "", " ", "{", "}", "[1,]", "[,1]", "{\"a\"1}", "{\"a\":}", "{a:1}", "{\"a\":1,}", "01", "1.", ".5", "-", "+1",
        "1e", "1e+", "0x10", "tru", "nul", "True", "\"abc", "\"\\x\"", "\"\\u12\"", "\"\\ud800\"", "\"\\udc00\"",
        "\"\\ud800\\u0041\"", "\"\u{01}\"", "\"a\tb\"", "{} x", "1 2", "[1] ]", "NaN", "Infinity", "'a'",
    ])
    func refusesWhatTheGrammarDoesNot(_ text: String) {
        #expect(throws: JSONError.self, "\(text.debugDescription) was read") { try parse(text) }
    }

    @Test func refusesBytesThatAreNotUTF8AndSaysWhere() throws {
        let error = try #require(throws: JSONError.self) { try JSONValue(parsing: [0x22, 0x61, 0xFF, 0xFE, 0x22]) }
        #expect(error.description == "a string that is not UTF-8 at byte 5")
        let syntax = try #require(throws: JSONError.self) { try parse(#"{"command":"status"x"#) }
        #expect(syntax.description == "',' or '}' expected at byte 19")
    }

    @Test func nestingIsBoundedNotRecursedWithoutLimit() throws {
        let allowed =
            String(repeating: "[", count: JSONValue.maximumDepth + 1)
            + String(repeating: "]", count: JSONValue.maximumDepth + 1)
        #expect(throws: Never.self) { try parse(allowed) }
        let deeper = "[" + allowed + "]"
        #expect(throws: JSONError.self) { try parse(deeper) }
        // A request line's worth of brackets: refused at the bound, the stack untouched.
        let flood = [UInt8](repeating: UInt8(ascii: "["), count: ControlProtocol.maximumRequestBytes)
        #expect(throws: JSONError.self) { try JSONValue(parsing: flood) }
    }

    @Test func requestsReadAsTheServerExpects() throws {
        let expire = try ControlRequest(json: Array(#"{"command":"expire","id":9223372036854775809}"#.utf8))
        #expect(expire == ControlRequest(command: "expire", id: 9_223_372_036_854_775_809))
        let call = try ControlRequest(
            json: Array(#"{"arguments":["a","b c"],"command":"history","extra":{"deep":[1]},"now":null}"#.utf8))
        #expect(call == ControlRequest(command: "history", arguments: ["a", "b c"]))
        for (text, message) in [
            (#"{"command":5}"#, "'command' must be a string"),
            (#"{"id":1}"#, "'command' is missing"),
            (#"{"command":"expire","id":-1}"#, "'id' must be a task ID (a whole number from 0)"),
            (#"{"command":"expire","id":1.5}"#, "'id' must be a task ID (a whole number from 0)"),
            (#"{"command":"expire","id":18446744073709551616}"#, "'id' must be a task ID (a whole number from 0)"),
            (#"{"command":"terminate","now":"yes"}"#, "'now' must be true or false"),
            (#"{"command":"x","arguments":["a",1]}"#, "'arguments' must be an array of strings"),
            ("[]", "a request must be a JSON object"),
        ] {
            let error = try #require(throws: JSONError.self) { try ControlRequest(json: Array(text.utf8)) }
            #expect(error.description == message, "\(text)")
        }
    }

    @Test func everyMessageReadsBackAsItWasWritten() throws {
        let requests = [
            ControlRequest(command: "status"), ControlRequest(command: "expire", id: .max),
            ControlRequest(command: "terminate", now: true),
            ControlRequest(command: "history", arguments: ["quote \" backslash \\ newline \n nul \u{0} é"]),
        ]
        for request in requests {
            let line = ControlProtocol.encode(request)
            #expect(line.last == UInt8(ascii: "\n") && line.dropLast().allSatisfy { $0 != UInt8(ascii: "\n") })
            #expect(try ControlRequest(json: Array(line.dropLast())) == request)
        }
        let responses = [
            ControlResponse.failure("no open background task #r9"),
            ControlResponse(
                ok: true,
                status: ControlStatus(
                    state: "background", pid: 4321, openBackgroundTasks: 2, backgroundTimeRemaining: 29.75,
                    terminating: false)),
            ControlResponse(
                ok: true,
                status: ControlStatus(
                    state: "suspended", pid: 1, openBackgroundTasks: 0, backgroundTimeRemaining: 0, terminating: false,
                    parts: ["logind: no delay lock; last: PrepareForSleep(true)", "next run: \"job\" at 12:00"])),
            ControlResponse(
                ok: true,
                tasks: [
                    ControlTask(
                        id: 9_223_372_036_854_775_809, displayID: "#q1", name: "upload\tsegment",
                        callSite: "main.swift:12",
                        ageSeconds: 1.0e-05, remainingSeconds: nil, expired: true)
                ]),
            ControlResponse(ok: true, message: "line one\nline two"),
        ]
        for response in responses {
            let line = ControlProtocol.encode(response)
            #expect(try ControlResponse(json: Array(line.dropLast())) == response)
        }
        // Members sorted, as the daemon has always written them.
        #expect(
            String(decoding: ControlProtocol.encode(.failure("x")), as: UTF8.self) == "{\"error\":\"x\",\"ok\":false}\n"
        )
    }

    /// Random documents: what this writer writes, Foundation reads as the same value; what
    /// Foundation writes, this reader reads as the same value.
    @Test func agreesWithFoundationOnRandomDocuments() throws {
        var generator = SplitMix64(seed: 0x6a50_4e11)
        for _ in 0..<500 {
            let value = Self.randomValue(&generator, depth: 0)
            let ours = value.serialized
            let theirs = try JSONSerialization.jsonObject(with: Data(ours), options: [.fragmentsAllowed])
            #expect(Self.same(value, theirs), "\(String(decoding: ours, as: UTF8.self))")
            let written = try JSONSerialization.data(withJSONObject: theirs, options: [.fragmentsAllowed])
            let readBack = try JSONValue(parsing: Array(written))
            #expect(Self.same(readBack, theirs), "\(String(decoding: written, as: UTF8.self))")
        }
    }

    private static func randomValue(_ generator: inout SplitMix64, depth: Int) -> JSONValue {
        switch generator.next() % (depth > 3 ? 4 : 6) {
        case 0: return .bool(generator.next() % 2 == 0)
        case 1: return JSONValue(Int64(bitPattern: generator.next()) >> Int64(generator.next() % 64))
        case 2: return JSONValue(Double(Int64(bitPattern: generator.next()) % 1_000_000) / 1024)
        case 3:
            let scalars = (0..<generator.next() % 12).compactMap { _ -> Character? in
                let pick = generator.next()
                let value = [UInt32(pick % 0x80), UInt32(0xA0 + pick % 0x700), UInt32(0x1F600 + pick % 0x40)][
                    Int(pick >> 60) % 3]
                return Unicode.Scalar(value).map(Character.init)
            }
            return .string(String(scalars))
        case 4:
            return .array((0..<generator.next() % 4).map { _ in randomValue(&generator, depth: depth + 1) })
        default:
            var members: [String: JSONValue] = [:]
            for index in 0..<generator.next() % 4 {
                members["k\(index)\(generator.next() % 3 == 0 ? "\"\\/" : "")"] = randomValue(
                    &generator, depth: depth + 1)
            }
            return .object(members)
        }
    }

    /// Whether Foundation's reading of a document is `value`.
    private static func same(_ value: JSONValue, _ foundation: Any) -> Bool {
        switch value {
        case .null: return foundation is NSNull
        case .bool(let flag): return (foundation as? Bool) == flag
        case .number(let literal):
            if let integer = Int64(literal) {
                return (foundation as? NSNumber)?.int64Value == integer
            }
            return (foundation as? NSNumber)?.doubleValue == Double(literal)
        case .string(let text): return (foundation as? String) == text
        case .array(let elements):
            guard let theirs = foundation as? [Any], theirs.count == elements.count else { return false }
            return zip(elements, theirs).allSatisfy { same($0, $1) }
        case .object(let members):
            guard let theirs = foundation as? [String: Any], theirs.count == members.count else { return false }
            return members.allSatisfy { name, member in theirs[name].map { same(member, $0) } ?? false }
        }
    }
}

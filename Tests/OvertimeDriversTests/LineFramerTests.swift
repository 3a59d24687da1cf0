import OvertimeTestSupport
import Testing

@testable import Overtime

@Suite("LineFramer: request framing")
struct LineFramerTests {
    @Test func splitsLinesAcrossChunksAndDropsCarriageReturns() {
        var framer = LineFramer(limit: 16)
        #expect(framer.feed(Array("ab".utf8)) == [])
        #expect(framer.feed(Array("c\r\nde\nf".utf8)) == [.line(Array("abc".utf8)), .line(Array("de".utf8))])
        #expect(framer.feed(Array("\n".utf8)) == [.line(Array("f".utf8))])
    }

    @Test func refusesALineOverTheLimit() {
        var framer = LineFramer(limit: 4)
        #expect(framer.feed(Array("abcd".utf8)) == [])
        #expect(framer.feed(Array("e".utf8)) == [.tooLong])
    }
}

import OvertimeSupport
import Testing

@Suite("Base64: RFC 4648's vectors and round trips")
struct Base64Tests {
    @Test func theRFCVectorsBothWays() {
        let vectors = [
            ("", ""), ("f", "Zg=="), ("fo", "Zm8="), ("foo", "Zm9v"), ("foob", "Zm9vYg=="), ("fooba", "Zm9vYmE="),
            ("foobar", "Zm9vYmFy"),
        ]
        for (plain, encoded) in vectors {
            #expect(Base64.encode(Array(plain.utf8)) == encoded)
            #expect(Base64.decode(encoded) == Array(plain.utf8))
        }
    }

    @Test func everyByteSurvivesARoundTrip() {
        var generator = SystemRandomNumberGenerator()
        for length in 0..<70 {
            let bytes = (0..<length).map { _ in UInt8.random(in: 0...255, using: &generator) }
            #expect(Base64.decode(Base64.encode(bytes)) == bytes)
        }
    }

    @Test func whatIsNotBase64IsNil() {
        for text in ["Zg=", "Z===", "Zg==Zg==", "Zm9v!", "Zm 9", "=Zm9", "Zm=v"] {
            #expect(Base64.decode(text) == nil, "\(text)")
        }
    }
}

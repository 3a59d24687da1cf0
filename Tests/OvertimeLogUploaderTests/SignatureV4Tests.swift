import Overtime
import Testing

@testable import OvertimeLogUploader

/// Signatures botocore 1.43 (`S3SigV4Auth`) computed for fixed requests, times and keys: our
/// signer must produce the same `Authorization` header byte for byte.
@Suite("AWS Signature Version 4 against botocore's signatures for fixed inputs")
struct SignatureV4Tests {
    struct Vector: CustomTestStringConvertible {
        let name: String
        let method: String
        let host: String
        let path: String
        var query: [(name: String, value: String)] = []
        let headers: [(name: String, value: String)]
        let body: [UInt8]
        let credentials: S3Credentials
        let region: String
        let epochSeconds: Int64
        let payloadHash: String
        let authorization: String

        var testDescription: String { name }
    }

    static let exampleKeys = S3Credentials(
        accessKeyID: "AKIDEXAMPLE", secretAccessKey: "wJalrXUtnFEMI/K7MDENG+bPxRfiCYEXAMPLEKEY")

    static let vectors: [Vector] = [
        Vector(
            name: "PUT with a checksum and If-None-Match, path-style",
            method: "PUT", host: "127.0.0.1:8333", path: "/logs/fleet/0f8e/00000000000000000001.log",
            headers: [
                ("Content-Type", "application/octet-stream"), ("If-None-Match", "*"),
                ("x-amz-checksum-crc32c", "mnG7TA=="),
            ],
            body: Array("hello".utf8), credentials: exampleKeys, region: "us-east-1", epochSeconds: 1_795_383_005,
            payloadHash: "2cf24dba5fb0a30e26e83b2ac5b9e29e1b161e5c1fa7425e73043362938b9824",
            authorization: "AWS4-HMAC-SHA256 Credential=AKIDEXAMPLE/20261122/us-east-1/s3/aws4_request, "
                + "SignedHeaders=content-type;host;if-none-match;x-amz-checksum-crc32c;x-amz-content-sha256;"
                + "x-amz-date, Signature=639010fea14f65c54220222e96caa6efd0787b46119d1df481e16eeb370488b3"),
        Vector(
            name: "PUT of a zstd object with a session token, virtual-hosted, escaped key",
            method: "PUT", host: "my-bucket.s3.eu-central-1.amazonaws.com",
            path: "/" + SignatureV4.encode("a b/c+d/00000000000000000002.log.zst", keepingSlashes: true),
            headers: [
                ("Content-Type", "application/octet-stream"), ("Content-Encoding", "zstd"), ("If-None-Match", "*"),
                ("x-amz-checksum-crc32c", "AAAAAA=="),
            ],
            body: Array(repeating: Array(0...255), count: 4).flatMap { $0 },
            credentials: S3Credentials(
                accessKeyID: "ASIAEXAMPLE", secretAccessKey: "secret/with+chars=",
                sessionToken: "FQoGZXIvYXdzEXAMPLETOKEN//+=="),
            region: "eu-central-1", epochSeconds: 1_893_553_445,
            payloadHash: "785b0751fc2c53dc14a4ce3d800e69ef9ce1009eb327ccf458afe09c242c26c9",
            authorization: "AWS4-HMAC-SHA256 Credential=ASIAEXAMPLE/20300102/eu-central-1/s3/aws4_request, "
                + "SignedHeaders=content-encoding;content-type;host;if-none-match;x-amz-checksum-crc32c;"
                + "x-amz-content-sha256;x-amz-date;x-amz-security-token, "
                + "Signature=65322e20648e973debb059fd00eb23006e0386a889b701cb37ae640a6a1ab6e9"),
        Vector(
            name: "GET with checksum mode, a second before midnight",
            method: "GET", host: "localhost:9000", path: "/logs/p/s/1.log",
            headers: [("x-amz-checksum-mode", "ENABLED")], body: [], credentials: exampleKeys, region: "us-east-1",
            epochSeconds: 1_769_903_999,
            payloadHash: "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855",
            authorization: "AWS4-HMAC-SHA256 Credential=AKIDEXAMPLE/20260131/us-east-1/s3/aws4_request, "
                + "SignedHeaders=host;x-amz-checksum-mode;x-amz-content-sha256;x-amz-date, "
                + "Signature=1b56bb1507297c6cae8ba8d8d7b7de94bd96ee6e47ec7b1023a29272c2b9be4d"),
        Vector(
            name: "GET with a query: an empty value, an escaped one, unsorted",
            method: "GET", host: "127.0.0.1:8333", path: "/logs",
            query: [("uploads", ""), ("prefix", "fleet/"), ("max-uploads", "1000")],
            headers: [], body: [], credentials: exampleKeys, region: "us-west-2", epochSeconds: 1_780_272_000,
            payloadHash: "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855",
            authorization: "AWS4-HMAC-SHA256 Credential=AKIDEXAMPLE/20260601/us-west-2/s3/aws4_request, "
                + "SignedHeaders=host;x-amz-content-sha256;x-amz-date, "
                + "Signature=9909b810a6c596e1ea51d44bb5cf5d64361f08b3081db498268a9d8ce58e444f"),
    ]

    @Test(arguments: vectors)
    func theAuthorizationHeaderIsBotocores(_ vector: Vector) throws {
        let payloadHash = Digests.hex(try Digests.sha256(vector.body))
        #expect(payloadHash == vector.payloadHash)
        let signer = SignatureV4(credentials: vector.credentials, region: vector.region)
        let request = SignatureV4.Request(
            method: vector.method, host: vector.host, encodedPath: vector.path, query: vector.query,
            headers: vector.headers, payloadHash: payloadHash)
        let headers = try signer.headers(for: request, at: WallClockInstant(secondsSinceEpoch: vector.epochSeconds))
        #expect(headers.last == "Authorization: " + vector.authorization)
        #expect(headers.contains("x-amz-content-sha256: " + vector.payloadHash))
        #expect(headers.contains("Host: " + vector.host))
        #expect(headers.contains { $0.hasPrefix("x-amz-security-token: ") } == (vector.credentials.sessionToken != nil))
    }

    @Test func theSecretAppearsInNoTextWePrint() throws {
        let credentials = S3Credentials(
            accessKeyID: "AKIDEXAMPLE", secretAccessKey: "very-secret-value", sessionToken: "token-value")
        var configuration = try S3SinkConfiguration(url: "s3://bucket/prefix", credentials: credentials)
        configuration.encoding = .zstd
        for text in ["\(credentials)", "\(configuration)", String(reflecting: configuration.description)] {
            #expect(!text.contains("very-secret-value") && !text.contains("token-value"), "\(text)")
        }
        #expect("\(credentials)".contains("AKIDEXAMPLE"))
    }

    @Test func hashesAndEncodingsMatchKnownValues() throws {
        // Python's hmac module: hmac.new(b"key", b"The quick brown fox", hashlib.sha256).
        #expect(
            Digests.hex(try Digests.hmacSHA256(key: Array("key".utf8), Array("The quick brown fox".utf8)))
                == "203d1e5cedd2d18f8c5a3beff0bd9c1ebcb97097dfcb288c46b00c9227fde2c0")
        #expect(Digests.crc32cHeaderValue(Array("hello".utf8)) == "mnG7TA==")
        #expect(Digests.base64([]) == "" && Digests.base64([0x66]) == "Zg==" && Digests.base64([0x66, 0x6F]) == "Zm8=")
        #expect(Digests.base64(Array("foobar".utf8)) == "Zm9vYmFy")
        #expect(SignatureV4.encode("a b/c~d_e.f-g+h=", keepingSlashes: true) == "a%20b/c~d_e.f-g%2Bh%3D")
        #expect(SignatureV4.encode("a/b") == "a%2Fb")
        #expect(SignatureV4.encode("ü") == "%C3%BC")
    }
}

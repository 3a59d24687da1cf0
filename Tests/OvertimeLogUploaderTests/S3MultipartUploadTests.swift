import Testing

@testable import OvertimeLogUploader

@Suite("S3 multipart uploads: parts, the completion document, the list of unfinished uploads")
struct S3MultipartUploadTests {
    @Test func anObjectIsCutIntoPartsOfTheSizeAskedWithASmallerLast() {
        let mebibyte = 1 << 20
        #expect(
            S3MultipartUpload.partRanges(objectBytes: 11 * mebibyte, partBytes: 5 * mebibyte) == [
                0..<5 * mebibyte, 5 * mebibyte..<10 * mebibyte, 10 * mebibyte..<11 * mebibyte,
            ])
        #expect(S3MultipartUpload.partRanges(objectBytes: 10 * mebibyte, partBytes: 5 * mebibyte).count == 2)
        #expect(S3MultipartUpload.partRanges(objectBytes: 3, partBytes: 5 * mebibyte) == [0..<3])
        #expect(S3MultipartUpload.partRanges(objectBytes: 0, partBytes: 5 * mebibyte) == [0..<0])
    }

    @Test(arguments: [1 << 20, 5 << 20, 123_456_789])
    func partsCoverTheObjectOnceInOrderAndNeverExceedS3sLimit(_ partBytes: Int) {
        for objectBytes in [1, 5 << 20, (5 << 20) + 1, 60_000_000_000] {
            let ranges = S3MultipartUpload.partRanges(objectBytes: objectBytes, partBytes: partBytes)
            #expect(ranges.first?.lowerBound == 0 && ranges.last?.upperBound == objectBytes)
            #expect(zip(ranges, ranges.dropFirst()).allSatisfy { $0.upperBound == $1.lowerBound })
            #expect(ranges.count <= S3MultipartUpload.maximumParts)
            #expect(ranges.dropLast().allSatisfy { $0.count >= partBytes }, "only the last part is smaller")
        }
    }

    @Test func theCompletionListsEachPartWithItsETagAndChecksumEscaped() {
        let document = S3MultipartUpload.completion([
            .init(number: 1, etag: "\"0e65\"", checksum: "gc9IVQ=="),
            .init(number: 2, etag: "\"43b0\"", checksum: "a+b/"),
        ])
        #expect(
            document
                == "<CompleteMultipartUpload xmlns=\"http://s3.amazonaws.com/doc/2006-03-01/\">"
                + "<Part><PartNumber>1</PartNumber><ETag>&quot;0e65&quot;</ETag><ChecksumCRC32C>gc9IVQ==</ChecksumCRC32C></Part>"
                + "<Part><PartNumber>2</PartNumber><ETag>&quot;43b0&quot;</ETag><ChecksumCRC32C>a+b/</ChecksumCRC32C></Part>"
                + "</CompleteMultipartUpload>")
    }

    @Test func aListingPageIsReadWithItsMarkers() {
        let page = S3UploadListing(
            """
            <?xml version="1.0" encoding="UTF-8"?>
            <ListMultipartUploadsResult><Bucket>logs</Bucket><KeyMarker></KeyMarker><UploadIdMarker></UploadIdMarker>\
            <NextKeyMarker>p/s/2.log</NextKeyMarker><NextUploadIdMarker>id&amp;2</NextUploadIdMarker>\
            <MaxUploads>2</MaxUploads><IsTruncated>true</IsTruncated>\
            <Upload><Key>p/s/1.log</Key><UploadId>id1</UploadId><Initiator><ID>x</ID></Initiator></Upload>\
            <Upload><Key>p/s/a&lt;b&#x2F;2.log</Key><UploadId>id&amp;2</UploadId></Upload>\
            <Upload><Key>no upload id</Key></Upload>\
            </ListMultipartUploadsResult>
            """)
        #expect(
            page.uploads == [.init(key: "p/s/1.log", uploadID: "id1"), .init(key: "p/s/a<b/2.log", uploadID: "id&2")])
        #expect(page.next == .init(key: "p/s/2.log", uploadID: "id&2"))
        let last = S3UploadListing(
            "<ListMultipartUploadsResult><IsTruncated>false</IsTruncated></ListMultipartUploadsResult>")
        #expect(last.uploads.isEmpty && last.next == nil)
    }

    @Test(arguments: [
        ("plain", "plain"), ("a&amp;b", "a&b"), ("&lt;&gt;&quot;&apos;", "<>\"'"), ("&#65;&#x42;", "AB"),
        ("&unknown; &#xZZ;", "&unknown; &#xZZ;"), ("dangling &amp", "dangling &amp"),
    ])
    func entitiesAreDecodedAndUnknownOnesKept(_ text: String, _ decoded: String) {
        #expect(S3XML.decoded(text[...]) == decoded)
    }
}

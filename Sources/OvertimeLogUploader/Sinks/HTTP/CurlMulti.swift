import CLibCurl
import CLibUV
import Overtime

#if canImport(Glibc)
    import Glibc
#endif

/// libcurl's multi-socket interface driven by the runtime's own libuv loop: no thread of
/// its own, no second event loop. curl says which sockets to watch (one `uv_poll_t`
/// each) and when to wake it (one `uv_timer_t`); libuv says what happened.
///
/// Confined to the loop thread; created lazily by the first transfer.
final class CurlMulti {
    private let context: DriverContext
    private let multi: UnsafeMutableRawPointer
    private let timer: UnsafeMutablePointer<uv_timer_t>
    private var transfers: [UnsafeMutableRawPointer: CurlTransfer] = [:]
    private var isShutDown = false

    init(context: DriverContext) {
        self.context = context
        multi = overtime_curl_multi_init()
        timer = context.makeHandle(uv_timer_t.self)
        uv_timer_init(context.loop, timer)
        let unretained = Unmanaged.passUnretained(self).toOpaque()
        timer.pointee.data = unretained
        overtime_multi_setopt_pointer(multi, CURLMOPT_SOCKETDATA, unretained)
        overtime_multi_setopt_pointer(multi, CURLMOPT_TIMERDATA, unretained)
        overtime_multi_setopt_socket_function(multi) { _, socket, action, context, socketContext in
            Unmanaged<CurlMulti>.fromOpaque(context!).takeUnretainedValue()
                .watch(socket: socket, action: action, poll: socketContext)
            return 0
        }
        overtime_multi_setopt_timer_function(multi) { _, milliseconds, context in
            Unmanaged<CurlMulti>.fromOpaque(context!).takeUnretainedValue().setTimer(milliseconds: milliseconds)
            return 0
        }
        context.onShutdown { [self] in shutDown() }
    }

    /// Starts `transfer`. Loop thread.
    func start(_ transfer: CurlTransfer) {
        context.assertOnLoop()
        guard !isShutDown else {
            transfer.finish(.failure(.retryable("the runtime is shutting down", retryAfter: nil)))
            return
        }
        transfers[transfer.easy] = transfer
        let status = overtime_curl_multi_add_handle(multi, transfer.easy)
        if status != CURLM_OK {
            transfers.removeValue(forKey: transfer.easy)
            transfer.finish(
                .failure(.retryable(String(cString: overtime_curl_multi_strerror(status)), retryAfter: nil)))
        }
    }

    /// Aborts `transfer` if it is still running. Loop thread.
    func cancel(_ transfer: CurlTransfer) {
        context.assertOnLoop()
        guard transfers.removeValue(forKey: transfer.easy) != nil else { return }
        overtime_curl_multi_remove_handle(multi, transfer.easy)
        transfer.finish(.failure(.cancelled))
    }

    private func watch(socket: curl_socket_t, action: Int32, poll existing: UnsafeMutableRawPointer?) {
        if action == CURL_POLL_REMOVE {
            if let existing {
                let poll = existing.assumingMemoryBound(to: uv_poll_t.self)
                uv_poll_stop(poll)
                uv_close(UnsafeMutableRawPointer(poll).assumingMemoryBound(to: uv_handle_t.self)) { handle in
                    UnsafeMutableRawPointer(handle!).deallocate()
                }
                overtime_curl_multi_assign(multi, socket, nil)
            }
            return
        }
        let poll: UnsafeMutablePointer<uv_poll_t>
        if let existing {
            poll = existing.assumingMemoryBound(to: uv_poll_t.self)
        } else {
            poll = .allocate(capacity: 1)
            uv_poll_init_socket(context.loop, poll, socket)
            poll.pointee.data = Unmanaged.passUnretained(self).toOpaque()
            overtime_curl_multi_assign(multi, socket, poll)
        }
        var events: Int32 = 0
        if action & CURL_POLL_IN != 0 { events |= Int32(UV_READABLE.rawValue) }
        if action & CURL_POLL_OUT != 0 { events |= Int32(UV_WRITABLE.rawValue) }
        uv_poll_start(poll, events) { poll, status, events in
            let driver = Unmanaged<CurlMulti>.fromOpaque(poll!.pointee.data).takeUnretainedValue()
            var fd: uv_os_fd_t = -1
            uv_fileno(UnsafeMutableRawPointer(poll!).assumingMemoryBound(to: uv_handle_t.self), &fd)
            var flags: Int32 = 0
            if status < 0 { flags |= CURL_CSELECT_ERR }
            if events & Int32(UV_READABLE.rawValue) != 0 { flags |= CURL_CSELECT_IN }
            if events & Int32(UV_WRITABLE.rawValue) != 0 { flags |= CURL_CSELECT_OUT }
            driver.context.turn { driver.act(socket: fd, flags: flags) }
        }
    }

    private func setTimer(milliseconds: Int) {
        guard milliseconds >= 0 else {
            uv_timer_stop(timer)
            return
        }
        uv_timer_start(
            timer,
            { timer in
                let driver = Unmanaged<CurlMulti>.fromOpaque(timer!.pointee.data).takeUnretainedValue()
                driver.context.turn { driver.act(socket: CURL_SOCKET_TIMEOUT, flags: 0) }
            }, UInt64(milliseconds), 0)
    }

    private func act(socket: curl_socket_t, flags: Int32) {
        var running: Int32 = 0
        overtime_curl_multi_socket_action(multi, socket, flags, &running)
        var left: Int32 = 0
        while let message = overtime_curl_multi_info_read(multi, &left) {
            guard message.pointee.msg == CURLMSG_DONE, let easy = message.pointee.easy_handle else { continue }
            let result = message.pointee.data.result
            overtime_curl_multi_remove_handle(multi, easy)
            guard let transfer = transfers.removeValue(forKey: easy) else { continue }
            transfer.completed(result)
        }
    }

    private func shutDown() {
        isShutDown = true
        for transfer in transfers.values {
            overtime_curl_multi_remove_handle(multi, transfer.easy)
            transfer.finish(.failure(.retryable("the runtime shut down during the upload", retryAfter: nil)))
        }
        transfers = [:]
        uv_timer_stop(timer)
        overtime_curl_multi_cleanup(multi)  // removes its sockets first, closing their polls
    }
}

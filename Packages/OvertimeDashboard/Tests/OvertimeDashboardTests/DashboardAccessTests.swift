import Foundation
import OvertimeScheduler
import Testing

@testable import OvertimeDashboard

#if canImport(Glibc)
    import Glibc
#endif

/// The dashboard as an attacker and a careless operator meet it, over real HTTP against a
/// real daemon: nothing without credentials, no action without the session's CSRF token or
/// from another site, nothing an identifier or output holds becomes markup, a read-only
/// dashboard acts on nothing, and credentials others can read are refused.
@Suite("Dashboard access and safety", .serialized, .timeLimit(.minutes(3)))
struct DashboardAccessTests {
    static let pages = [
        "/overview", "/requests", "/running", "/history", "/failed", "/instances", "/actions", "/request?id=ok.done",
    ]
    static let xss = "xss.<img src=x onerror=alert(1)>"

    @Test func nothingIsShownOrDoneWithoutCredentials() async throws {
        let dashboard = try DashboardUnderTest()
        defer { dashboard.stop() }
        for page in Self.pages {
            let answer = try Curl.request(dashboard.url + page)
            #expect(answer.status == 303 && answer.headers["location"] == "/login", "\(page): \(answer.status)")
            #expect(!answer.body.contains("ok.done"))
            let wrong = try Curl.request(dashboard.url + page, bearer: "not-a-token-of-anyone-here")
            #expect(wrong.status == 401, "\(page) with an unknown token: \(wrong.status)")
        }
        #expect(try Curl.request(dashboard.url + "/events").status == 401)
        let post = try Curl.post(dashboard.url + "/request/run?id=ok.queued", form: ["csrf": "x"])
        #expect(post.status == 401)
        let refused = try Curl.post(dashboard.url + "/login", form: ["token": "guess-guess-guess-guess"])
        #expect(refused.status == 401 && refused.headers["set-cookie"] == nil)
        #expect(try await dashboard.history("ok.queued").isEmpty, "nothing ran")
        // A program with a token sees the pages.
        let seen = try Curl.request(dashboard.url + "/requests?state=all", bearer: dashboard.token)
        #expect(seen.status == 200 && seen.body.contains("ok.done"))
    }

    @Test func everyPageIsEscapedAndCarriesAStrictPolicy() throws {
        let dashboard = try DashboardUnderTest()
        defer { dashboard.stop() }
        let escapedID = "xss.%3Cimg%20src%3Dx%20onerror%3Dalert%281%29%3E"
        for page in Self.pages + [
            "/requests?state=all", "/history?prefix=xss.", "/request?id=\(escapedID)", "/request/run?id=\(escapedID)",
            "/requests?prefix=%3Cscript%3E&tag=%22%3E%3Cb%3E", "/request?id=%3Cscript%3Ealert(3)%3C/script%3E",
            "/no-such-page", "/assets/none.js", "/request/run/more",
        ] {
            let answer = try Curl.request(dashboard.url + page, bearer: dashboard.token)
            #expect([200, 404].contains(answer.status), "\(page): \(answer.status)")
            let policy = answer.headers["content-security-policy"] ?? ""
            #expect(policy.contains("default-src 'none'") && policy.contains("script-src 'self'"), "\(page)")
            #expect(!policy.contains("unsafe-inline") && !policy.contains("unsafe-eval"))
            #expect(
                answer.headers["x-frame-options"] == "DENY" && answer.headers["x-content-type-options"] == "nosniff")
            #expect(!answer.body.contains("<img"), "\(page) has markup from an identifier")
            #expect(!answer.body.contains("<script>"), "\(page) has markup from an output or a query")
            #expect(!answer.body.contains("<b>"))
            #expect(answer.body.components(separatedBy: "<script").count - 1 <= 1, "only the dashboard's own script")
        }
        // A page not found, signed in or not, by any method: the same headers.
        for (method, page) in [("GET", "/nope"), ("POST", "/nope"), ("DELETE", "/requests")] {
            let answer = try Curl.request(dashboard.url + page, method: method)
            #expect(answer.status == 404 && answer.headers["x-frame-options"] == "DENY", "\(method) \(page)")
            #expect(answer.headers["content-security-policy"]?.contains("default-src 'none'") == true)
        }
        // A right-to-left override in an identifier is shown, not obeyed.
        let failed = try Curl.request(dashboard.url + "/failed", bearer: dashboard.token)
        #expect(failed.body.contains("fail.invoice-[U+202E]gnp.exe") && !failed.body.contains("\u{202E}"))
        let story = try Curl.request(dashboard.url + "/request?id=\(escapedID)", bearer: dashboard.token)
        #expect(story.body.contains("xss.&lt;img src=x onerror=alert(1)&gt;"))
        #expect(story.body.contains("&lt;script&gt;alert(&#39;output&#39;)&lt;/script&gt;"), "the output, as text")
    }

    @Test func anActionNeedsTheSessionsFormAndIsRecordedWithWhoDidIt() async throws {
        let dashboard = try DashboardUnderTest()
        defer { dashboard.stop() }
        let jar = try Curl.signIn(dashboard.url, token: dashboard.token, folder: dashboard.folder)
        let confirm = try Curl.request(dashboard.url + "/request/cancel?id=ok.later", jar: jar)
        #expect(confirm.status == 200)
        let csrf = try #require(Curl.csrf(in: confirm.body))
        // Without the token, with another's, from another site: refused, nothing changed.
        let target = dashboard.url + "/request/cancel?id=ok.later"
        #expect(try Curl.post(target, form: [:], jar: jar).status == 403)
        #expect(try Curl.post(target, form: ["csrf": String(csrf.reversed())], jar: jar).status == 403)
        let bobJar = try Curl.signIn(dashboard.url, token: dashboard.otherToken, folder: dashboard.folder)
        let bobsPage = try Curl.request(dashboard.url + "/requests", jar: bobJar)
        let bobs = try #require(Curl.csrf(in: bobsPage.body))
        #expect(bobs != csrf, "each session its own token")
        #expect(try Curl.post(target, form: ["csrf": bobs], jar: jar).status == 403)
        let crossSite = try Curl.post(
            target, form: ["csrf": csrf], jar: jar, headers: ["Origin: http://evil.example"])
        #expect(crossSite.status == 403)
        #expect(try await dashboard.inspected("ok.later")?.state == .enqueued, "not cancelled by any of those")

        let done = try #require(try Curl.confirm(target, jar: jar).outcome)
        #expect(done.status == 200 && done.body.contains("Done: cancelled"), "\(done.body)")
        #expect(try await dashboard.inspected("ok.later")?.state == .cancelled)
        let run = try #require(try Curl.confirm(dashboard.url + "/request/run?id=ok.queued", jar: jar).outcome)
        #expect(run.status == 200, "\(run.body)")
        #expect(try await waitFor { try await dashboard.history("ok.queued").contains { $0.result == .succeeded } })
        // Refused by the daemon (finished): said, recorded, nothing changed.
        let again = try #require(try Curl.confirm(target, jar: jar).outcome)
        #expect(again.status == 200 || again.status == 409)
        // What failed for good, submitted again: pending again, waiting for its turn (the
        // fixture's one run at a time is held by hang.running).
        let failedPage = try Curl.request(dashboard.url + "/failed", jar: jar)
        #expect(failedPage.body.contains("/request/retry?id=fail.broken"), "a retry link on the failed page")
        #expect(!failedPage.body.contains("/request/retry?id=ok."))
        let retried = try #require(try Curl.confirm(dashboard.url + "/request/retry?id=fail.broken", jar: jar).outcome)
        #expect(retried.status == 200 && retried.body.contains("Done: submitted"), "\(retried.body)")
        let pendingAgain = try #require(try await dashboard.inspected("fail.broken"))
        #expect(pendingAgain.state == .blocked && pendingAgain.attempt == 1, "\(pendingAgain.state)")
        #expect(try await dashboard.history("fail.broken").count == 1, "its failure stays in its history")
        let refusedRetry = try #require(try Curl.confirm(dashboard.url + "/request/retry?id=ok.done", jar: jar).outcome)
        #expect(refusedRetry.status == 409 && refusedRetry.body.contains("succeeded"), "\(refusedRetry.body)")
        let story = try Curl.request(dashboard.url + "/request?id=ok.later", jar: jar)
        #expect(story.body.contains("Done from this dashboard") && story.body.contains("<td>alice</td><td>cancel</td>"))
        let log = DashboardUnderTest.read(dashboard.actionLog).split(separator: "\n")
        #expect(log.count == 5, "\(log)")
        #expect(log.first?.contains(#""user":"alice""#) == true && log.first?.contains(#""action":"cancel""#) == true)
        #expect(log.dropFirst().first?.contains(#""identifier":"ok.queued""#) == true)
        let page = try Curl.request(dashboard.url + "/actions", jar: jar)
        #expect(page.body.contains("<td>alice</td><td>cancel</td>"))
        // Signing out ends the session: its cookie and token open nothing any more.
        #expect(try Curl.post(dashboard.url + "/logout", form: ["csrf": csrf], jar: jar).status == 303)
        let after = try Curl.request(dashboard.url + "/requests", jar: jar)
        #expect(after.status == 303)
        // Restarted, with a damaged line and a foreign one in its log: the records are shown
        // again, the other lines passed over, the file left as it was. A record dated beyond
        // what an instant holds is shown at the last one.
        let handle = try #require(FileHandle(forWritingAtPath: dashboard.actionLog))
        handle.seekToEndOfFile()
        handle.write(Data("{\"at\": \"2026-11-27T00:00:00Z\", \"user\": \"mallory\"\nnot json at all\n".utf8))
        handle.write(
            Data(
                (#"{"at": "9999-12-31T00:00:00Z", "user": "trent", "action": "cancel", "identifier": "ok.later", "#
                    + #""succeeded": true, "answer": "cancelled"}"# + "\n").utf8))
        try handle.close()
        let before = DashboardUnderTest.read(dashboard.actionLog)
        try dashboard.restartDashboard()
        let restarted = try Curl.request(dashboard.url + "/actions", bearer: dashboard.token)
        #expect(restarted.status == 200, "\(restarted.status)")
        #expect(restarted.body.contains("<td>alice</td><td>cancel</td>") && !restarted.body.contains("mallory"))
        #expect(restarted.body.contains("2262-04-11 23:47:16Z"), "the far date at the last instant")
        #expect(DashboardUnderTest.read(dashboard.actionLog) == before)
        let retold = try Curl.request(dashboard.url + "/request?id=ok.later", bearer: dashboard.token)
        #expect(retold.body.contains("Done from this dashboard"), "the request's page tells it after a restart")
    }

    /// One confirmation, one action: its form posted twice at once (a double click), once
    /// more later (sent again from the browser's history), and its outcome's page read again
    /// as the live script does after the schedule changed, start one run. A form without its
    /// confirmation's ticket, or with one of another action, request or session, does nothing.
    @Test func aConfirmedActionIsDoneOnceHoweverOftenItsFormIsPostedOrItsOutcomeRead() async throws {
        let dashboard = try DashboardUnderTest()
        defer { dashboard.stop() }
        let jar = try Curl.signIn(dashboard.url, token: dashboard.token, folder: dashboard.folder)
        let target = dashboard.url + "/request/run?id=ok.queued"
        let confirmation = try Curl.request(target, jar: jar)
        let csrf = try #require(Curl.csrf(in: confirmation.body))
        let ticket = try #require(Curl.ticket(in: confirmation.body))
        let cancels = try #require(
            Curl.ticket(in: try Curl.request(dashboard.url + "/request/cancel?id=ok.queued", jar: jar).body))
        let laters = try #require(
            Curl.ticket(in: try Curl.request(dashboard.url + "/request/run?id=ok.later", jar: jar).body))
        let bobJar = try Curl.signIn(dashboard.url, token: dashboard.otherToken, folder: dashboard.folder)
        let bobs = try #require(Curl.ticket(in: try Curl.request(target, jar: bobJar).body))
        for wrong in [nil, cancels, laters, bobs, String(ticket.reversed())] {
            var form = ["csrf": csrf]
            form["ticket"] = wrong
            let refused = try Curl.post(target, form: form, jar: jar)
            #expect(refused.status == 409 && refused.body.contains("Not done"), "\(wrong ?? "no ticket"): \(refused)")
        }
        #expect(DashboardUnderTest.read(dashboard.actionLog).isEmpty, "nothing done by those")

        let form = ["csrf": csrf, "ticket": ticket]
        // Posted at once: neither updates the jar the other reads (busy run 141: one sent no
        // cookie, read while the other's curl had truncated the jar, and was answered 401).
        async let first = onOwnThread { try Curl.post(target, form: form, jar: jar, updatingJar: false) }
        async let second = onOwnThread { try Curl.post(target, form: form, jar: jar, updatingJar: false) }
        var posts = try await [first, second]
        posts.append(try Curl.post(target, form: form, jar: jar))
        for post in posts {
            #expect(post.status == 303 && post.headers["location"] == "/action?ticket=\(ticket)", "\(post)")
        }
        let outcome = try Curl.request(dashboard.url + "/action?ticket=\(ticket)", jar: jar)
        #expect(outcome.status == 200 && outcome.body.contains("Done: started run"), "\(outcome.body)")
        #expect(try await waitFor { try await dashboard.history("ok.queued").contains { $0.result == .succeeded } })
        _ = try dashboard.control("submit", ["ok.meanwhile"])
        let reread = try Curl.request(
            dashboard.url + "/action?ticket=\(ticket)", jar: jar, headers: ["X-Overtime-Live: 1"])
        #expect(reread.status == 200 && reread.body.contains("Done: started run"))
        #expect(!reread.body.contains("name=\"ticket\"") && !reread.body.contains("action=\"/request/run"))
        #expect(try await dashboard.history("ok.queued").count == 1, "one run")
        let log = DashboardUnderTest.read(dashboard.actionLog).split(separator: "\n")
        #expect(log.count == 1 && log.first?.contains(#""action":"run""#) == true, "\(log)")
        // Another session does not read this one's outcome.
        #expect(try Curl.request(dashboard.url + "/action?ticket=\(ticket)", jar: bobJar).status == 404)
    }

    @Test func aBulkActionIsConfirmedForItsOwnSelectionAndRecordedByTheDaemonWithWhoDidIt() async throws {
        let dashboard = try DashboardUnderTest()
        defer { dashboard.stop() }
        let jar = try Curl.signIn(dashboard.url, token: dashboard.token, folder: dashboard.folder)
        let untagged = try Curl.request(dashboard.url + "/bulk/cancel-tag", jar: jar)
        #expect(untagged.status == 400 && untagged.body.contains("Give the tag"), "\(untagged)")
        let target = dashboard.url + "/bulk/cancel-tag?tag=weekly"
        let confirmation = try Curl.request(target, jar: jar)
        #expect(confirmation.body.contains("Cancel every pending request tagged weekly?"), "\(confirmation.body)")
        let csrf = try #require(Curl.csrf(in: confirmation.body))
        let ticket = try #require(Curl.ticket(in: confirmation.body))
        // The ticket is for this tag's cancel: not another tag's, nor another bulk action's.
        for other in ["/bulk/cancel-tag?tag=nightly", "/bulk/run-tag?tag=weekly", "/bulk/retry-failed?tag=weekly"] {
            let refused = try Curl.post(dashboard.url + other, form: ["csrf": csrf, "ticket": ticket], jar: jar)
            #expect(refused.status == 409 && refused.body.contains("Not done"), "\(other): \(refused)")
        }
        #expect(!(try dashboard.control("actions")).contains("dashboard"), "nothing done by those")
        let posted = try Curl.post(target, form: ["csrf": csrf, "ticket": ticket], jar: jar)
        #expect(posted.status == 303 && posted.headers["location"] == "/action?ticket=\(ticket)", "\(posted)")
        let outcome = try Curl.request(dashboard.url + "/action?ticket=\(ticket)", jar: jar)
        #expect(outcome.body.contains("Done: cancelled 2 requests tagged &#39;weekly&#39;"), "\(outcome.body)")
        #expect(try await dashboard.inspected("ok.hourly")?.state == .cancelled)
        let again = try Curl.post(target, form: ["csrf": csrf, "ticket": ticket], jar: jar)
        #expect(again.status == 303, "the same outcome, nothing done again: \(again)")
        let recorded = try dashboard.control("actions")
        let lines = recorded.split(separator: "\n").filter { $0.contains("cancel-tag") }
        #expect(
            lines.count == 1 && lines[0].contains("alice (dashboard)") && lines[0].contains("tag weekly"), "\(recorded)"
        )
        let page = try Curl.request(dashboard.url + "/actions", jar: jar)
        #expect(page.body.contains("Recorded by the scheduler") && page.body.contains("alice (dashboard)"))
    }

    /// Retiring an instance: refused while a process runs under its name, without the
    /// session's token, and for a schedule one daemon owns; a fleet's runs and cancels go
    /// through the instance's control socket (the dashboard joins no fleet).
    @Test func anInstanceIsRetiredOnlyWhenNoProcessRunsAsItAndOnlyInAFleet() async throws {
        let fleet = try DashboardUnderTest(fleet: true)
        defer { fleet.stop() }
        let jar = try Curl.signIn(fleet.url, token: fleet.token, folder: fleet.folder)
        let confirm = try Curl.request(fleet.url + "/instance/retire?id=beta", jar: jar)
        #expect(confirm.body.contains("Retire instance beta for good?") && Curl.ticket(in: confirm.body) != nil)
        let page = try Curl.request(fleet.url + "/instances", jar: jar)
        #expect(!page.body.contains("/instance/retire?id="), "no Retire offered while every instance runs")
        let running = try #require(try Curl.confirm(fleet.url + "/instance/retire?id=beta", jar: jar).outcome)
        #expect(running.status == 409 && running.body.contains("is running"), "\(running.body)")
        try await fleet.killMember()
        #expect(try Curl.post(fleet.url + "/instance/retire?id=beta", form: [:], jar: jar).status == 403)
        #expect(try await fleet.instances().first { $0.name == "beta" }?.requests == 1, "kept after those refusals")
        let cancelled = try #require(try Curl.confirm(fleet.url + "/request/cancel?id=ok.later", jar: jar).outcome)
        #expect(cancelled.status == 200 && cancelled.body.contains("Done: cancelled"), "\(cancelled.body)")
        #expect(try await fleet.inspected("ok.later")?.state == .cancelled)
        let retired = try #require(try Curl.confirm(fleet.url + "/instance/retire?id=beta", jar: jar).outcome)
        #expect(retired.status == 200 && retired.body.contains("1 request of its own removed"), "\(retired.body)")
        #expect(try await fleet.instances().allSatisfy { $0.name != "beta" })
        // A request the member submitted and no started instance has a handler for.
        let orphan = try Curl.request(fleet.url + "/request?id=orphan.waits", jar: jar)
        #expect(orphan.body.contains("a handler: no instance registers one for it (alpha; "), "\(orphan.body)")
        // The fleet's own requests (the shared schedule, the empty name) are never an instance's.
        let shared = try #require(try Curl.confirm(fleet.url + "/instance/retire?id=", jar: jar).outcome)
        #expect(shared.status == 409 && shared.body.contains("an instance name is needed"), "\(shared.body)")

        let single = try DashboardUnderTest()
        defer { single.stop() }
        let singleJar = try Curl.signIn(single.url, token: single.token, folder: single.folder)
        let none = try #require(try Curl.confirm(single.url + "/instance/retire?id=x", jar: singleJar).outcome)
        #expect(none.status == 409 && none.body.contains("there is no fleet instance to retire"), "\(none.body)")
    }

    /// Why has this not run? For a request the daemon has no handler for: a handler, as
    /// the daemon recorded its own when it started (it said "its turn" while the daemon
    /// logged "no handler"); for one due and waiting, its next run is as soon as it can, not
    /// a time past.
    @Test func whyARequestHasNotRunIsTheTrueAnswer() throws {
        let dashboard = try DashboardUnderTest()
        defer { dashboard.stop() }
        let story = try Curl.request(dashboard.url + "/request?id=orphan.waits", bearer: dashboard.token)
        #expect(story.body.contains("a handler: the daemon registers none for it (as it started"), "\(story.body)")
        #expect(!story.body.contains("its turn"))
        let pending = try Curl.request(dashboard.url + "/requests?prefix=orphan.", bearer: dashboard.token)
        #expect(pending.body.contains("a handler: the daemon registers none for it"))
        let queued = try Curl.request(dashboard.url + "/request?id=ok.queued", bearer: dashboard.token)
        #expect(queued.body.contains("its turn") && queued.body.contains("as soon as it can (due "), "\(queued.body)")
        let rows = try Curl.request(dashboard.url + "/requests?prefix=ok.queued", bearer: dashboard.token)
        #expect(rows.body.contains(">as soon as it can (due "), "\(rows.body)")
    }

    /// The page of what failed for good shows beside each request its newest attempt, as
    /// its own history says, read for the whole page at once; on a daemon's store and a
    /// fleet's.
    @Test(arguments: [false, true]) func theFailedPageShowsEachRequestsNewestAttempt(fleet: Bool) async throws {
        let dashboard = try DashboardUnderTest(fleet: fleet)
        defer { dashboard.stop() }
        let newest = try #require(try await dashboard.history("fail.broken").first)
        let page = try Curl.request(dashboard.url + "/failed", bearer: dashboard.token)
        #expect(page.status == 200)
        #expect(
            page.body.contains("\(newest.result) (run \(newest.runID), attempt \(newest.attempt))"),
            "\(newest) in \(page.body)")
    }

    /// A request's story says how it repeats as `overtimectl` does, never as a Swift value.
    @Test func aRequestsRepetitionIsShownAsOvertimectlShowsIt() throws {
        let dashboard = try DashboardUnderTest()
        defer { dashboard.stop() }
        let shown = [
            "ok.hourly": "<dd>every 3600 s, up to 600 s early</dd>", "ok.nightly": "<dd>on *-*-* 02:30 UTC</dd>",
            "ok.queued": "<dd>once</dd>",
        ]
        for (identifier, repeats) in shown {
            let story = try Curl.request(dashboard.url + "/request?id=\(identifier)", bearer: dashboard.token)
            #expect(story.body.contains("<dt>Repeats</dt>" + repeats), "\(identifier)")
            #expect(!story.body.contains("Repetition("), "\(identifier)")
        }
        let listed = try dashboard.control("schedule")
        #expect(
            listed.contains("every 3600 s, up to 600 s early") && listed.contains("on *-*-* 02:30 UTC"), "\(listed)")
    }

    /// Guessing tokens and rebinding names: wrong sign-ins wait their turn for all clients
    /// together (a flood is refused at once, 429) while a right token gets in; each refusal
    /// is logged with the client's address; a request naming a host the dashboard is not
    /// known by is refused (421); a dashboard's session cookie is its own (two dashboards on
    /// one host do not sign each other out), and Secure behind a proxy that says TLS.
    @Test func guessingIsSlowForEveryoneAndADashboardAnswersOnlyToItsOwnNames() async throws {
        let dashboard = try DashboardUnderTest(dashboardArguments: ["--allowed-host", "dashboard.example"])
        defer { dashboard.stop() }
        let started = ContinuousClock.now
        let answers = try await withThrowingTaskGroup(of: (status: Int, after: Duration).self) { group in
            for guess in 0..<40 {
                group.addTask {
                    let answer = try await onOwnThread {
                        try Curl.post(dashboard.url + "/login", form: ["token": "guess-\(guess)-not-a-token-at-all"])
                    }
                    return (answer.status, .now - started)
                }
            }
            return try await group.reduce(into: []) { $0.append($1) }
        }
        let refused = answers.filter { $0.status == 401 }
        #expect(refused.count + answers.filter { $0.status == 429 }.count == 40, "\(answers)")
        // The k-th wrong answer waits for k pauses at least: the last of them, for all.
        let last = try #require(refused.map(\.after).max())
        #expect(last >= SignInThrottle.pause * refused.count, "\(refused.count) answered by \(last)")
        let jar = try Curl.signIn(dashboard.url, token: dashboard.token, folder: dashboard.folder)
        #expect(try Curl.request(dashboard.url + "/requests", jar: jar).status == 200, "the right token, after them")
        let log = DashboardUnderTest.read(dashboard.dashboardOutput)
        #expect(log.contains("the token is not known") && log.contains("client=[IPv4]127.0.0.1/127.0.0.1:"), "\(log)")

        // Names: addresses, localhost and the allowed name are answered; another name is not
        // (a bearer token: curl sends a jar's cookies to the name in the Host header only).
        for host in ["localhost:\(dashboard.port)", "dashboard.example", "DASHBOARD.example:443", "[::1]:80"] {
            let answer = try Curl.request(
                dashboard.url + "/requests", bearer: dashboard.token, headers: ["Host: \(host)"])
            #expect(answer.status == 200, "\(host): \(answer.status)")
        }
        for host in ["rebound.attacker.example:\(dashboard.port)", "dashboard.example.attacker.example", "[::1"] {
            let answer = try Curl.request(
                dashboard.url + "/requests", bearer: dashboard.token, headers: ["Host: \(host)"])
            #expect(answer.status == 421 && !answer.body.contains("ok.queued"), "\(host): \(answer.status)")
            let login = try Curl.post(
                dashboard.url + "/login", form: ["token": dashboard.token], headers: ["Host: \(host)"])
            #expect(login.status == 421 && login.headers["set-cookie"] == nil, "\(host): \(login.status)")
        }

        // Cookies: this dashboard's own name, Secure when a proxy says the browser uses TLS.
        let viaTLS = try Curl.post(
            dashboard.url + "/login", form: ["token": dashboard.token], headers: ["X-Forwarded-Proto: https"])
        let cookie = try #require(viaTLS.headers["set-cookie"])
        #expect(cookie.hasPrefix("overtime_dashboard_") && cookie.contains("Secure"), "\(cookie)")
        let plain = try Curl.post(dashboard.url + "/login", form: ["token": dashboard.token])
        #expect(plain.headers["set-cookie"]?.contains("Secure") == false)
        let other = try DashboardUnderTest()
        defer { other.stop() }
        _ = try Curl.post(other.url + "/login", form: ["token": other.token], jar: jar)
        #expect(try Curl.request(other.url + "/requests", jar: jar).status == 200)
        #expect(try Curl.request(dashboard.url + "/requests", jar: jar).status == 200, "still signed in to the first")
    }

    /// Defect 7: pages looked as ever while the daemon was down (only actions failed).
    /// While the schedule's owner does not answer — stopped (it accepts, never replies), or
    /// gone — every page says so and what follows; once it answers again, none does. On a
    /// fleet, of the instance the actions go through.
    @Test(arguments: [false, true]) func everyPageSaysSoWhileTheOwnerDoesNotAnswer(fleet: Bool) async throws {
        let dashboard = try DashboardUnderTest(fleet: fleet)
        defer { dashboard.stop() }
        let warning =
            fleet
            ? "The instance at \(dashboard.socket) does not answer"
            : "The daemon at \(dashboard.socket) does not answer"
        let read = { (page: String) throws -> Answer in
            try Curl.request(dashboard.url + page, bearer: dashboard.token)
        }
        // Whether `/requests` says it within 10 s (a page reuses the owner's answer of the
        // last 3 s).
        let becomes = { (warns: Bool) throws -> Bool in
            for _ in 0..<100 {
                if try read("/requests").body.contains("data-owner-down") == warns { return true }
                usleep(100_000)
            }
            return false
        }
        for page in Self.pages {
            let answer = try read(page)
            #expect(answer.status == 200 && !answer.body.contains("data-owner-down"), "\(page): \(answer.body)")
        }
        let daemon = try #require(dashboard.daemon).processIdentifier
        kill(daemon, SIGSTOP)
        #expect(try becomes(true), "stopped")
        let stopped = try read("/requests").body
        #expect(stopped.contains(warning) && stopped.contains("cannot be done until it answers"), "\(stopped)")
        kill(daemon, SIGCONT)
        #expect(try becomes(false), "answering again")
        kill(daemon, SIGKILL)
        #expect(try becomes(true), "gone")
        for page in Self.pages {
            let answer = try read(page)
            #expect(answer.status == 200 && answer.body.contains(warning), "\(page): \(answer.body)")
        }
        let signIn = try Curl.request(dashboard.url + "/login")
        #expect(!signIn.body.contains("data-owner-down"), "only for those signed in")
    }

    /// Defect 7: lists ran oldest first, with a next page only. Newest first by default
    /// (oldest first on asking), with the first, previous, next and last pages linked where
    /// there is one to go to; each page's rows are the ones a reader expects there.
    @Test func listsAreNewestFirstWithTheFirstPreviousNextAndLastPages() throws {
        let dashboard = try DashboardUnderTest()
        defer { dashboard.stop() }
        let names = (1...120).map { "ok.page." + String(1000 + $0).dropFirst() }  // ok.page.001 … ok.page.120
        for name in names { _ = try dashboard.control("submit", [name]) }
        struct Listed {
            let rows: [String]
            let links: [String: String]
        }
        let list = { (address: String) throws -> Listed in
            let body = try Curl.request(address, bearer: dashboard.token).body
            let rows = body.matches(of: /request\?id=(ok\.page\.[0-9]+)"/).map { String($0.output.1) }
            var links: [String: String] = [:]
            for link in body.matches(of: /<a href="([^"]+)"[^>]*>(« First|← Previous|Next →|Last »)<\/a>/) {
                links[String(link.output.2)] = String(link.output.1).replacingOccurrences(of: "&amp;", with: "&")
            }
            return Listed(rows: rows, links: links)
        }
        let newest = Array(names.reversed())
        let first = try list(dashboard.url + "/requests?prefix=ok.page.")
        #expect(first.rows == Array(newest[0..<50]))
        #expect(Set(first.links.keys) == ["Next →", "Last »"], "\(first.links)")
        let second = try list(dashboard.url + (first.links["Next →"] ?? ""))
        #expect(second.rows == Array(newest[50..<100]))
        #expect(Set(second.links.keys) == ["« First", "← Previous", "Next →", "Last »"], "\(second.links)")
        let back = try list(dashboard.url + (second.links["← Previous"] ?? ""))
        #expect(back.rows == first.rows)
        let last = try list(dashboard.url + (second.links["Last »"] ?? ""))
        #expect(last.rows == Array(newest[70..<120]), "the last 50")
        #expect(Set(last.links.keys) == ["« First", "← Previous"], "\(last.links)")
        let beforeLast = try list(dashboard.url + (last.links["← Previous"] ?? ""))
        #expect(beforeLast.rows == Array(newest[20..<70]))
        #expect(try list(dashboard.url + (beforeLast.links["Next →"] ?? "")).rows == last.rows)
        #expect(try list(dashboard.url + (last.links["« First"] ?? "")).rows == first.rows)
        let oldest = try list(dashboard.url + "/requests?prefix=ok.page.&order=oldest")
        #expect(oldest.rows == Array(names[0..<50]))
        let failed = try Curl.request(dashboard.url + "/failed?order=oldest", bearer: dashboard.token).body
        #expect(failed.contains("<option value=\"oldest\" selected>"), "\(failed)")
        // Positions and keys at the ends of their range, or not numbers: a page, not a crash.
        for address in [
            "/requests?order=oldest&after=9223372036854775807", "/requests?order=newest&after=-9223372036854775808",
            "/requests?order=next-run&after=9223372036854775807&key=9223372036854775807",
            "/requests?order=attempts&before=-9223372036854775808&key=-9223372036854775808",
            "/requests?order=last-run&before=9223372036854775807&key=x", "/requests?order=sideways&after=1e99",
            "/requests?order=last-run&after=9223372036854775807&key=-9223372036854775808",
            "/requests?order=last-run&after=-9223372036854775808&key=9223372036854775807&end=1",
        ] {
            let answer = try Curl.request(dashboard.url + address, bearer: dashboard.token)
            #expect(answer.status == 200, "\(address): \(answer.status)")
        }
        #expect(try Curl.request(dashboard.url + "/requests", bearer: dashboard.token).status == 200, "still answers")
        // A NUL, which no identifier or tag (nor any text PostgreSQL keeps) can hold: said so.
        for address in ["/requests?prefix=%00", "/requests?tag=a%00", "/history?q=%00", "/request?id=ok.%00"] {
            let answer = try Curl.request(dashboard.url + address, bearer: dashboard.token)
            #expect(
                answer.status == 400 && answer.body.contains("holds a NUL character"), "\(address): \(answer.status)")
        }
    }

    /// Defect 7 on the History page: it had an older page only. Newest first, with the
    /// first, newer (previous), older (next) and last pages linked where there is one; read
    /// down or up from the oldest, the same attempts.
    @Test func theHistoryHasTheFirstPreviousNextAndLastPages() throws {
        let dashboard = try DashboardUnderTest()
        defer { dashboard.stop() }
        let names = (1...120).map { "ok.attempt." + String(1000 + $0).dropFirst() }
        // Run now, each: the fixture's one run at a time is held.
        for name in names { _ = try (dashboard.control("submit", [name]), dashboard.control("run", [name])) }
        struct Listed {
            let rows: [String]
            let links: [String: String]
        }
        let list = { (address: String) throws -> Listed in
            let body = try Curl.request(address, bearer: dashboard.token).body
            // Each attempt's identifier and run: the row's first two cells.
            let rows = body.matches(of: /request\?id=(ok\.attempt\.[0-9]+)">[^<]*<\/a><\/td><td>([0-9]+)</).map {
                "\($0.output.1) \($0.output.2)"
            }
            var links: [String: String] = [:]
            for link in body.matches(of: /<a href="([^"]+)"[^>]*>(« First|← Previous|Next →|Last »)<\/a>/) {
                links[String(link.output.2)] = String(link.output.1).replacingOccurrences(of: "&amp;", with: "&")
            }
            return Listed(rows: rows, links: links)
        }
        let start = dashboard.url + "/history?prefix=ok.attempt."
        // Every one run once: the attempts read down, page after page.
        var down: [Listed] = []
        let ran = try waitFor {
            down = [try list(start)]
            while let next = down.last?.links["Next →"], down.count < 5 { down.append(try list(dashboard.url + next)) }
            return down.flatMap(\.rows).count == names.count
        }
        let every = down.flatMap(\.rows)
        // Required: the pages' rows are compared by position below.
        try #require(ran && Set(every.map { String($0.split(separator: " ")[0]) }) == Set(names), "\(every.count)")
        try #require(down.map(\.rows.count) == [50, 50, 20])
        #expect(Set(down[0].links.keys) == ["Next →", "Last »"], "\(down[0].links)")
        #expect(Set(down[1].links.keys) == ["« First", "← Previous", "Next →", "Last »"], "\(down[1].links)")
        #expect(Set(down[2].links.keys) == ["« First", "← Previous"], "\(down[2].links)")
        let back = try list(dashboard.url + (down[1].links["← Previous"] ?? ""))
        #expect(back.rows == down[0].rows, "the page before the second is the first")
        let last = try list(dashboard.url + (down[0].links["Last »"] ?? ""))
        #expect(last.rows == Array(every[70..<120]), "the oldest 50, newest first")
        #expect(Set(last.links.keys) == ["« First", "← Previous"], "\(last.links)")
        let beforeLast = try list(dashboard.url + (last.links["← Previous"] ?? ""))
        #expect(beforeLast.rows == Array(every[20..<70]))
        #expect(try list(dashboard.url + (beforeLast.links["Next →"] ?? "")).rows == last.rows)
        #expect(try list(dashboard.url + (last.links["« First"] ?? "")).rows == down[0].rows)
        // Positions at the ends of their range, or not positions: a page, not a crash.
        for position in [
            "after=9223372036854775807:9223372036854775807", "before=-9223372036854775808:-9223372036854775808",
            "after=-9223372036854775808:-9223372036854775808&end=1", "before=x:1", "after=1e99", "end=yes",
        ] {
            let answer = try Curl.request(start + "&" + position, bearer: dashboard.token)
            #expect(answer.status == 200, "\(position): \(answer.status)")
        }
        // Dates beyond what an instant holds (1677 to 2262) are its ends: a page, not a crash.
        for (dates, expected) in [
            ("from=9999-12-31", []), ("until=0001-01-01", []),
            ("from=0001-01-01&until=9999-12-31T23:59:59", down[0].rows),
        ] {
            let answer = try Curl.request(start + "&" + dates, bearer: dashboard.token)
            #expect(answer.status == 200, "\(dates): \(answer.status)")
            #expect(try list(start + "&" + dates).rows == expected, "\(dates)")
        }
    }

    @Test func aReadOnlyDashboardAndOneWithoutTheDaemonActOnNothing() async throws {
        let dashboard = try DashboardUnderTest(dashboardArguments: ["--read-only"])
        defer { dashboard.stop() }
        let jar = try Curl.signIn(dashboard.url, token: dashboard.token, folder: dashboard.folder)
        let story = try Curl.request(dashboard.url + "/request?id=ok.queued", jar: jar)
        #expect(story.status == 200 && !story.body.contains("Run now") && story.body.contains("read-only"))
        let csrf = try #require(Curl.csrf(in: story.body))
        #expect(try Curl.request(dashboard.url + "/request/run?id=ok.queued", jar: jar).status == 403)
        let post = try Curl.post(dashboard.url + "/request/run?id=ok.queued", form: ["csrf": csrf], jar: jar)
        #expect(post.status == 403)
        #expect(try await dashboard.history("ok.queued").isEmpty)

        // Without the control socket: reads, acts on nothing, says why.
        try dashboard.startDashboard([
            "--store", dashboard.store, "--credentials", dashboard.credentials, "--listen", "0",
        ])
        let bare = try Curl.request(dashboard.url + "/request?id=ok.queued", bearer: dashboard.token)
        #expect(bare.body.contains("without the daemon&#39;s control socket"))
        #expect(
            try Curl.post(dashboard.url + "/request/cancel?id=ok.queued", bearer: dashboard.token).status
                == 403)
        #expect(try await dashboard.inspected("ok.queued")?.state == .blocked)
    }

    @Test func badSetupIsRefusedWithAClearErrorAndLeavesTheSchedule() throws {
        let dashboard = try DashboardUnderTest()
        defer { dashboard.stop() }
        let open = dashboard.folder + "/open-credentials"
        _ = FileManager.default.createFile(
            atPath: open, contents: Data("alice:\(dashboard.token)\n".utf8), attributes: [.posixPermissions: 0o644])
        let cases: [([String], String)] = [
            (["--store", dashboard.store, "--credentials", open], "can be read by others"),
            (["--store", dashboard.store], "no credentials"),
            (
                ["--store", dashboard.folder + "/absent.db", "--credentials", dashboard.credentials],
                "no schedule store"
            ),
            (["--store", dashboard.credentials, "--credentials", dashboard.credentials], "schedule store"),
            (["--store", dashboard.store, "--credentials", dashboard.credentials, "--listen", "nope"], "--listen"),
            (
                ["--store", dashboard.store, "--credentials", dashboard.credentials, "--mount-path", "dash/"],
                "mountPath"
            ),
            (
                ["--store", dashboard.store, "--credentials", dashboard.credentials, "--allowed-host", "a.example:80"],
                "--allowed-host"
            ),
        ]
        let before = try Data(contentsOf: URL(fileURLWithPath: dashboard.credentials))
        for (arguments, message) in cases {
            let (status, output) = try DashboardUnderTest.run("overtime-dashboard", arguments)
            #expect(status == 64, "\(arguments): \(status) \(output)")
            #expect(output.contains(message), "\(arguments): \(output)")
        }
        // Two dashboards on one address: the second says so and leaves the first serving.
        let taken = try DashboardUnderTest.run(
            "overtime-dashboard",
            [
                "--store", dashboard.store, "--credentials", dashboard.credentials, "--listen",
                "127.0.0.1:\(dashboard.port)",
            ])
        #expect(taken.status == 69 && taken.output.contains("the address is in use"), "\(taken)")
        #expect(try Curl.request(dashboard.url + "/requests", bearer: dashboard.token).status == 200)
        let short = dashboard.folder + "/short"
        _ = FileManager.default.createFile(
            atPath: short, contents: Data("alice:short\n".utf8), attributes: [.posixPermissions: 0o600])
        let (status, output) = try DashboardUnderTest.run(
            "overtime-dashboard", ["--store", dashboard.store, "--credentials", short])
        #expect(status == 64 && output.contains("at least 16 characters"), "\(output)")
        #expect(try Data(contentsOf: URL(fileURLWithPath: dashboard.credentials)) == before)
        #expect(!FileManager.default.fileExists(atPath: dashboard.folder + "/absent.db"), "nothing created")
    }

    @Test func theLiveFeedServesABoundedNumberOfPagesAndGivesPlacesBack() throws {
        let dashboard = try DashboardUnderTest()
        defer { dashboard.stop() }
        // Clients that come and go at once take no place for good.
        for _ in 0..<100 { _ = try EventStreamClient(port: dashboard.port, token: dashboard.token) }
        let places = 1_000
        var open = try (0..<places).map { _ in try EventStreamClient(port: dashboard.port, token: dashboard.token) }
        for client in open { #expect(client.read(until: "retry: 2000"), "a place for each of the \(places)") }
        // The next is told, in an event its page shows (before, a comment line it could not).
        let turnedAway = try EventStreamClient(port: dashboard.port, token: dashboard.token)
        #expect(turnedAway.read(until: "event: full\ndata: too many live pages are open"))
        // A change reaches every open page.
        _ = try dashboard.control("submit", ["ok.fresh"])
        #expect(open.allSatisfy { $0.read(until: "event: change") })
        // Once they leave, their places serve others.
        open.removeAll()
        #expect(
            try waitFor {
                try EventStreamClient(port: dashboard.port, token: dashboard.token).read(
                    until: "retry: 2000", seconds: 1)
            })
    }

    @Test func mountedUnderAPathEveryLinkStaysUnderIt() throws {
        let dashboard = try DashboardUnderTest(mountPath: "/ops/schedule")
        defer { dashboard.stop() }
        let answer = try Curl.request(dashboard.url + "/requests?state=all", bearer: dashboard.token)
        #expect(answer.status == 200)
        let links = answer.body.components(separatedBy: "href=\"").dropFirst().map { $0.prefix { $0 != "\"" } }
        #expect(!links.isEmpty && links.allSatisfy { $0.hasPrefix("/ops/schedule/") }, "\(links)")
        let outside = try Curl.request(
            "http://127.0.0.1:\(dashboard.url.split(separator: ":")[2].prefix { $0.isNumber })/requests")
        #expect(outside.status == 404 && outside.headers["x-frame-options"] == "DENY", "\(outside)")
    }
}

/// Waits up to 10 s for `condition`, which reads asynchronously (an inspector).
func waitFor(_ condition: () async throws -> Bool) async rethrows -> Bool {
    let deadline = ContinuousClock.now + .seconds(10)
    while ContinuousClock.now < deadline {
        if try await condition() { return true }
        try? await Task.sleep(for: .milliseconds(50))
    }
    return try await condition()
}

/// Waits up to 10 s for `condition`.
func waitFor(_ condition: () throws -> Bool) rethrows -> Bool {
    let deadline = Date().addingTimeInterval(10)
    while Date() < deadline {
        if try condition() { return true }
        usleep(50_000)
    }
    return try condition()
}

import Foundation
import OvertimeTestSupport

/// A real Prometheus server (Debian's `prometheus`) scraping `targets` (job name → port)
/// every second, in a folder of its own, on a free loopback port; stopped with ``stop()``.
final class PrometheusServer {
    let port: Int
    private let process: SpawnedProcess
    private let folder: TemporaryDirectory

    init(targets: [String: Int], rules: String? = nil) throws {
        folder = TemporaryDirectory("prometheus")
        port = try freeLoopbackPort()
        var config = """
            global:
              scrape_interval: 1s
              scrape_timeout: 900ms
              evaluation_interval: 1s
            scrape_configs:

            """
        for (job, target) in targets.sorted(by: { $0.key < $1.key }) {
            config += """
                  - job_name: \(job)
                    static_configs:
                      - targets: ['127.0.0.1:\(target)']

                """
        }
        if let rules {
            config += "rule_files: ['\(rules)']\n"
        }
        try config.write(toFile: folder.path + "/prometheus.yml", atomically: true, encoding: .utf8)
        process = try launchServer(
            "/usr/bin/prometheus",
            [
                "--config.file=\(folder.path)/prometheus.yml", "--storage.tsdb.path=\(folder.path)/data",
                "--web.listen-address=127.0.0.1:\(port)",
            ], port: port)
        // Ready once it answers (503 while it starts), and what answers must be this one:
        // another test's server may have taken the port meanwhile.
        var flags = httpGet(port: port, "/api/v1/status/flags")
        for _ in 0..<200 {
            guard flags?.status != 200 else { break }
            usleep(50_000)
            flags = httpGet(port: port, "/api/v1/status/flags")
        }
        guard let flags, flags.body.contains(folder.path) else {
            let running = process.isRunning
            stopServer(process)
            folder.remove()
            throw NSError(
                domain: "PrometheusServer", code: Int(EADDRINUSE),
                userInfo: [
                    NSLocalizedDescriptionKey:
                        "not our Prometheus on port \(port) (it \(running ? "runs" : "exited")): "
                        + (flags.map { "\($0.status) \($0.body.prefix(200))" } ?? "no answer")
                ])
        }
    }

    func stop() {
        stopServer(process)
        folder.remove()
    }

    /// The samples of `query` (PromQL) now: each series' labels and value.
    func query(_ query: String) -> [(labels: [String: String], value: Double)]? {
        let encoded = query.addingPercentEncoding(withAllowedCharacters: .alphanumerics) ?? query
        guard let answer = httpGet(port: port, "/api/v1/query?query=\(encoded)"), answer.status == 200,
            let json = try? JSONSerialization.jsonObject(with: Data(answer.body.utf8)) as? [String: Any],
            json["status"] as? String == "success", let data = json["data"] as? [String: Any],
            let result = data["result"] as? [[String: Any]]
        else { return nil }
        return result.compactMap { series in
            guard let labels = series["metric"] as? [String: String], let pair = series["value"] as? [Any],
                pair.count == 2, let text = pair[1] as? String, let value = Double(text)
            else { return nil }
            return (labels, value)
        }
    }

    /// The one value of `query`, or `nil` when it has none or several.
    func value(_ query: String) -> Double? {
        guard let samples = self.query(query), samples.count == 1 else { return nil }
        return samples[0].value
    }

    /// The alerts firing or pending now, by name.
    func alerts() -> [String: String] {
        guard let answer = httpGet(port: port, "/api/v1/alerts"), answer.status == 200,
            let json = try? JSONSerialization.jsonObject(with: Data(answer.body.utf8)) as? [String: Any],
            let data = json["data"] as? [String: Any], let alerts = data["alerts"] as? [[String: Any]]
        else { return [:] }
        var states: [String: String] = [:]
        for alert in alerts {
            if let labels = alert["labels"] as? [String: String], let name = labels["alertname"],
                let state = alert["state"] as? String
            {
                states[name] = state
            }
        }
        return states
    }
}
